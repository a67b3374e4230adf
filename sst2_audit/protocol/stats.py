"""Intervals and tests a reviewer reads next to an accuracy: computed from counts, stated by name.

- wilson(k, n): the Wilson score interval for a proportion (95 %), which stays inside [0, 1] and
  behaves at small n, unlike the Wald interval.
- mcnemar_exact(b, c): the exact two-sided McNemar test of two paired classifiers on the same
  questions, from the discordant counts (a binomial test of b against b + c at p = 1/2).
- paired_difference(a, b): accuracy of B minus A over the same questions, with the normal
  (Wald) interval of the mean of the per-question differences.
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
    interval: tuple  # 95 % paired (Wald) interval of the difference
    p_value: float  # exact McNemar

    def line(self) -> str:
        low, high = self.interval
        return (f"paired over {self.rows} questions: right in both {self.both_right}, only A {self.a_only}, "
                f"only B {self.b_only}, wrong in both {self.both_wrong}; accuracy B - A = {self.difference:+.4f} "
                f"(95% paired interval {low:+.4f} to {high:+.4f}); exact McNemar p = {self.p_value:.4g}")


def paired_difference(correct_a: list, correct_b: list, z: float = Z95) -> PairedComparison:
    pairs = list(zip(correct_a, correct_b))
    n = len(pairs)
    a_only = sum(1 for a, b in pairs if a and not b)
    b_only = sum(1 for a, b in pairs if b and not a)
    both = sum(1 for a, b in pairs if a and b)
    differences = [float(b) - float(a) for a, b in pairs]
    mean = sum(differences) / n if n else 0.0
    if n > 1:
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        half = z * sd / math.sqrt(n)
    else:
        half = float("inf")
    return PairedComparison(n, both, a_only, b_only, n - both - a_only - b_only, mean,
                            (mean - half, mean + half), mcnemar_exact(a_only, b_only))
