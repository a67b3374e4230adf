"""truthfulqa_mc2: lm-eval runs the task's process_results hook; sst2-audit re-derives mc2 from the scores with
its own code (protocol.mc2_mass), compares it with every logged value and the aggregate, and the arithmetic
level re-derives both again from the public records."""

import json
import math
import random
import re
import shutil

import numpy as np
import pytest

from conftest import DEMOS, REPO, bundle_audited, prepare_run_audit, run_script
from sst2_audit.task import hooks
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.protocol.metrics import VALUE_TOLERANCE
from sst2_audit.protocol.rules import mc2_mass
from shadows import refused_with_a_changed_hook, shadow_lm_eval

UTILS = "lm_eval/tasks/truthfulqa/utils.py"


def _pinned_hook():
    pins = json.loads(DEMOS.read_text())["evaluator"]["files"]
    return hooks.load(hooks.Hook("process_results", UTILS, "process_results_mc2",
                                 str(installed_root() / UTILS), pins[UTILS]))


def test_our_mc2_agrees_with_lm_eval_s_hook_on_generated_questions():
    """500 generated questions (2-12 choices, log-likelihoods from -0.01 to -700, any pattern of true labels):
    our re-derivation and lm-eval's numpy hook differ by rounding only, never by more than the tolerance."""
    hook, rng, largest = _pinned_hook(), random.Random(62), 0.0
    for _ in range(500):
        count = rng.randint(2, 12)
        scores = [-rng.choice([rng.uniform(0.01, 5), rng.uniform(5, 60), rng.uniform(60, 700)]) for _ in range(count)]
        labels = [rng.randint(0, 1) for _ in range(count)]
        with np.errstate(all="ignore"):
            theirs = float(hook({"mc2_targets": {"labels": labels}}, [(s, False) for s in scores])["acc"])
        ours = mc2_mass(scores, [i for i, label in enumerate(labels) if label == 1])
        if math.isnan(theirs):  # every probability underflowed in lm-eval too
            continue
        largest = max(largest, abs(ours - theirs))
        assert abs(ours - theirs) <= VALUE_TOLERANCE, (scores, labels, ours, theirs)
    assert largest < 1e-15  # rounding (3.3e-16 measured here): the tolerance is far above it
    # every probability below float64's smallest: lm-eval logs NaN, we refuse to invent a number
    with np.errstate(all="ignore"):
        assert math.isnan(float(hook({"mc2_targets": {"labels": [1, 0]}}, [(-800.0, False), (-900.0, False)])["acc"]))
    with pytest.raises(ValueError, match="underflows to 0.0: mc2 is undefined"):
        mc2_mass([-800.0, -900.0], [0])
    with pytest.raises(ValueError, match="overflows exp"):
        mc2_mass([710.0, -1.0], [0])


def test_list_tasks_supports_the_re_derived_process_results_and_names_the_others():
    done = run_script("run.py", "--list-tasks", "truthfulqa*mc2*")
    lines = {line.split()[0]: " ".join(line.split()[1:]) for line in done.stdout.splitlines()[1:] if line.strip()}
    assert lines["truthfulqa_mc2"].startswith("supported"), done.stdout
    # galician's process_results_mc2 splits at the first 0 label: another function, not re-derived
    assert lines["truthfulqa_gl_mc2"] == (
        "refused has its own process_results (lm_eval/tasks/galician_bench/utils.py::process_results_mc2), a metric "
        "computed by task code that is not re-derived (re-derived: truthfulqa's process_results_mc2)"), done.stdout


def test_truthfulqa_mc2_end_to_end_re_derived_and_a_changed_hook_byte_refused(tmp_path):
    record = prepare_run_audit(DEMOS, "embedded-truthfulqa-mc2", tmp_path)
    assert record["metrics"] == ["mc2"] and record["max_abs_diff"] == 0.0
    assert "shared_code" not in record["evaluator"]
    assert record["evaluator"]["rederived_code"] == [{
        "step": "process_results", "file": UTILS, "function": "process_results_mc2",
        "sha256": json.loads(DEMOS.read_text())["evaluator"]["files"][UTILS]}]
    rows = [json.loads(line) for line in (REPO / "data/demo/truthfulqa/validation.jsonl").read_text().splitlines()]
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())["results"]["truthfulqa_mc2"]
    samples = {s["doc_id"]: s for s in map(json.loads, (tmp_path / "out" / "lm_eval_samples.public.jsonl").open())}
    for question in record["questions"]:
        labels = rows[question["idx"]]["mc2_targets"]["labels"]
        assert question["true_choices"] == [i for i, label in enumerate(labels) if label == 1]
        assert question["predictions"] == {"official": {}, "independent": {}}
        assert question["logged"]["mc2"] == samples[question["idx"]]["acc"]
        ours = mc2_mass(question["scores"]["independent"], question["true_choices"])
        assert abs(ours - question["logged"]["mc2"]) <= VALUE_TOLERANCE and 0.0 < ours < 1.0
    assert record["lm_eval_reported"] == {"mc2": results["acc,none"], "mc2_stderr": results["acc_stderr,none"]}
    official = record["summaries"]["official"]["mc2"]
    assert official["correct"] is None and official["predictions"] == {} and official["rows"] == 2
    assert abs(official["accuracy"] - results["acc,none"]) <= VALUE_TOLERANCE
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<th>value (mc2)</th>" in page and "Confusion matrix" not in page and "(2 rows)" in page
    card = bundle_audited(tmp_path, tmp_path / "cache", "embedded-truthfulqa-mc2-smoke").replace("\\_", "_")
    assert "| rederived_metric | mc2 (lm-eval reports it as acc): lm-eval ran process_results " \
           f"{UTILS}::process_results_mc2" in card and "\nRun `embedded-truthfulqa-mc2-smoke` (smoke), scored" in card
    assert "scored by lm-eval and by sst2-audit's independent path; mc2 0." in card
    assert "(the mean over 2 questions; stderr" in card
    # rounding only (numpy's exp and pairwise sums against ours): at most a few units of 1e-16
    assert re.search(r"its own code, largest difference (0\.0e\+00|[1-9]\.\de-1[6-7]) \(accepted up to 1e-12\)", card)
    # the hook lm-eval runs is pinned like any other: one changed byte stops the run and fails the audit
    shadow = shadow_lm_eval(tmp_path, "truthfulqa", "utils.py", b"labels == 1", b"labels == 0")
    refused_with_a_changed_hook(tmp_path, "embedded-truthfulqa-mc2", shadow, UTILS)
    _tampered_records_fail(tmp_path)


def _tampered_records_fail(tmp_path):
    """A logged value moved by more than rounding, or a true choice dropped, is named by the audit."""
    for name, change, expected in (
        ("logged", lambda q: q["logged"].update(mc2=q["logged"]["mc2"] + 1e-9), "logged.mc2: re-derived from the scores"),
        # a dropped true choice moves the re-derived mc2: named by arithmetic (identity, which would name the
        # field itself, rebuilds no prompt for a record that failed an earlier level: no tokenizer load)
        ("true", lambda q: q.update(true_choices=q["true_choices"][1:]), "logged.mc2: re-derived from the scores"),
    ):
        out = tmp_path / f"tampered-{name}"
        shutil.copytree(tmp_path / "out", out)
        raw = json.loads((out / "run.json").read_text())
        change(raw["questions"][0])
        (out / "run.json").write_text(json.dumps(raw, indent=2))
        done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", tmp_path / "cache", "--structural")
        assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL"), done.stdout + done.stderr
        assert f"row idx {raw['questions'][0]['idx']}: {expected}" in done.stdout, done.stdout
