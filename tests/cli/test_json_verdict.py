"""`--format json` (issue 60, point 4): run, audit and adopt print one typed verdict object on stdout, read back
here and held to the console verdict of the same command; findings carry their level, row and field."""

import json
import pickle
import random

import pytest

from support.paths import LOCK
from support.processes import run_cli, run_script
from support.lm_eval_files import edit_sample, rehash
from support.plain_runs import copy_sorted, ADOPT, adopt

from sst2_audit.audit.findings import Finding, LevelResult
from sst2_audit.audit.verdict import VERDICT_KIND

TOP = ["kind", "schema_version", "command", "subject", "verdict", "line", "exit_code", "levels", "limits"]


def _verdict(done) -> dict:
    """The whole of stdout is one JSON object, its exit code the process's."""
    found = json.loads(done.stdout)
    assert list(found)[:len(TOP)] == TOP and found["kind"] == VERDICT_KIND and found["schema_version"] == 1
    assert found["exit_code"] == done.returncode, (found, done.stderr[-2000:])
    return found


def _console_verdict(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("VERDICT: "))


def test_adopt_s_json_verdict_is_the_console_s_with_the_reviewer_s_numbers(plain, tmp_path):
    text = adopt(plain, plain / "sorted", "--run-name", "words", "--seed", "5", cwd=tmp_path)
    done = adopt(plain, plain / "sorted", "--run-name", "object", "--seed", "5", "--format", "json", cwd=tmp_path)
    found = _verdict(done)
    assert done.returncode == text.returncode == 0, done.stderr[-2000:]
    assert found["command"] == "adopt" and found["verdict"] == "PASS" and found["error"] is None
    assert found["line"] == _console_verdict(text.stdout)
    assert [(level["name"], level["status"]) for level in found["levels"]] == \
        [(level["name"], "PASS") for level in found["levels"]] and len(found["levels"]) == 4
    for level in found["levels"]:  # the console's status line of each level, from the same counts
        assert f"{level['name']}: PASS ({level['checks']} checks)" in text.stdout
    (number,) = found["numbers"]
    assert (number["task"], number["metric"], number["rows"], number["whose"]) == ("sst2", "acc", 16, "yours")
    assert number["reported"] == number["rescored"]  # bit for bit: the same number
    assert f"sst2 acc: reported {number['reported']:.3f} (their scores) / rescored {number['rescored']:.3f}" \
        in text.stdout
    assert "adopted: " in done.stderr and "adopted: " not in done.stdout  # the rest of what it says: stderr


def test_a_tampered_score_is_a_finding_with_its_row_and_the_audit_of_the_folder_agrees(plain, tmp_path):
    results, samples = copy_sorted(plain, tmp_path / "out")

    def moved(row):
        for response in row["resps"]:
            response[0][0] = str(float(response[0][0]) + 0.5)
        row["filtered_resps"] = [response[0] for response in row["resps"]]

    idx = edit_sample(samples, 3, moved)
    rehash(results, samples)
    text = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    done = adopt(plain, tmp_path / "out", "--seed", "1", "--format", "json", cwd=tmp_path)
    found = _verdict(done)
    assert done.returncode == 1 and found["verdict"] == "FAIL" and found["line"] == _console_verdict(text.stdout)
    failed = [level for level in found["levels"] if level["status"] == "FAIL"]
    assert [level["name"] for level in failed] == ["rescore (all rows, seed 1)"]
    rows = {finding["row"] for finding in failed[0]["findings"]}
    assert rows == {idx} and all(finding["level"] == failed[0]["name"] for finding in failed[0]["findings"])
    for finding in failed[0]["findings"]:
        assert f"  - {finding['words']}" in text.stdout


def test_an_audit_s_json_verdict_names_what_it_did_not_verify(full_run, embedded_cache):
    args = ("--out", full_run / "out", "--cache", embedded_cache, "--structural")
    text = run_cli("audit.py", *args)
    done = run_cli("audit.py", *args, "--format", "json")
    found = _verdict(done)
    assert done.returncode == text.returncode == 4
    assert found["verdict"] == "SCORES NOT VERIFIED" and found["line"] == _console_verdict(text.stdout)
    assert found["rows_not_rescored"] == ["none of the 64 scored rows was rescored (--structural)"]
    assert found["subject"] == str(full_run / "out") and found["numbers"] == []
    assert [(level["name"], level["status"]) for level in found["levels"]] == [
        ("lock", "PASS"), ("claims", "PASS"), ("arithmetic", "PASS"), ("identity", "PASS")]


def test_a_run_s_json_verdict_holds_both_paths_numbers(embedded_cache, tmp_path):
    done = run_script("run.py", "--cache", embedded_cache, "--smoke", "--out", tmp_path / "r", "--private",
                      tmp_path / "p", "--format", "json", cwd=tmp_path)
    found = _verdict(done)
    assert done.returncode == 0 and found["command"] == "run" and found["verdict"] == "PASS", done.stderr[-2000:]
    record = json.loads((tmp_path / "r" / "run.json").read_text())
    (number,) = found["numbers"]
    assert number["reported"] == record["summaries"]["official"]["acc"]["value"]
    assert number["rescored"] == record["summaries"]["independent"]["acc"]["value"] and number["rows"] == 2
    assert found["run"]["run_name"] == record["run_name"] and found["levels"][0]["checks"] == 4


@pytest.mark.parametrize("argv, code", [
    (("adopt", "no-such-folder", "--profile", "embedded"), 2),
    (("run", "--list-tasks", "--format", "json"), 2),
    (("audit", "--out", "no-such-run"), 2),
])
def test_an_error_that_stops_the_command_is_the_verdict_object_too(argv, code, tmp_path):
    done = run_script(ADOPT, *argv, "--lock", LOCK, "--format", "json", cwd=tmp_path)
    found = _verdict(done)
    assert done.returncode == code and found["verdict"] == "ERROR" and found["levels"] == []
    assert f"error: {found['error']}" in done.stderr and found["line"] == f"error: {found['error']}"


def test_findings_carry_their_parts_and_any_text_survives_json(tmp_path):
    """Generated: the words of hostile input (lone surrogates, control characters, huge values) in expect()
    and fail() always give a Finding whose JSON is valid, ASCII, and reads back to the same parts."""
    rng = random.Random(60)
    alphabet = ["a", "\ud800", "\x1b", "\n", "é", "\"", "\\", "0", " ", ": "]
    for number in range(300):
        words = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        row = rng.choice([None, rng.randrange(-3, 10**6)])
        level = LevelResult("identity")
        level.expect(f"doc_id {row}" if row is not None else words, "prompt_hash", words, words * 300 + "x")
        level.fail(f"row idx {row}: {words}" if row is not None else words)
        assert all(isinstance(problem, Finding) for problem in level.problems) and level.status == "FAIL"
        text = json.dumps(level.as_json(), ensure_ascii=True)
        assert text.isascii()
        back = json.loads(text)["findings"]
        assert [f["kind"] for f in back] == ["mismatch", "failed"] and [f["level"] for f in back] == ["identity"] * 2
        assert [f["words"] for f in back] == [str(p) for p in level.problems]
        if row is not None:
            assert [f["row"] for f in back] == [row, row]
        assert back[0]["field"] == "prompt_hash" and len(back[0]["actual"]) < 300
        copied = pickle.loads(pickle.dumps(level.problems))
        assert [finding.as_json() for finding in copied] == [finding.as_json() for finding in level.problems]


def test_a_comparison_s_json_verdict_is_the_console_s(full_run):
    """audit --compare --format json: a run against itself is identical (exit 0); its line is the console's first."""
    runs = (full_run / "out", full_run / "out")
    text = run_cli("audit.py", "--compare", *runs)
    done = run_cli("audit.py", "--compare", *runs, "--format", "json")
    found = _verdict(done)
    assert done.returncode == text.returncode == 0 and found["verdict"] == "IDENTICAL"
    assert found["line"] == text.stdout.splitlines()[0] and found["changed"] == [] and found["differences"] == []
    assert found["sources"] == [str(path) for path in runs] and found["paired"]["mcnemar_p"] == 1.0
