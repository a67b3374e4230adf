"""Corpus metrics (f1, mcc): lm-eval aggregates every (gold, prediction) pair with scikit-learn and estimates
the stderr by a seeded bootstrap; sst2-audit re-derives both with its own code (corpus.py), bit for bit."""

import dataclasses
import json
import random
import shutil

import pytest

from support.builders import bundle_audited, prepare_run_audit
from support.paths import DEMOS, REPO
from support.processes import run_script
from sst2_audit.protocol import corpus
from sst2_audit.task.dataset import Row
from sst2_audit.util.errors import InputError


def _items(rng, n: int, classes: int = 2) -> list:
    return [(rng.randrange(classes), rng.randrange(classes)) for _ in range(n)]


def test_f1_and_mcc_equal_scikit_learn_s_bit_for_bit_on_generated_sets():
    """400 generated sets (1-80 pairs, skewed or balanced, mcc also over 3-4 classes) through lm-eval's own
    aggregations (scikit-learn) and ours: the same float every time, 0.0 where sklearn divides by 0."""
    import warnings

    from lm_eval.api.metrics import f1_score, matthews_corrcoef

    rng = random.Random(65)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for number in range(400):
            n = rng.randint(1, 80)
            if number % 4 == 3:  # mcc over more classes
                items = _items(rng, n, rng.choice([3, 4]))
            else:
                bias = rng.random()
                items = [(int(rng.random() < bias), int(rng.random() < bias)) for _ in range(n)]
                golds, preds = [g for g, _ in items], [p for _, p in items]
                assert corpus.f1_binary(golds, preds) == float(f1_score(items)), items
            golds, preds = [g for g, _ in items], [p for _, p in items]
            assert corpus.mcc(golds, preds) == matthews_corrcoef(items), items


@pytest.mark.parametrize("n, iters", [(2, 1000), (7, 1500), (64, 2000)])
def test_the_bootstrap_stderr_equals_lm_eval_s_bit_for_bit(monkeypatch, n, iters):
    """lm-eval's bootstrap_stderr itself (single-process: the same draws as its pool) against ours, for both
    statistics; 1500 resamples run one chunk of 1000, as lm-eval does."""
    from lm_eval.api.metrics import bootstrap_stderr, f1_score, matthews_corrcoef

    monkeypatch.setenv("DISABLE_MULTIPROC", "1")
    items = _items(random.Random(n), n)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert corpus.bootstrap_stderr("f1", items, iters) == bootstrap_stderr(f1_score, items, iters)
        assert corpus.bootstrap_stderr("mcc", items, iters) == bootstrap_stderr(matthews_corrcoef, items, iters)
    assert len(corpus.resampled("f1", items, iters)) == iters // 1000 * 1000


def test_f1_needs_two_choices():
    from sst2_audit.scoring.identity import expected_question
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.spec import spec_for

    spec = dataclasses.replace(spec_for(load_lock(DEMOS), "mrpc"), doc_to_choice=["no", "yes", "maybe"])
    doc = {"sentence1": "A.", "sentence2": "B.", "label": 1, "idx": 3}
    with pytest.raises(InputError, match=r"f1 is defined for 2 choices \(lm-eval's aggregation\); row 3 has 3"):
        expected_question(Row(3, doc), spec, None, 512)


def test_mrpc_acc_and_f1_end_to_end_and_a_changed_pair_or_resample_count_is_named(tmp_path):
    record = prepare_run_audit(DEMOS, "embedded-mrpc", tmp_path)
    assert record["metrics"] == ["acc", "f1"] and record["settings"]["bootstrap_iters"] == 1000
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())["results"]["mrpc"]
    samples = {s["doc_id"]: s for s in map(json.loads, (tmp_path / "out" / "lm_eval_samples.public.jsonl").open())}
    rows = [json.loads(line) for line in (REPO / "data/demo/mrpc/validation.jsonl").read_text().splitlines()]
    pairs = []
    for question in sorted(record["questions"], key=lambda q: q["idx"]):
        predicted = question["predictions"]["official"]["f1"]
        assert question["logged"]["f1"] == samples[question["idx"]]["f1"] == [rows[question["idx"]]["label"], predicted]
        pairs.append(tuple(question["logged"]["f1"]))
    f1 = record["summaries"]["official"]["f1"]
    assert f1["correct"] is None and f1["value"] == results["f1,none"] == record["lm_eval_reported"]["f1"]
    assert f1["stderr"] == results["f1_stderr,none"] == corpus.bootstrap_stderr("f1", pairs, 1000)
    card = bundle_audited(tmp_path, tmp_path / "cache", "embedded-mrpc-smoke").replace("\\_", "_")
    assert "| bootstrap_iters |" not in card and "| f1 | " in card and "| f1_stderr | " in card
    for name, change, expected in (
        ("pair", lambda r: r["questions"][0]["logged"].update(f1=[1 - r["questions"][0]["logged"]["f1"][0],
                                                                  r["questions"][0]["logged"]["f1"][1]]),
         f"row idx {record['questions'][0]['idx']}: logged.f1: expected"),
        # the resample count is a setting: checked against the reviewer's lock like every other
        ("iters", lambda r: r["settings"].update(bootstrap_iters=2000), "- run: settings: expected {"),
    ):
        out = tmp_path / f"tampered-{name}"
        shutil.copytree(tmp_path / "out", out)
        raw = json.loads((out / "run.json").read_text())
        change(raw)
        (out / "run.json").write_text(json.dumps(raw, indent=2))
        done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", tmp_path / "cache", "--structural")
        assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL"), done.stdout + done.stderr
        assert expected in done.stdout, done.stdout


@pytest.mark.slow
def test_cola_mcc_end_to_end(tmp_path):
    record = prepare_run_audit(DEMOS, "embedded-cola", tmp_path)
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())["results"]["cola"]
    mcc = record["summaries"]["official"]["mcc"]
    assert record["metrics"] == ["mcc"] and mcc["value"] == results["mcc,none"]
    assert mcc["stderr"] == results["mcc_stderr,none"] and mcc["correct"] is None
    done = run_script("run.py", "--lock", DEMOS, "--profile", "embedded-cola", "--cache", tmp_path / "cache",
                      "--smoke", "--out", tmp_path / "out2", "--private", tmp_path / "private2", "--json")
    summary = json.loads(done.stdout)
    assert summary["official"]["value"] == mcc["value"] and "normal_95" in summary["official"]
    assert "accuracy" not in summary["official"]  # mcc is not an accuracy
