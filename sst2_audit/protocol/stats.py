"""Intervals and tests a reviewer reads next to an accuracy: computed from counts, stated by name.

- wilson(k, n): the Wilson score interval for a proportion (95 %), which stays inside [0, 1] and
  behaves at small n, unlike the Wald interval.
- mcnemar_exact(b, c): the exact two-sided McNemar test of two paired classifiers on the same
  questions, from the discordant counts (a binomial test of b against b + c at p = 1/2).
- paired_difference(a, b): accuracy of B minus A over the same questions, with Bonett and Price's adjusted Wald
  interval for a difference of paired proportions, which keeps its coverage at small counts where the Wald interval
  of the per-question differences does not (it held at discordant counts (0, 4) of 64, where the exact McNemar p
  is 0.125).
  Decisions are the exact McNemar test's (protocol/decision.py); the interval is shown beside it.
- holm(ps), mcnemar_power(n, d, delta), minimum_detectable(n, d): the adjustment for several comparisons and the
  exact power of the McNemar test.
"""

import math
from dataclasses import dataclass

Z95 = 1.959963984540054  # the 0.975 quantile of the standard normal


def wilson(k: int, n: int, z: float = Z95) -> tuple:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, center - half), min(1.0, center + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact p-value; 1.0 when no question changed."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class PairedComparison:
    rows: int
    both_right: int
    a_only: int  # right in A, wrong in B
    b_only: int  # wrong in A, right in B
    both_wrong: int
    difference: float  # accuracy B - A
    interval: tuple  # 95 % Bonett-Price interval of the difference
    p_value: float  # exact McNemar

    def line(self) -> str:
        low, high = self.interval
        return (f"paired over {self.rows} questions: right in both {self.both_right}, only A {self.a_only}, "
                f"only B {self.b_only}, wrong in both {self.both_wrong}; accuracy B - A = {self.difference:+.4f} "
                f"(95% Bonett-Price interval {low:+.4f} to {high:+.4f}); exact McNemar p = {self.p_value:.4g}")


def bonett_price(both: int, b_only: int, a_only: int, neither: int, z: float = Z95) -> tuple:
    """95 % interval of P(B right) - P(A right) from paired counts: Bonett and Price's (2012) adjusted Wald interval,
    one added to each discordant count and two to the rows (its exact coverage at 64 and 128 rows: 0.94 or more in
    every cell tests/protocol/test_statistics.py computes, where Newcombe's method 10 fell to 0.885 with one-way
    discordance)."""
    n = both + b_only + a_only + neither
    p_b, p_a = (b_only + 1) / (n + 2), (a_only + 1) / (n + 2)
    difference = p_b - p_a
    half = z * math.sqrt(max(0.0, p_b + p_a - difference * difference) / (n + 2))
    return (max(-1.0, difference - half), min(1.0, difference + half))


def paired_difference(correct_a: list, correct_b: list, z: float = Z95) -> PairedComparison:
    pairs = list(zip(correct_a, correct_b))
    n = len(pairs)
    a_only = sum(1 for a, b in pairs if a and not b)
    b_only = sum(1 for a, b in pairs if b and not a)
    both = sum(1 for a, b in pairs if a and b)
    mean = sum(float(b) - float(a) for a, b in pairs) / n if n else 0.0
    return PairedComparison(n, both, a_only, b_only, n - both - a_only - b_only, mean,
                            bonett_price(both, b_only, a_only, n - both - a_only - b_only, z),
                            mcnemar_exact(a_only, b_only))


def holm(p_values: list) -> list:
    """Holm's step-down adjustment of k p-values (family-wise error), in the order given: the i-th smallest times
    (k - i), made monotone, at most 1."""
    k = len(p_values)
    order = sorted(range(k), key=lambda i: p_values[i])
    adjusted, running = [0.0] * k, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def _rejects(m: int, alpha: float) -> int:
    """The largest b with mcnemar_exact(b, m - b) < alpha (the test rejects b <= it and b >= m - it), or -1."""
    found = -1
    for b in range(m // 2 + 1):
        if mcnemar_exact(b, m - b) < alpha:
            found = b
        else:
            break
    return found


def _binomial(n: int, p: float) -> list:
    return [math.comb(n, k) * p ** k * (1 - p) ** (n - k) for k in range(n + 1)]


def mcnemar_power(rows: int, discordance: float, difference: float, alpha: float = 0.05) -> float:
    """Exact power of the two-sided exact McNemar test at `alpha` over `rows` paired questions, each discordant with
    probability `discordance` and P(only A right) - P(only B right) = `difference`: the sum over the discordant
    count m (binomial) of the probability that the A-only count falls in the test's rejection region (binomial at
    (discordance + difference) / (2 * discordance))."""
    if discordance <= 0:
        return 0.0
    share = min(1.0, max(0.0, (discordance + difference) / (2 * discordance)))
    power = 0.0
    for m, weight in enumerate(_binomial(rows, min(1.0, discordance))):
        edge = _rejects(m, alpha)
        if edge < 0 or weight == 0:
            continue
        within = _binomial(m, share)
        power += weight * (sum(within[:edge + 1]) + sum(within[m - edge:]))
    return power


def minimum_detectable(rows: int, discordance: float, power: float = 0.8, alpha: float = 0.05) -> float | None:
    """The smallest |P(only A right) - P(only B right)| the exact McNemar test detects with `power` over `rows`
    questions at this discordance (bisection to 1e-4 over 0 to the discordance); None if even the largest does not."""
    if discordance <= 0 or mcnemar_power(rows, discordance, discordance, alpha) < power:
        return None
    low, high = 0.0, discordance
    while high - low > 1e-4:
        middle = (low + high) / 2
        low, high = (low, middle) if mcnemar_power(rows, discordance, middle, alpha) >= power else (middle, high)
    return round(high, 4)
