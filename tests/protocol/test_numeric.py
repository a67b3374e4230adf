"""The numeric mode, the platform fingerprint, the drift verdict and the card id that binds results."""

import copy
import json
import os
import subprocess
import sys

import pytest

from support.paths import load_lock_json, LOCK, REPO
from support.processes import one_paragraph, run_script
from sst2_audit.protocol import numeric
from sst2_audit.protocol.numeric import MODE_VARIABLES
from sst2_audit.protocol.drift import DIFFERENT, DRIFT, DRIFT_BOUND, IDENTICAL, judge
from sst2_audit.util.errors import InternalError
from sst2_audit.protocol.rules import predict


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
    ([], "run_settings.numeric_mode: expected dict, got list '[]'."),
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
    from sst2_audit.formats import records
    from sst2_audit.pages.card import card_fields, card_id, claims
    from sst2_audit.formats.lock import load_lock

    record = records.read(full_run / "out" / "run.json", records.RunRecord)
    lock = load_lock(LOCK)

    def identity():
        return card_id(card_fields(record, lock), claims(record))

    first = identity()
    record.questions[63].scores["official"][0] += 3e-5  # drift-sized, accuracy and predictions unchanged
    record.questions[63].scores["independent"][0] += 3e-5
    assert identity() != first
    record.questions[63].scores["official"][0] -= 3e-5
    record.questions[63].scores["independent"][0] -= 3e-5
    assert identity() == first
    record.timings = dict(record.timings, total=record.timings["total"] + 9)  # a claim, not in the id
    assert identity() == first
    record.platform = dict(record.platform, cpu_model_name="another CPU")  # the claimed platform is in it
    assert identity() != first


# The scores other machines measured in the lock's numeric mode (../shared/facts, copied to tests/data).
FACTS = {
    "AMD EPYC AVX2-only (avx2-machine-scores.json, mode avx2-pinned)": ("avx2-machine-scores.json", "avx2-pinned"),
    "Intel Xeon AMX (intel-amx-machine-scores.json, mode avx2-strict)": ("intel-amx-machine-scores.json", "avx2-strict"),
    "Intel Xeon AMX at 2 threads (intel-amx-machine-scores.json)": ("intel-amx-machine-scores.json", "avx2-strict-2-threads"),
}


@pytest.mark.parametrize("machine", sorted(FACTS))
def test_this_machine_in_the_locks_mode_gives_the_other_machines_scores(full_run, machine):
    """The embedded run's 128 scores here, both paths, equal each facts file's bit for bit; a difference
    names the first differing row in the facts file's (hash) order."""
    name, mode = FACTS[machine]
    facts = json.loads((REPO / "tests" / "data" / name).read_text())
    theirs = facts["modes"][mode]["scores"]
    record = json.loads((full_run / "out" / "run.json").read_text())
    assert record["platform"]["mode"]["MKL_CBWR"] == "AVX2,STRICT"
    for path in ("official", "independent"):
        mine = {str(q["idx"]): q["scores"][path] for q in record["questions"]}
        assert sorted(mine) == sorted(theirs) and len(mine) == 64
        first = next((idx for idx in facts["order"] if mine[str(idx)] != theirs[str(idx)]), None)
        assert first is None, (f"{machine}: {path} path: row idx {first}: here {mine[str(first)]}, "
                               f"there {theirs[str(first)]}")


def _probe(mode: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in MODE_VARIABLES}
    done = subprocess.run([sys.executable, "-c", "from sst2_audit.protocol.numeric import probe_digest; print(probe_digest())"],
                          capture_output=True, text=True, env={**env, **mode}, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_probe_gives_the_pinned_digest_in_the_locks_mode_and_another_in_modes_that_score_differently():
    """Modes whose scores differ from the lock's on every machine measured (ATen's DEFAULT kernels, MKL's
    COMPATIBLE path: 126 of 128 scores on the AVX2-only machine) give another digest; the lock's mode gives
    the pinned one here, in a fresh process, whatever the thread count."""
    settings = load_lock_json()["run_settings"]
    pinned = settings["numeric_probe_sha256"]
    assert _probe(settings["numeric_mode"]) == pinned
    for other in ({"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"},
                  {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "COMPATIBLE"},
                  {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AVX2,STRICT"}):
        assert _probe(other) != pinned, other


def test_the_probe_runs_at_one_thread_whatever_the_process_runs_at():
    import torch

    from sst2_audit.protocol.numeric import probe_digest

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = probe_digest.__wrapped__()  # computed again, not the process's kept digest
        torch.set_num_threads(2)
        assert probe_digest.__wrapped__() == one and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert one == load_lock_json()["run_settings"]["numeric_probe_sha256"]


def test_threads_are_not_part_of_the_numeric_key():
    from sst2_audit.protocol.numeric import numeric_key, same_platform

    one = {"torch": "2.13.0+cpu", "torch_cpu_capability": "AVX2", "blas": "MKL", "onednn": "oneDNN", "threads": 1,
           "mode": {"MKL_CBWR": "AVX2,STRICT"}}
    assert same_platform(one, dict(one, threads=2)) and "threads" not in numeric_key(one)
    assert not same_platform(one, dict(one, mode={"MKL_CBWR": "AVX2"}))


def test_a_machine_whose_probe_differs_from_the_pinned_digest_is_held_to_the_drift_bound(embedded_cache, tmp_path):
    """The probe-mismatch path: a lock pinning another digest; a smoke run under it, audited with it, is
    the within-drift verdict (exit 4) naming both digests, though every score is equal bit for bit."""
    raw = load_lock_json()
    pinned = raw["run_settings"]["numeric_probe_sha256"]
    raw["run_settings"]["numeric_probe_sha256"] = "0" * 64
    lock = tmp_path / "other-digest.lock.json"
    lock.write_text(json.dumps(raw))
    done = run_script("run.py", "--lock", lock, "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "other-digest")
    assert done.returncode == 0, done.stderr[-2000:]
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", embedded_cache)
    assert done.returncode == 4, done.stdout + done.stderr
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: the scores were held to the drift bound "
                              f"only: this machine's probe {pinned[:12]} differs from the lock's pinned digest "
                              "000000000000: it cannot run the lock's numeric mode"), verdict
    assert "scores: 0 of 4 differ, max abs diff 0" in done.stdout
