"""Telling platform drift from tampering when two sets of float32 scores differ.

Same numeric key (numeric.numeric_key: torch, capability, BLAS, oneDNN, mode; threads and the
probe digest is recorded to explain a difference, it is not part of the key): the scores must be identical
bit for bit; any difference is "different".
Different numeric key: a candidate score may move by at most DRIFT_BOUND, and a prediction
may flip only on a question whose margin (|difference of its two best scores|) is within
2 * DRIFT_BOUND in both runs, since each of the two scores can move by the bound.

DRIFT_BOUND is 1e-4 nats: about 2.2x the largest spread measured between numeric modes
on two machines (AVX-512 native vs ATEN_CPU_CAPABILITY=default MKL_CBWR=COMPATIBLE:
4.48e-05; AVX2 vs AVX-512 native: 3.29e-05; 128 scores of the embedded dev rows,
contexts of 19 to 61 tokens). Tampering smaller than the bound on another platform cannot
be told from drift: a reviewer who needs bits rescored runs in the lock's mode.
"""

from dataclasses import dataclass, field

DRIFT_BOUND = 1e-4

IDENTICAL = "identical"
DRIFT = "platform drift within the bound"
DIFFERENT = "different"


@dataclass
class Verdict:
    verdict: str
    same_platform: bool  # True: bit for bit required
    basis: str | None = None  # why bits are (not) required, in words
    compared: int = 0  # candidate scores compared
    differing: int = 0
    max_abs_diff: float = 0.0
    where: str | None = None  # "row idx N candidate K"
    flips: list = field(default_factory=list)  # (idx, prediction a, prediction b, margin a, margin b)
    flips_beyond_bound: list = field(default_factory=list)

    def words(self) -> str:
        """The verdict and the rule it was judged by: `verdict: identical (same numeric platform: ...)`."""
        basis = self.basis or ("same numeric platform: bit for bit required" if self.same_platform
                               else f"different numeric platform: drift bound {DRIFT_BOUND:g} per score")
        return f"verdict: {self.verdict} ({basis})"

    def line(self) -> str:
        text = (f"scores: {self.differing} of {self.compared} differ, max abs diff {self.max_abs_diff:.3g}"
                + (f" at {self.where}" if self.where else "")
                + f"; {len(self.flips)} prediction flip(s)")
        if self.flips_beyond_bound:
            text += f", {len(self.flips_beyond_bound)} with a margin above {2 * DRIFT_BOUND:g}"
        return f"{text}; {self.words()}"


def _margin(scores: list) -> float:
    ordered = sorted(scores, reverse=True)
    return ordered[0] - ordered[1] if len(ordered) > 1 else float("inf")


def judge(pairs: dict, same_platform: bool, predict, basis: str | None = None) -> Verdict:
    """pairs: {idx: (scores a, scores b)} of the rows both sides scored; same_platform: bits required."""
    verdict = Verdict(IDENTICAL, same_platform, basis)
    for idx, (scores_a, scores_b) in pairs.items():
        if len(scores_a) != len(scores_b):
            verdict.differing += 1
            verdict.max_abs_diff = float("inf")
            verdict.where = f"row idx {idx} (candidate count {len(scores_a)} vs {len(scores_b)})"
            continue
        for number, (a, b) in enumerate(zip(scores_a, scores_b)):
            verdict.compared += 1
            diff = abs(a - b)
            if diff != 0 or a != b:
                verdict.differing += 1
            if diff > verdict.max_abs_diff or diff != diff:
                verdict.max_abs_diff, verdict.where = diff, f"row idx {idx} candidate {number}"
        prediction_a, prediction_b = predict(scores_a), predict(scores_b)
        if prediction_a != prediction_b:
            flip = (idx, prediction_a, prediction_b, _margin(scores_a), _margin(scores_b))
            verdict.flips.append(flip)
            if max(flip[3], flip[4]) > 2 * DRIFT_BOUND:
                verdict.flips_beyond_bound.append(flip)
    if verdict.differing:
        within = verdict.max_abs_diff <= DRIFT_BOUND and not verdict.flips_beyond_bound
        verdict.verdict = DRIFT if (within and not same_platform) else DIFFERENT
    return verdict
