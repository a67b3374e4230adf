"""A run written by a leaderboard-era lm-eval (issue 62): tests/data/lm-eval-0.4.4 is the real `lm_eval` 0.4.4 console
run of the embedded model on the embedded profile's demo data (--limit 16), made by scripts/make_legacy_run.py. Its
format is the Open LLM Leaderboard v2 details': no lm_eval_version in the results, no `filter` or `metrics` on a
sample line. Adopted model-free (exit 4 with every check named) and rescored (PASS, bit for bit), tampered with row
by row, and mutated."""

import json
import random
import shutil
from pathlib import Path

import pytest

from support.lm_eval_files import adopt_each, copy_run, edit_sample, misbehaved, mutations, rehash
from support.paths import LOCK, REPO, VENV_BIN
from support.processes import run_script

RUN = REPO / "tests" / "data" / "lm-eval-0.4.4"
ADOPT = str(VENV_BIN / "sst2-audit")
NOT_LOGGED = ("results: lm_eval_version is not logged (lm-eval 0.4.8 and earlier log none, the Open LLM Leaderboard "
              "v2's writer among them; docs/formats.md): the run is held to lm-eval 0.4.9.2's computation")


@pytest.fixture(scope="module")
def open_lock(tmp_path_factory) -> Path:
    """The shipped lock with no sealed rows: a reviewer who audits published runs and keeps no confirmation set
    (with the shipped lock's 128 sealed rows, 9 of the run's first 16 rows are sealed and never rescored: exit 4)."""
    raw = json.loads(LOCK.read_text())
    raw["split"]["confirm_rows"] = 0
    lock = tmp_path_factory.mktemp("open-lock") / "open.lock.json"
    lock.write_text(json.dumps(raw, indent=2))
    return lock


def adopt(run: Path, cache: Path, *args, cwd: Path, lock: Path = LOCK):
    return run_script(ADOPT, "adopt", run, "--lock", lock, "--profile", "embedded", "--cache", cache, *args, cwd=cwd)


def test_a_leaderboard_era_run_is_rescored_bit_for_bit_and_its_folder_and_bundle_pass(embedded_cache, open_lock,
                                                                                      tmp_path):
    done = adopt(RUN, embedded_cache, "--run-name", "legacy", "--bundle", cwd=tmp_path, lock=open_lock)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0"
    assert lines[1] == "sst2 acc: reported 0.375 (their scores) / rescored 0.375 (yours, 16 rows)"
    assert NOT_LOGGED in " ".join(done.stdout.split())
    assert "  rows: 16 of 264, lm-eval's --limit 16: its first 16 rows" in lines
    assert "  rows: 16 bit for bit" in lines
    for how in (["--out", tmp_path / "runs" / "legacy"], ["--bundle-file", tmp_path / "results" / "legacy.tar.gz"]):
        again = run_script(ADOPT, "audit", "--lock", open_lock, "--cache", embedded_cache, *how, cwd=tmp_path)
        assert again.returncode == 0 and "adopted record: PASS" in again.stdout, again.stdout + again.stderr


def _structural(run: Path, cache: Path, tmp_path: Path, out: str = "adopted"):
    return adopt(run, cache, "--structural", "--out", tmp_path / out, cwd=tmp_path)


def test_without_the_model_every_other_level_runs_and_the_verdict_says_scores_not_verified(embedded_cache, tmp_path):
    done = _structural(RUN, embedded_cache, tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: none of the 16 logged rows was rescored "
                                  "(--structural); exit 4\nsst2 acc: reported 0.375 (their scores) / not rescored here")
    for line in ("claims: PASS (11 checks)", "identity: PASS (112 checks)", "arithmetic: PASS (18 checks)",
                 "rescore: SKIPPED (--structural)"):
        assert line in done.stdout.splitlines(), done.stdout
    assert NOT_LOGGED in " ".join(done.stdout.split())


def test_the_leaderboards_json_named_samples_file_is_read_as_json_lines(embedded_cache, tmp_path):
    results, samples = copy_run(RUN, tmp_path / "run")
    samples.rename(samples.with_suffix(".json"))
    done = _structural(tmp_path / "run", embedded_cache, tmp_path)
    assert done.returncode == 4 and "identity: PASS (112 checks)" in done.stdout, done.stdout + done.stderr
    shutil.copyfile(samples.with_suffix(".json"), samples)  # both names: which one the run wrote is not known
    done = _structural(tmp_path / "run", embedded_cache, tmp_path, out="again")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"both {samples.name} and {samples.with_suffix('.json').name} are there" in done.stderr


def test_files_added_to_an_adopted_folder_are_named_as_read_by_no_level(embedded_cache, tmp_path):
    """A note someone put beside the records (`REVIEW.md: verified`, a folder) is not part of an adopted folder: the
    audit names it under its last level rather than seeming to vouch for it; the verdict is the records'."""
    assert _structural(RUN, embedded_cache, tmp_path).returncode == 4
    unread = "  in the folder but no part of it, so neither read nor vouched for here: "
    done = run_script(ADOPT, "audit", "--out", tmp_path / "adopted", "--cache", embedded_cache, "--structural")
    assert done.returncode == 4 and unread not in done.stdout, done.stdout + done.stderr
    (tmp_path / "adopted" / "REVIEW.md").write_text("verified by the reviewer")
    (tmp_path / "adopted" / "more").mkdir()
    done = run_script(ADOPT, "audit", "--out", tmp_path / "adopted", "--cache", embedded_cache, "--structural")
    lines = done.stdout.splitlines()
    assert done.returncode == 4 and lines[-2:] == [f"{unread}REVIEW.md, more/", lines[0]], done.stdout


def test_an_adopted_record_naming_a_profile_your_lock_lacks_says_it_is_the_record_s_word(embedded_cache, tmp_path):
    """adopted.json's profile, edited to one the reviewer's lock does not define: exit 2 naming the record's field,
    not "unknown profile" blamed on the reviewer's own lock."""
    assert _structural(RUN, embedded_cache, tmp_path).returncode == 4
    record = json.loads((tmp_path / "adopted" / "adopted.json").read_text())
    record["profile"] = "nope"
    (tmp_path / "adopted" / "adopted.json").write_text(json.dumps(record, indent=2))
    done = run_script(ADOPT, "audit", "--out", tmp_path / "adopted", "--cache", embedded_cache, "--structural")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"error: {tmp_path / 'adopted' / 'adopted.json'}: profile 'nope': your lock {LOCK} defines no such profile "
        "(embedded, embedded-inverse-scaling, embedded-rte, glue-sst2); the adoption was made against another lock, "
        "or its record was edited.")


def test_a_samples_file_of_more_lines_than_the_split_can_log_is_refused_at_that_line(embedded_cache, tmp_path):
    """The run's first line repeated 2 x 264 + 17 times (a forger's file may hold its 512 MiB limit of them: 572,992
    lines took 38 s and 731 MB to refuse after reading them all): refused at the first line past the bound."""
    results, samples = copy_run(RUN, tmp_path / "run")
    first = samples.read_text().splitlines(keepends=True)[0]
    samples.write_text(first * (2 * 264 + 17))
    done = _structural(tmp_path / "run", embedded_cache, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (f"error: {samples}: more than 544 samples, more than a run of the split "
                                            "can log; refused at line 545.")


def _leak(row: dict) -> None:
    """The evaluated document shown as its own shot, before its prompt (a few-shot leak)."""
    label = ("negative", "positive")[row["doc"]["label"]]
    for request in row["arguments"].values():
        request["arg_0"] = f"{row['doc']['sentence']}\nQuestion: Is this sentence positive or negative?\nAnswer: " \
                           f"{label}\n\n{request['arg_0']}"


TAMPERING = {  # each kept consistent with lm-eval's task hash, as a forger would
    "mislabelled doc_id": ("swap", "identity", "logged doc_id {moved} holds the doc of row idx [{idx}]"),
    "stale prompt": (lambda r: [q.__setitem__("arg_0", "a stale sentence .\nQuestion: Is this sentence positive or "
                                                       "negative?\nAnswer:") for q in r["arguments"].values()],
                     "identity", "doc_id {idx}: arguments"),
    "few-shot leak": (_leak, "identity", "doc_id {idx}: arguments"),
    "duplicated row": (None, "identity", "doc_id {idx}: logged twice"),
}


@pytest.mark.parametrize("what", sorted(TAMPERING))
def test_a_tampered_row_is_named(embedded_cache, tmp_path, what):
    results, samples = copy_run(RUN, tmp_path / "run")
    change, level, named = TAMPERING[what]
    if change is None:
        lines = samples.read_text().splitlines()
        samples.write_text("\n".join([*lines[:4], lines[3], *lines[4:]]) + "\n")
        idx = json.loads(lines[3])["doc_id"]
    elif change == "swap":  # rows 3 and 4 logged under each other's doc_id (lm-eval #4084's shape)
        idx = edit_sample(samples, 3, lambda r: r.__setitem__("doc_id", r["doc_id"] + 1))
        edit_sample(samples, 4, lambda r: r.__setitem__("doc_id", r["doc_id"] - 1))
    else:
        idx = edit_sample(samples, 3, change)
    rehash(results, samples, legacy=True)
    done = _structural(tmp_path / "run", embedded_cache, tmp_path)
    assert done.returncode == 1 and done.stdout.startswith(f"VERDICT: FAIL ({level}); exit 1"), done.stdout
    assert named.format(idx=idx, moved=idx - 1) in done.stdout, done.stdout
    assert not (tmp_path / "adopted").exists()


def test_an_edited_aggregate_is_re_derived_from_the_rows(embedded_cache, tmp_path):
    results, _ = copy_run(RUN, tmp_path / "run")
    raw = json.loads(results.read_text())
    raw["results"]["sst2"]["acc,none"] += 0.0625  # one more right answer of 16
    results.write_text(json.dumps(raw))
    done = _structural(tmp_path / "run", embedded_cache, tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (arithmetic); exit 1"), done.stdout
    assert "results: acc,none: expected 0.375, got 0.4375" in done.stdout


@pytest.mark.slow
def test_generated_mutations_of_a_leaderboard_era_run_never_pass(embedded_cache, open_lock, tmp_path):
    """210 mutations (bytes, values, lines) of the real 0.4.4 files, every row rescored: each exit 1 or 2, one
    paragraph, none PASS. None loads the model, and none hashes it whole either: the model's hash, started beside
    the record levels, stops when a level fails (it was 0.45 s of the other core a case, 33 s -> 5 s for these)."""
    codes = adopt_each(mutations(RUN, tmp_path, random.Random(62), 210), open_lock, embedded_cache, tmp_path)
    assert len(codes) == 210 and misbehaved(codes) == {}
    assert {found["code"] for found in codes.values()} == {1, 2}
    model = (embedded_cache / "model" / "model.safetensors").stat().st_size
    assert sum(found["read"] for found in codes.values()) < len(codes) * model / 4


def test_without_the_weights_the_model_free_levels_are_the_default(embedded_cache, tmp_path):
    """A reviewer with the data but not the model (prepare --no-weights): adopt runs every level but the rescore by
    itself and says why, exit 4; the adopted folder's audit says the same."""
    done = run_script("prepare.py", "--profile", "embedded", "--cache", tmp_path / "no-weights", "--no-weights")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "no-weights" / "model" / "model.safetensors").exists()
    done = adopt(RUN, tmp_path / "no-weights", "--run-name", "weightless", cwd=tmp_path)
    reason = "none of the 16 logged rows was rescored (your cache holds no weights: prepare --no-weights); exit 4"
    assert done.returncode == 4 and done.stdout.startswith(f"VERDICT: SCORES NOT VERIFIED: {reason}"), done.stdout
    assert "rescore: SKIPPED (your cache holds no weights: prepare --no-weights)" in done.stdout.splitlines()
    assert "identity: PASS (112 checks)" in done.stdout.splitlines()
    again = run_script(ADOPT, "audit", "--out", tmp_path / "runs" / "weightless", "--cache", tmp_path / "no-weights",
                       cwd=tmp_path)
    assert again.returncode == 4 and f"VERDICT: SCORES NOT VERIFIED: {reason}" in again.stdout, again.stdout
