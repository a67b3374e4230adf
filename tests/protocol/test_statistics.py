"""Statistics a reader can rely on (issue 59): the paired decision by the exact McNemar test, its error rate
computed exactly, Holm's adjustment, exact power, the Bonett-Price interval, pairing by (idx, doc hash); each against
a from-scratch computation (scipy's binomtest, direct enumeration)."""

import functools
import math
from types import SimpleNamespace

import pytest
from scipy.stats import binomtest

from sst2_audit.protocol.decision import make_rule, outcome, outcome_line
from sst2_audit.protocol.stats import holm, mcnemar_exact, mcnemar_power, minimum_detectable, paired_difference
from sst2_audit.util.errors import InputError


def _runs(a_right: list, b_right: list, hashes_b=None) -> dict:
    """Two run records as the rule reads them: per question idx, doc hash, label and the official prediction."""
    def run(right, hashes):
        questions = [SimpleNamespace(idx=i, doc_hash=hashes[i], label=1, predictions={"official": {"acc": int(r)}})
                     for i, r in enumerate(right)]
        value = sum(right) / len(right)
        return SimpleNamespace(questions=questions, summaries={"official": {"acc": SimpleNamespace(value=value)}})
    hashes = [f"h{i}" for i in range(len(a_right))]
    return {"A": run(a_right, hashes), "B": run(b_right, hashes_b or hashes)}


def _cell(rows: int, a_only: int, b_only: int) -> dict:
    both = (rows - a_only - b_only) // 2
    a = [True] * both + [True] * a_only + [False] * b_only + [False] * (rows - both - a_only - b_only)
    b = [True] * both + [False] * a_only + [True] * b_only + [False] * (rows - both - a_only - b_only)
    return _runs(a, b)


@pytest.mark.parametrize("rows,a_only,b_only", [(64, 0, 4), (64, 0, 5), (128, 0, 4), (128, 0, 5), (64, 4, 0)])
def test_the_cells_the_wald_rule_held_no_longer_hold(rows, a_only, b_only):
    rule = make_rule("paired-exact", "acc", ["A", "B"], None)
    result = outcome(rule, _cell(rows, a_only, b_only))
    p = binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert result["paired"]["mcnemar_p"] == pytest.approx(p, rel=1e-12) and not result["holds"]
    assert "DOES NOT HOLD" in outcome_line(rule, result)


def test_the_rule_holds_where_the_exact_test_rejects_and_pairs_by_doc_hash():
    rule = make_rule("paired-exact", "acc", ["A", "B"], None)
    assert outcome(rule, _cell(64, 0, 6))["holds"]  # p = 0.03125
    runs = _cell(64, 0, 6)
    runs["B"].questions[3].doc_hash = "another"
    with pytest.raises(InputError, match="by idx and doc hash"):
        outcome(rule, runs)


def test_holm_equals_a_from_scratch_step_down():
    for ps in ([0.01, 0.04, 0.03], [0.2, 0.001, 0.049], [0.5, 0.5, 0.5], [0.03, 0.01, 0.02]):
        order = sorted(range(3), key=lambda i: ps[i])
        expected, running = {}, 0.0
        for rank, i in enumerate(order):  # Holm 1979: p_(i) * (k - i + 1), cumulative maximum, capped at 1
            running = max(running, min(1.0, ps[i] * (3 - rank)))
            expected[i] = running
        assert holm(ps) == [expected[i] for i in range(3)]
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]


@functools.lru_cache(maxsize=None)
def _binomial_p(k: int, n: int) -> float:
    return binomtest(k, n, 0.5).pvalue


def _power_by_enumeration(rows: int, discordance: float, difference: float, alpha: float = 0.05) -> float:
    """Every (A-only, B-only) count pair of the trinomial, rejected by scipy's exact binomial test."""
    p_a, p_b = (discordance + difference) / 2, (discordance - difference) / 2
    total = 0.0
    for a in range(rows + 1):
        for b in range(rows + 1 - a):
            if a + b and _binomial_p(a, a + b) < alpha:
                total += (math.factorial(rows) / (math.factorial(a) * math.factorial(b) * math.factorial(rows - a - b))
                          * p_a ** a * p_b ** b * (1 - discordance) ** (rows - a - b))
    return total


@pytest.mark.parametrize("discordance", [0.1, 0.2, 0.4])
def test_the_minimum_detectable_difference_is_an_exact_power_computation(discordance):
    smallest = minimum_detectable(128, discordance)
    assert _power_by_enumeration(128, discordance, smallest) >= 0.8
    assert _power_by_enumeration(128, discordance, smallest - 2e-4) < 0.8
    assert mcnemar_power(128, discordance, smallest) == pytest.approx(_power_by_enumeration(128, discordance, smallest),
                                                                      abs=1e-9)


@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("accuracy", [0.5, 0.95])
def test_the_decision_s_error_rate_is_exact_and_within_alpha(rows, accuracy):
    """Coverage of the decision, computed exactly: with equal accuracies (discordance two-way, up to what the
    accuracy allows) the rule holds at most 5 % of the time; with discordance one-way (A truly ahead) it never
    holds in the wrong direction more than 2.5 %."""
    for discordance in (0.02, 0.05, 2 * (1 - accuracy) * 0.5, 2 * (1 - accuracy)):
        null = mcnemar_power(rows, discordance, 0.0)
        assert null <= 0.05, (rows, accuracy, discordance, null)
        wrong_way = _power_by_enumeration(rows, discordance, discordance) - mcnemar_power(rows, discordance, discordance)
        assert abs(wrong_way) < 1e-9  # all discordance one way: no B-only rows can occur, so no wrong-way decision
        assert 1 - null >= 0.93


def _coverage(rows: int, both: float, a_only: float, b_only: float) -> float:
    """The exact probability that the interval holds the true B - A: every table of `rows` paired questions."""
    from sst2_audit.protocol.stats import bonett_price

    neither, truth = 1 - both - a_only - b_only, b_only - a_only
    logs = [math.lgamma(k + 1) for k in range(rows + 1)]
    total = 0.0
    for n11 in range(rows + 1):
        for n01 in range(rows + 1 - n11):
            for n10 in range(rows + 1 - n11 - n01):
                n00 = rows - n11 - n01 - n10
                cells = ((n11, both), (n01, b_only), (n10, a_only), (n00, neither))
                if any(k and p == 0 for k, p in cells):
                    continue
                low, high = bonett_price(n11, n01, n10, n00)
                if low <= truth <= high:
                    total += math.exp(logs[rows] - sum(logs[k] for k, _ in cells)
                                      + sum(k * math.log(p) for k, p in cells if k))
    return total


@pytest.mark.parametrize("rows", [64, 128])
@pytest.mark.parametrize("cell", [(0.45, 0.05, 0.05), (0.45, 0.1, 0.0), (0.93, 0.02, 0.02), (0.9, 0.05, 0.0)])
def test_the_shown_interval_covers_at_least_0_93_computed_exactly(rows, cell):
    """Bonett-Price at accuracies about 0.5 and 0.95, discordance two-way and one-way."""
    assert _coverage(rows, *cell) >= 0.93


def test_the_wald_cells_are_not_excluded_by_the_interval_either():
    comparison = paired_difference([True] * 60 + [False] * 4, [True] * 64)  # (0, 4) at 64 rows
    assert comparison.interval[0] < 0 < comparison.interval[1] and comparison.p_value == mcnemar_exact(0, 4) == 0.125
