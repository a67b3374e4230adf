"""The README's journeys, verbatim, with the installed command (`sst2-audit`, the venv's bin first on
PATH as after `. .venv/bin/activate`): run, audit a bundle someone sent you, audit your own model, adopt a plain
lm-eval run. Each run's next step is the exact audit command its console printed, and its page's hint is the same
command."""

import csv
import hashlib
import html
import json
import re
import shutil

from support.builders import tiny_model_folder
from support.paths import REPO
from support.processes import readme_journeys, run_installed

PASS = "VERDICT: PASS: every level passed and every scored row was rescored bit for bit"
NEXT = "  next          audit (every row rescored; add --bundle to pack it): "


def test_the_readme_holds_five_journeys_of_the_installed_command():
    journeys = readme_journeys()
    assert [[line.split()[1] for line in journey if line.startswith("sst2-audit ")] for journey in journeys] == [
        ["prepare", "run", "audit"], ["prepare", "audit"], ["prepare", "prepare", "run", "audit"],
        ["prepare", "adopt", "audit"], ["prepare", "adopt"]]
    # every line is the installed command, but the plain `lm_eval` runs the two adopt journeys make
    assert [line.split()[0] for journey in journeys for line in journey if not line.startswith("sst2-audit ")] == [
        "env", "env"]
    # docs/cli.md shows the own-model journey too: the same four lines
    cli = (REPO / "docs" / "cli.md").read_text().split("## prepare.py --pin", 1)[1].split("```\n")[1]
    assert cli.splitlines() == journeys[2]


def test_journey_1_run_then_audit_through_the_printed_command(full_run):
    """The fixture ran the journey (conftest.full_run); the audit line is what the run printed, plus --bundle."""
    _, _, audit = readme_journeys()[0]
    printed = (full_run / "console.txt").read_text().splitlines()[-1]
    assert printed == f"{NEXT}sst2-audit audit --out runs/my-run"
    assert audit == printed.removeprefix(NEXT) + " --bundle"
    out = (full_run / "audit.stdout.txt").read_text()
    assert out.startswith(PASS) and out.splitlines()[-1] == "bundle: results/my-run.tar.gz", out[-2000:]
    assert (full_run / "results" / "my-run.tar.gz").is_file()


def test_journey_2_audit_a_bundle_someone_sent_you(embedded_cache, tmp_path):
    (tmp_path / "cache").symlink_to(embedded_cache)
    (tmp_path / "results").mkdir()
    shutil.copyfile(REPO / "results" / "embedded-full-reference.tar.gz",
                    tmp_path / "results" / "embedded-full-reference.tar.gz")
    for line in readme_journeys()[1]:
        done = run_installed(line, tmp_path)
        assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
    assert done.stdout.startswith(PASS) and "scores: 0 of 128 differ, max abs diff 0" in done.stdout


def _own_files(folder, embedded_cache) -> None:
    """A tiny random model with SmolLM2's tokenizer in my-model/, RTE-shaped data in my-data/."""
    model = folder / "my-model"
    tiny_model_folder(model, 11, embedded_cache, max_shard_size="4MB")
    data = folder / "my-data"
    data.mkdir()
    rows = [{"sentence1": f"Example premise {n}: a lamp stood by door {n}.", "sentence2": f"A lamp stood by door {n}.",
             "label": n % 2, "idx": n} for n in range(200)]
    (data / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:8]))
    with (data / "validation.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_journey_3_audit_your_own_model_through_the_printed_and_the_page_command(embedded_cache, tmp_path):
    _own_files(tmp_path, embedded_cache)
    *setup, run, audit = readme_journeys()[2]
    for line in setup + [run]:
        done = run_installed(line, tmp_path)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
    printed = done.stdout.splitlines()[-1].removeprefix(NEXT)
    assert printed == "sst2-audit audit --out runs/mine-full --lock mine.lock.json --cache cache-mine"
    assert audit == printed + " --bundle"
    # the page's hint names the same command, its placeholders filled with this run's folder, lock and cache
    page = (tmp_path / "runs" / "mine-full" / "report.html").read_text()
    hint = html.unescape(re.search(r"<code>(sst2-audit audit --out [^<]*)</code>", page).group(1))
    lock_sha = hashlib.sha256((tmp_path / "mine.lock.json").read_bytes()).hexdigest()
    assert hint == f"sst2-audit audit --out <this run's folder> --lock <the lock of sha256 {lock_sha[:12]}…> " \
                   "--cache <its cache>"
    filled = hint.replace("<this run's folder>", "runs/mine-full").replace(
        f"<the lock of sha256 {lock_sha[:12]}…>", "mine.lock.json").replace("<its cache>", "cache-mine")
    assert filled == printed
    for line in (printed, audit):
        done = run_installed(line, tmp_path)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        assert done.stdout.startswith(PASS)
    assert done.stdout.splitlines()[-1] == "bundle: results/mine-full.tar.gz"
    assert (tmp_path / "results" / "mine-full.tar.gz").is_file()


def test_journey_4_adopt_a_plain_lm_eval_run(embedded_cache, tmp_path):
    """prepare writes the task YAML and rows and prints the lm_eval line (the README's, verbatim); that real `lm_eval`
    console run of the embedded model (float32, the lock's numeric mode, the first 16 dev rows) is adopted with no
    --profile, bit for bit, bundled, and the bundle's default audit PASS (issue 60)."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "cache").symlink_to(embedded_cache)
    prepare, lm_eval, adopt, audit = readme_journeys()[3]
    printed = {}
    for line in (prepare, lm_eval, adopt, audit):
        if line == lm_eval:  # as typed with the venv active: its bin first on PATH
            path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
            done = subprocess.run(shlex.split(line), capture_output=True, text=True, cwd=tmp_path,
                                  env=dict(os.environ, PATH=path, HF_DATASETS_CACHE=str(tmp_path / "datasets")))
            assert done.returncode == 0, done.stderr[-3000:]
            continue
        done = run_installed(line, tmp_path)
        assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
        printed[line.split()[1]] = done.stdout.splitlines()
    assert printed["prepare"][-1] == lm_eval  # the line prepare printed is the README's
    assert json.loads((tmp_path / "lm-eval-task" / "samples.json").read_text())["sst2"] == sorted(
        json.loads((tmp_path / "lm-eval-task" / "samples.json").read_text())["sst2"])
    for command in ("adopt", "audit"):  # the verdict first and last, the reviewer's number and the demo under it
        lines = printed[command]
        assert lines[0].startswith(PASS) and lines[2].startswith("*** EMBEDDED DEMO: "), lines[:3]
        assert lines[1].startswith("sst2 acc: reported ") and lines[1].endswith(" rows)"), lines[1]
        assert lines[1].split()[3] == lines[1].split()[8]  # a float32 run: their number is yours
    assert printed["adopt"][-2:] == [
        "adopted: runs/plain (audit it: sst2-audit audit --out runs/plain)",
        "bundle: results/plain.tar.gz"]
    assert printed["audit"][-1].startswith(PASS)
    assert any(line.startswith("adopted record: PASS (") for line in printed["audit"])
    record = json.loads((tmp_path / "runs" / "plain" / "adopted.json").read_text())
    assert record["row_classes"]["bit for bit"] == 16 and record["demo"] is True


def test_journey_5_adopt_an_instruct_model_s_chat_template_run(tmp_path):
    """The embedded Instruct model as the leaderboard ran chat models: prepare prints the lm_eval line with the chat
    flags (the README's, verbatim); that real run (3 shots as turns, a system instruction, the GGUF's own template) is
    adopted: every logged prompt re-rendered by the sandboxed renderer, every score rescored bit for bit (issue 61)."""
    import os
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    from support.paths import DEMOS

    (tmp_path / "demos.lock.json").symlink_to(DEMOS)
    (tmp_path / "data").symlink_to(REPO / "data")
    prepare, lm_eval, adopt = readme_journeys()[4]
    done = run_installed(prepare, tmp_path)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == lm_eval, done.stdout + done.stderr
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    ran = subprocess.run(shlex.split(lm_eval), capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PATH=path, HF_DATASETS_CACHE=str(tmp_path / "datasets")))
    assert ran.returncode == 0, ran.stderr[-3000:]
    done = run_installed(adopt, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(PASS) and "  rows: 8 bit for bit" in done.stdout.splitlines(), done.stdout
