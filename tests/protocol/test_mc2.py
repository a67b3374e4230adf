"""truthfulqa_mc2: lm-eval runs the task's process_results hook; sst2-audit re-derives mc2 from the scores with
its own code (protocol.mc2_mass), compares it with every logged value and the aggregate, and the arithmetic
level re-derives both again from the public records."""

import json
import math
import random
import shutil
import tarfile

import numpy as np
import pytest

from support.builders import prepare_run_audit
from support.paths import DEMOS, REPO
from support.processes import run_script
from sst2_audit.task import hooks
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.protocol.metrics import VALUE_TOLERANCE
from sst2_audit.protocol.rules import mc2_mass, pairwise_sum
from support.shadows import refused_with_a_changed_hook, shadow_lm_eval

UTILS = "lm_eval/tasks/truthfulqa/utils.py"


def _pinned_hook():
    pins = json.loads(DEMOS.read_text())["evaluator"]["files"]
    return hooks.load(hooks.Hook("process_results", UTILS, "process_results_mc2",
                                 str(installed_root() / UTILS), pins[UTILS]))


def test_our_mc2_equals_lm_eval_s_hook_bit_for_bit_on_generated_questions():
    """500 generated questions (2-150 choices, log-likelihoods from -0.01 to -700, any pattern of true labels):
    our re-derivation, in the hook's order of operations, equals lm-eval's numpy hook bit for bit."""
    hook, rng = _pinned_hook(), random.Random(62)
    for _ in range(500):
        count = rng.choice([rng.randint(2, 12), rng.randint(13, 150)])  # numpy sums 8 lanes from 8 values on
        scores = [-rng.choice([rng.uniform(0.01, 5), rng.uniform(5, 60), rng.uniform(60, 700)]) for _ in range(count)]
        labels = [rng.randint(0, 1) for _ in range(count)]
        with np.errstate(all="ignore"):
            theirs = float(hook({"mc2_targets": {"labels": labels}}, [(s, False) for s in scores])["acc"])
        if math.isnan(theirs):  # every probability underflowed in lm-eval too
            continue
        ours = mc2_mass(scores, [i for i, label in enumerate(labels) if label == 1])
        assert ours == theirs, (scores, labels, ours, theirs)


def test_pairwise_sum_is_numpy_s_order():
    """numpy's np.sum of float64 (pairwise, 8 lanes, blocks of 128) rounds differently from a left-to-right sum:
    ours follows it exactly at every length around its block boundaries."""
    rng, differs_from_left_to_right = random.Random(8), 0
    for count in [*range(0, 40), 63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 1000, 4099]:
        for _ in range(20):
            values = [rng.random() * 10 ** rng.randint(-12, 3) for _ in range(count)]
            assert pairwise_sum(values) == float(np.sum(np.array(values, dtype=np.float64))), count
            differs_from_left_to_right += pairwise_sum(values) != sum(values)
    assert differs_from_left_to_right > 100  # the order matters: a plain sum would not pass the test above


def test_undefined_mc2_is_refused_where_lm_eval_logs_nan():
    hook = _pinned_hook()
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


@pytest.mark.slow
def test_truthfulqa_mc2_end_to_end_re_derived_and_a_changed_hook_byte_refused(tmp_path):
    record = prepare_run_audit(DEMOS, "embedded-truthfulqa-mc2", tmp_path, bundle=True)  # packed by the rescore
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
        assert ours == question["logged"]["mc2"] and 0.0 < ours < 1.0  # bit for bit: lm-eval's order
    assert record["lm_eval_reported"] == {"mc2": results["acc,none"], "mc2_stderr": results["acc_stderr,none"]}
    official = record["summaries"]["official"]["mc2"]
    assert official["correct"] is None and official["predictions"] == {} and official["rows"] == 2
    assert official["value"] == results["acc,none"] and official["stderr"] == results["acc_stderr,none"]
    page = (tmp_path / "out" / "report.html").read_text()
    assert "<th>value (mc2)</th>" in page and "Confusion matrix" not in page and "(2 rows)" in page
    with tarfile.open(tmp_path / "results" / "embedded-truthfulqa-mc2-smoke.tar.gz") as archive:
        card = archive.extractfile("embedded-truthfulqa-mc2-smoke/CARD.md").read().decode().replace("\\_", "_")
    assert "| rederived_metric | mc2 (lm-eval reports it as acc): lm-eval ran process_results " \
           f"{UTILS}::process_results_mc2" in card and "\nRun `embedded-truthfulqa-mc2-smoke` (smoke), scored" in card
    assert "scored by lm-eval and by sst2-audit's independent path; mc2 0." in card
    assert "(the mean over 2 questions; stderr" in card
    assert "its own code, in lm-eval's order of operations, required bit for bit (accepted up to 1e-12 only " \
           "where numpy's exp differs between the run's and the audit's CPUs)" in card
    # the hook lm-eval runs is pinned like any other: one changed byte stops the run and fails the audit
    shadow = shadow_lm_eval(tmp_path, "truthfulqa", "utils.py", b"labels == 1", b"labels == 0")
    refused_with_a_changed_hook(tmp_path, "embedded-truthfulqa-mc2", shadow, UTILS)
    _tampered_records_fail(tmp_path)
    _another_cpu_s_exp_is_accepted_to_rounding_and_said(tmp_path)


def _tampered_records_fail(tmp_path):
    """A logged value moved by more than rounding, or a true choice dropped, is named by the audit."""
    for name, change, expected in (
        ("logged", lambda q: q["logged"].update(mc2=q["logged"]["mc2"] + 1e-9), "logged.mc2: re-derived from the scores"),
        # one unit in the last place: no tolerance between machines that run the same exp
        ("last-bit", lambda q: q["logged"].update(mc2=math.nextafter(q["logged"]["mc2"], 1.0)),
         "logged.mc2: re-derived from the scores"),
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


def _another_cpu_s_exp_is_accepted_to_rounding_and_said(tmp_path):
    """A record whose claimed CPU runs the other float64 exp (numpy's AVX-512F one where this machine has
    libm's, or the reverse): a value one unit in the last place away is accepted to rounding, and the
    arithmetic level names both exps; the claim never widens the bound past the tolerance."""
    from lm_eval.api import metrics as lm_eval_metrics

    from sst2_audit.formats import records
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.pages.html_report import render
    from sst2_audit.protocol.numeric import here_flags, numpy_exp
    from sst2_audit.task.spec import spec_for

    for name, step in (("other-cpu", 1.0), ("other-cpu-far", 1e-9)):
        out = tmp_path / name
        shutil.copytree(tmp_path / "out", out)
        raw = json.loads((out / "run.json").read_text())
        flags = dict(raw["platform"]["isa_flags"], avx512f=not here_flags()["avx512f"])
        raw["platform"]["isa_flags"] = flags
        first = raw["questions"][0]
        moved = math.nextafter(first["logged"]["mc2"], 1.0) if step == 1.0 else first["logged"]["mc2"] + step
        first["logged"]["mc2"] = moved  # as lm-eval on that CPU would have logged and reported it
        samples = [json.loads(line) for line in (out / "lm_eval_samples.public.jsonl").read_text().splitlines()]
        next(s for s in samples if s["doc_id"] == first["idx"])["acc"] = moved
        (out / "lm_eval_samples.public.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
        logged = [q["logged"]["mc2"] for q in sorted(raw["questions"], key=lambda q: q["idx"])]
        mean, stderr = lm_eval_metrics.mean(logged), lm_eval_metrics.mean_stderr(logged)
        raw["lm_eval_reported"] = {"mc2": mean, "mc2_stderr": stderr}
        results = json.loads((out / "lm_eval_results.json").read_text())
        results["results"]["truthfulqa_mc2"].update({"acc,none": mean, "acc_stderr,none": stderr})
        (out / "lm_eval_results.json").write_text(json.dumps(results, indent=2))
        (out / "run.json").write_text(json.dumps(raw, indent=2))
        environment = json.loads((out / "environment.json").read_text())
        environment["platform"] = raw["platform"]
        (out / "environment.json").write_text(json.dumps(environment, indent=2))
        lock = load_lock(DEMOS)
        record = records.from_dict(records.RunRecord, raw, "run.json")
        (out / "report.html").write_text(render(record, lock, spec_for(lock, record.task)))
        done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", tmp_path / "cache", "--structural")
        if step == 1.0:
            assert done.returncode == 4 and "arithmetic: PASS" in done.stdout, done.stdout + done.stderr
            assert f"(accepted up to {VALUE_TOLERANCE}: numpy's exp differs between the machines; this machine runs " \
                   f"{numpy_exp(here_flags())}, the record claims {numpy_exp(flags)})" in done.stdout, done.stdout
        else:
            assert done.returncode == 1 and "logged.mc2: re-derived from the scores" in done.stdout, done.stdout
