"""`sst2-audit corpus FOLDER` (issue 62): many real lm-eval runs under one folder (the real lm-eval 0.4.4 run of
tests/data/lm-eval-0.4.4, copies of it edited as a forger would, a file that is no results file), adopted in one
command: one line per run, corpus.json and corpus.csv, the worst verdict, a pass that resumes, a changed lock
refused; corpus.json's generated edits refused as bad input."""

import csv
import json
import re
import random
import shutil
import sys

import pytest

from support.lm_eval_files import copy_run
from support.paths import LOCK, REPO, VENV_BIN
from support.processes import run_script

RUN = REPO / "tests" / "data" / "lm-eval-0.4.4"
COMMAND = str(VENV_BIN / "sst2-audit")


@pytest.fixture(scope="module")
def open_lock(tmp_path_factory):
    """The shipped lock without sealed rows (tests/formats/test_legacy_writer.py says why)."""
    raw = json.loads(LOCK.read_text())
    raw["split"]["confirm_rows"] = 0
    lock = tmp_path_factory.mktemp("corpus-lock") / "open.lock.json"
    lock.write_text(json.dumps(raw, indent=2))
    return lock


def _corpus(folder):
    copy_run(RUN, folder / "org__honest")
    copy_run(RUN, folder / "org__twin")  # the same run published twice: the pass's loaded model serves the second
    results, _ = copy_run(RUN, folder / "org__edited")
    raw = json.loads(results.read_text())
    raw["results"]["sst2"]["acc,none"] += 0.0625  # one more right answer of 16: the arithmetic level names it
    results.write_text(json.dumps(raw))
    (folder / "org__broken").mkdir()
    (folder / "org__broken" / "results_2024-01-01T00-00-00.json").write_text('{"results": 3}')


def corpus(folder, out, lock, cache, *more, cwd):
    return run_script(COMMAND, "corpus", folder, "--lock", lock, "--cache", cache, "--out", out, *more, cwd=cwd)


def test_many_runs_are_adopted_in_one_pass_ranked_and_resumed(embedded_cache, open_lock, tmp_path):
    _corpus(tmp_path / "details")
    out = tmp_path / "corpus"
    done = corpus(tmp_path / "details", out, open_lock, embedded_cache, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "VERDICT: FAIL: 4 runs: 1 ERROR, 1 FAIL, 2 PASS; exit 1"
    assert lines[1] == ("  org__edited/results_2026-12-06T15-04-17.226634.json: FAIL (exit 1): sst2 acc 0.438 / - -- "
                        "results: acc,none: expected 0.375, got 0.4375")
    assert lines[2].startswith("  org__broken/results_2024-01-01T00-00-00.json: ERROR (exit 2) -- ")
    assert "[corpus 3/4] org__honest/results_2026-12-06T15-04-17.226634.json: PASS (exit 0): sst2 acc 0.375 / 0.375" \
        in done.stderr.splitlines()
    logs = {path.name: path.read_text() for path in (out / "logs").iterdir()}
    loaded = [name for name, words in logs.items() if "[rescore: verify and load the model (hash before load)]" in words]
    reused = [name for name, words in logs.items() if "[model] the model verified and loaded for an earlier task in "
              "this process" in words]
    assert len(loaded) == 1 and len(reused) == 1 and loaded != reused, logs  # one load for the pass's two rescores
    assert sum("[load the tokenizer] done in" in words for words in logs.values()) == 1, logs  # and one tokenizer
    again = [name for name, words in logs.items() if "[rescore] 16 of 16 rows: requests this process rescored before "
             "(the same model, tokens and threads), their scores taken again" in words]
    assert again == reused, logs  # the twin's requests are the first's: scored once, its numbers the same below
    record = json.loads((out / "corpus.json").read_text())
    assert record["kind"] == "sst2-audit/corpus" and record["rescore"] == "all"
    entries = {entry["results"].split("/")[0]: entry for entry in record["runs"]}
    assert {name: (e["exit_code"], e["verdict"]) for name, e in entries.items()} == {
        "org__broken": (2, "ERROR"), "org__edited": (1, "FAIL"), "org__honest": (0, "PASS"), "org__twin": (0, "PASS")}
    assert entries["org__twin"]["numbers"] == entries["org__honest"]["numbers"]
    assert entries["org__broken"]["reason"].endswith("org__broken/results_2024-01-01T00-00-00.json: expected an lm-eval "
                                                     "results file (an object with a `results` object).")
    assert entries["org__edited"]["adopted"] is None and entries["org__broken"]["adopted"] is None
    assert entries["org__honest"]["numbers"] == [{"task": "sst2", "metric": "acc", "reported": 0.375,
                                                  "rescored": 0.375, "rows": 16, "whose": "yours"}]
    table = list(csv.DictReader((out / "corpus.csv").open(newline="")))
    assert [(row["results"].split("/")[0], row["rescored"], row["verdict"]) for row in table] == [
        ("org__broken", "", "ERROR"), ("org__edited", "", "FAIL"), ("org__honest", "0.375", "PASS"),
        ("org__twin", "0.375", "PASS")]
    page = (out / "corpus.html").read_text()
    assert "<b>VERDICT: FAIL</b> (exit 1):\n1 ERROR, 1 FAIL, 2 PASS</p>" in page
    assert [name.split("/")[0] for name in re.findall(r'<td class="n">\d+</td><td><code>([^<]*)</code>', page)] == \
        ["org__edited", "org__broken", "org__honest", "org__twin"]  # ranked as the console ranks them: failures, refused, passes
    adopted = out / entries["org__honest"]["adopted"]
    again = run_script(COMMAND, "audit", "--out", adopted, "--lock", open_lock, "--cache", embedded_cache, cwd=tmp_path)
    assert again.returncode == 0 and "adopted record: PASS" in again.stdout, again.stdout + again.stderr
    # a second pass: every unchanged file kept, a new run adopted
    copy_run(RUN, tmp_path / "details" / "org__late")
    resumed = corpus(tmp_path / "details", out, open_lock, embedded_cache, cwd=tmp_path)
    assert resumed.returncode == 1 and resumed.stdout.startswith("VERDICT: FAIL: 5 runs: 1 ERROR, 1 FAIL, 3 PASS")
    assert resumed.stderr.count("kept from the last pass") == 4, resumed.stderr
    assert "[corpus 4/5] org__late/results_2026-12-06T15-04-17.226634.json: PASS (exit 0)" in resumed.stderr
    # a run gone from the folder: its entry is dropped and said so, its adopted folder (none here) stays
    shutil.rmtree(tmp_path / "details" / "org__broken")
    third = corpus(tmp_path / "details", out, open_lock, embedded_cache, cwd=tmp_path)
    assert third.returncode == 1 and third.stdout.startswith("VERDICT: FAIL: 4 runs: 1 FAIL, 3 PASS"), third.stdout
    assert "[corpus] 1 entry of the last pass whose file is no longer under " in third.stderr
    assert "dropped: org__broken/results_2024-01-01T00-00-00.json" in third.stderr
    # another lock: refused, nothing of the corpus changed
    before = (out / "corpus.json").read_bytes()
    refused = corpus(tmp_path / "details", out, LOCK, embedded_cache, cwd=tmp_path)
    assert refused.returncode == 2 and "a corpus's entries are never mixed" in refused.stderr, refused.stderr
    assert (out / "corpus.json").read_bytes() == before


def test_a_structural_pass_loads_no_model_and_says_scores_not_verified(embedded_cache, tmp_path):
    copy_run(RUN, tmp_path / "details" / "a")
    results, samples = copy_run(RUN, tmp_path / "details" / "b")
    samples.rename(samples.with_suffix(".json"))  # the leaderboard's earliest name for the samples file
    done = corpus(tmp_path / "details", tmp_path / "corpus", LOCK, embedded_cache, "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "VERDICT: NOT EVERY RUN VERIFIED: 2 runs: 2 SCORES NOT VERIFIED; exit 4"
    logs = [path.read_text() for path in (tmp_path / "corpus" / "logs").iterdir()]
    assert "[rescore: verify and load the model" not in "".join(logs)
    # lm-eval logs no tokens and nothing is rescored: no tokenizer loaded (its files still hashed in each run)
    assert not any("[load the tokenizer]" in words for words in logs), logs
    assert all("[verify the reviewer's data and tokenizer (hash before read)] done in" in words for words in logs)


def test_a_run_under_a_folder_name_that_is_not_utf8_is_named_and_resumed_never_our_bug(embedded_cache, tmp_path):
    """A details folder named on another system (the byte 0xff, no UTF-8): the run is adopted and named with that
    byte as \\xff in the pass's lines, records and table (it was exit 3: its name could not be hashed), and a resumed
    pass finds it again."""
    import os

    details = tmp_path / "details"
    details.mkdir()
    copy_run(RUN, details / os.fsdecode(b"org__bad\xff"))
    for again in ("", "kept from the last pass: "):
        done = corpus(details, tmp_path / "corpus", LOCK, embedded_cache, "--structural", cwd=tmp_path)
        assert done.returncode == 4, done.stdout + done.stderr
        name = next(line for line in done.stdout.splitlines() if line.startswith("  org__bad"))
        assert name.startswith("  org__bad\\xff/results_") and f"[corpus 1/1] {name.strip().split(':')[0]}: " \
            f"{again}SCORES NOT VERIFIED" in done.stderr, done.stderr
    table = list(csv.DictReader((tmp_path / "corpus" / "corpus.csv").open(newline="")))
    assert [row["results"].split("/")[0] for row in table] == ["org__bad\\xff"]


def test_a_corpus_record_edited_is_refused_as_bad_input(embedded_cache, tmp_path):
    """40 generated edits of corpus.json (a key dropped or added, a value of another type, bytes): exit 2 naming the
    file, never a traceback, and the pass does not start."""
    copy_run(RUN, tmp_path / "details" / "a")
    out = tmp_path / "corpus"
    done = corpus(tmp_path / "details", out, LOCK, embedded_cache, "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    original, rng = (out / "corpus.json").read_bytes(), random.Random(62)
    for number in range(40):
        raw = json.loads(original)
        entry = raw["runs"][0]
        kind = number % 4
        if kind == 0:
            del entry[rng.choice(sorted(entry))]
        elif kind == 1:
            raw[rng.choice(("note", "runs_extra"))] = 1
        elif kind == 2:
            entry[rng.choice(("exit_code", "numbers", "results_sha256", "verdict"))] = rng.choice(("x", None, 1.5))
        data = json.dumps(raw).encode() if kind != 3 else original[:rng.randrange(1, len(original) - 1)]
        (out / "corpus.json").write_bytes(data)
        again = corpus(tmp_path / "details", out, LOCK, embedded_cache, "--structural", cwd=tmp_path)
        assert again.returncode == 2 and "corpus.json" in again.stderr and "Traceback" not in again.stderr, \
            (number, again.stderr)
    shutil.rmtree(out)


def test_the_corpus_page_escapes_what_runs_said_and_answers_first_in_chromium(tmp_path):
    """corpus.html is a pure function of corpus.json: a hostile results path and finding are escaped, never markup;
    in headless Chromium the page fits 1280 px and its verdict is on the first screen."""
    from sst2_audit.formats.corpus import Corpus, CorpusEntry
    from sst2_audit.pages.corpus import render_corpus

    hostile = '<script>alert(1)</script>"&'
    runs = [CorpusEntry(f"org__{n}/{hostile}/results_{n}.json", "0" * 64, None if n % 3 else f"run-{n}", n % 5 and 1,
                        "FAIL" if n % 5 else "PASS", "VERDICT", (hostile + " ") * (n % 4) * 20,
                        [{"task": "sst2", "metric": "acc", "reported": 0.375, "rescored": None, "rows": 16,
                          "whose": "yours"}]) for n in range(40)]
    page = render_corpus(Corpus("details", "a" * 64, "all", runs, "embedded"))
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;" in page
    assert "<b>VERDICT: FAIL</b> (exit 1):\n32 FAIL, 8 PASS</p>" in page
    assert render_corpus(Corpus("details", "a" * 64, "all", runs, "embedded")) == page  # the same record, the same bytes
    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed here (apt-get install chromium; .ci/run installs it)")
    sys.path.insert(0, str(REPO / "scripts"))
    from screenshot_report import screenshot

    (tmp_path / "corpus.html").write_text(page)
    size = screenshot(tmp_path / "corpus.html", tmp_path / "corpus.png")
    assert size["window"] == 1280 and size["width"] <= 1280 and size["wide"] == [], size
    assert size["verdict"] is not None and size["verdict"][1] <= 800, size


def test_no_text_cell_of_corpus_csv_is_a_spreadsheet_formula_and_json_keeps_the_text(tmp_path):
    """corpus.csv's text cells are someone else's text (a run's path, a task, a finding): generated ones that start
    as a spreadsheet formula does (`=HYPERLINK(...)`, `+`, `-`, `@`, a tab, a carriage return) are written behind a
    quote, every other text and every number as it is; read back by csv, each cell is the text with or without it,
    and a line break in a text (a carriage return alone among them) never starts a row."""
    from sst2_audit.formats.corpus import Corpus, CorpusEntry, FORMULA_START, table

    rng = random.Random(62)
    starts = [*FORMULA_START, "", "a", "'", " =", "0", "\u00a0"]
    texts = ["".join(rng.choice(starts) for _ in range(rng.randint(1, 3))) + rng.choice(['HYPERLINK("x";"y")',
             "cmd|' /C calc'!A0", "1+1", "", "org/model/results_1.json", "\n=2"]) for _ in range(300)]
    runs = [CorpusEntry(f"{texts[n]}/results_{n}.json", "0" * 64, None, 1, "FAIL", "VERDICT", texts[-n - 1],
                        [{"task": texts[(n * 7) % 300], "metric": "acc", "reported": -0.5 * n, "rescored": None,
                          "rows": n, "whose": "yours"}]) for n in range(300)]
    import io

    rows = list(csv.DictReader(io.StringIO(table(Corpus("details", "a" * 64, "all", runs, None)), newline="")))
    assert len(rows) == 300
    for row, entry in zip(rows, runs):
        for cell, text in ((row["results"], entry.results), (row["task"], entry.numbers[0]["task"]),
                           (row["reason"], entry.reason)):
            assert cell == ("'" + text if text.startswith(FORMULA_START) else text)
            assert not cell.startswith(FORMULA_START)
        assert row["reported"] == repr(entry.numbers[0]["reported"])  # a negative number stays a number
