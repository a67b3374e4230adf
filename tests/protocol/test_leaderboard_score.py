"""The Open LLM Leaderboard v2's normalised score (protocol/leaderboard.py) on its documentation's worked examples
and at its edges; printed beside the reviewer's number for an adopted leaderboard task (tests/task/
test_leaderboard.py) and, per benchmark, for a run of many tasks."""

from fractions import Fraction

from sst2_audit.protocol.leaderboard import BENCHMARKS, benchmark_of, benchmark_score, normalised


def test_the_documented_examples():
    gpqa, musr = benchmark_of("leaderboard_gpqa_main"), benchmark_of("leaderboard_musr_team_allocation")
    assert round(normalised(0.6, 4), 2) == 46.67  # the documentation's GPQA example
    parts = [(0.7, 2, 250), (0.4, 5, 256), (0.6, 3, 250)]  # its MuSR example (team allocation: 3 choices)
    exact = [(Fraction(str(v)) - Fraction(1, c)) / (1 - Fraction(1, c)) * 100 for v, c, _ in parts]
    assert exact == [40, 25, 40]
    assert all(abs(normalised(v, c) - float(e)) < 1e-12 for (v, c, _), e in zip(parts, exact))
    assert abs(benchmark_score(musr, parts) - 35.0) < 1e-12
    # GPQA normalises its group's number: the subtasks' acc_norm weighted by their rows, then the 1/4 baseline
    assert benchmark_score(gpqa, [(0.5, 4, 198), (0.25, 4, 546)]) == normalised((0.5 * 198 + 0.25 * 546) / 744, 4)


def test_below_the_baseline_is_zero_and_a_perfect_score_is_100():
    assert normalised(0.2, 4) == 0.0 and normalised(0.25, 4) == 0.0 and normalised(1.0, 10) == 100.0
    assert normalised(0.1 - 1e-12, 10) == 0.0


def test_which_tasks_belong_to_which_benchmark():
    assert [b.name for b in BENCHMARKS] == ["BBH", "MuSR", "GPQA", "MMLU-Pro"]
    assert benchmark_of("leaderboard_bbh_boolean_expressions").metric == "acc_norm"
    assert benchmark_of("leaderboard_mmlu_pro").metric == "acc"
    assert benchmark_of("leaderboard_mmlu_pro_extra") is None  # MMLU-Pro is one task: no prefix match
    assert benchmark_of("leaderboard_math_algebra_hard") is None and benchmark_of("leaderboard_ifeval") is None
    assert benchmark_of("sst2") is None
