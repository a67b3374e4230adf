"""The numeric mode, the platform fingerprint, the drift verdict and the card id that binds results."""

import copy
import json

import pytest

from conftest import LOCK, one_paragraph, run_script
from sst2_audit import numeric
from sst2_audit.drift import DIFFERENT, DRIFT, DRIFT_BOUND, IDENTICAL, judge
from sst2_audit.errors import InternalError
from sst2_audit.protocol import predict


def test_the_mode_is_in_effect_in_this_process():
    import torch

    mode = json.loads(LOCK.read_text())["run_settings"]["numeric_mode"]
    platform = numeric.fingerprint(mode, 1)
    if platform["isa_flags"]["avx2"] and platform["isa_flags"]["fma"]:
        assert torch.backends.cpu.get_cpu_capability() == "AVX2" and platform["mode_in_effect"] is True
    assert platform["mode"] == mode and platform["blas"].startswith("MKL 2024.2")
    assert platform["probe_sha256"] == numeric.probe_digest()  # deterministic in one process
    assert numeric.numeric_key(platform) == {k: platform[k] for k in numeric.NUMERIC_KEY_FIELDS}


def test_changing_the_mode_after_torch_was_imported_is_our_bug():
    import torch  # noqa: F401

    with pytest.raises(InternalError, match="torch was imported before the numeric mode was set"):
        numeric.activate({"MKL_CBWR": "COMPATIBLE"})


@pytest.mark.parametrize("mode, shown", [
    ({"ATEN_CPU_CAPABILITY": "avx3"}, None),  # accepted by the lock, but never in effect (checked below)
    ({"NOT_A_VARIABLE": "1"}, "run_settings.numeric_mode must map some of"),
    ({"MKL_CBWR": ""}, "run_settings.numeric_mode must map some of"),
    ([], "run_settings.numeric_mode must map some of"),
])
def test_lock_numeric_mode_is_validated(tmp_path, mode, shown):
    raw = json.loads(LOCK.read_text())
    raw["run_settings"]["numeric_mode"] = mode
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    done = run_script("prepare.py", "--profile", "embedded", "--lock", lock, "--cache", tmp_path / "c", "--verify")
    if shown is None:
        assert "no manifest.json; the cache is not prepared" in one_paragraph(done.stderr)
    else:
        assert done.returncode == 2 and shown in one_paragraph(done.stderr)


def test_an_unknown_capability_is_never_in_effect():
    platform = numeric.fingerprint({"ATEN_CPU_CAPABILITY": "avx3"}, 1)
    assert platform["mode_in_effect"] is False
    assert "(NOT in effect)" in numeric.one_line(platform)


BASE = {1: [-6.5, -5.9], 2: [-4.2697, -4.2698], 3: [-3.0, -7.0]}


def _moved(changes: dict) -> dict:
    moved = copy.deepcopy(BASE)
    for idx, scores in changes.items():
        moved[idx] = scores
    return {idx: (BASE[idx], moved[idx]) for idx in BASE}


def test_verdict_identical_on_any_platform():
    for same in (True, False):
        verdict = judge(_moved({}), same, predict)
        assert (verdict.verdict, verdict.compared, verdict.differing, verdict.max_abs_diff) == (IDENTICAL, 6, 0, 0.0)


def test_any_difference_on_the_same_platform_is_different():
    verdict = judge(_moved({1: [-6.5, -5.9 + 1e-7]}), True, predict)
    assert verdict.verdict == DIFFERENT and verdict.differing == 1 and verdict.where == "row idx 1 candidate 1"


def test_drift_within_the_bound_and_a_flip_on_a_tiny_margin_is_drift():
    verdict = judge(_moved({1: [-6.5 + 3e-5, -5.9], 2: [-4.26975, -4.26974]}), False, predict)
    assert verdict.verdict == DRIFT and len(verdict.flips) == 1 and not verdict.flips_beyond_bound
    assert verdict.line().endswith(f"1 prediction flip(s); verdict: {DRIFT} (different numeric platform: "
                                   "drift bound 0.0001 per score)")


def test_a_score_beyond_the_bound_or_a_flip_on_a_wide_margin_is_different():
    beyond = judge(_moved({3: [-3.0, -7.0 + 2 * DRIFT_BOUND]}), False, predict)
    assert beyond.verdict == DIFFERENT and beyond.where == "row idx 3 candidate 1"
    flipped = judge(_moved({3: [-7.0, -3.0]}), False, predict)
    assert flipped.verdict == DIFFERENT and len(flipped.flips_beyond_bound) == 1


def test_two_cards_with_different_scores_never_share_an_id(full_run):
    from sst2_audit import records
    from sst2_audit.card import card_fields, card_id
    from sst2_audit.lock import load_lock

    record = records.read(full_run / "out" / "run.json", records.RunRecord)
    lock = load_lock(LOCK)
    first = card_id(card_fields(record, lock))
    record.questions[63].scores["official"][0] += 3e-5  # drift-sized, accuracy and predictions unchanged
    record.questions[63].scores["independent"][0] += 3e-5
    assert card_id(card_fields(record, lock)) != first
    record.questions[63].scores["official"][0] -= 3e-5
    record.questions[63].scores["independent"][0] -= 3e-5
    assert card_id(card_fields(record, lock)) == first
    record.platform = dict(record.platform, cpu_model_name="another CPU")
    assert card_id(card_fields(record, lock)) != first
