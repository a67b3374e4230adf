"""An adopted run's scores: the bound a logged score is held to, each row's class after its rescore, and the test
that tells honest rounding from a forger's spending of the bound.

A plain lm-eval run was made on the submitter's machine, often a GPU in bfloat16: its scores can equal the
reviewer's float32 CPU rescore bit for bit only when it was made the same way (float32, the lock's numeric mode).
Otherwise each score is held to a bound, the reviewer's (--bound) or fitted to honest drift measured for the dtype
the run claims; a tolerance widened on the submitter's word is a budget a forger can spend, so:
- the fitted bound grows with the square root of the continuation's tokens (honest rounding), not with the score;
- a prediction flip (acc, acc_norm, each metric's own prediction) is accepted only where the reviewer's own margin
  lies within the two candidates' bounds (a near tie); a flip beyond it is out of the bound;
- flips that run one way (toward the gold answer, or all raising one choice of a two-choice task) FAIL by an exact
  two-sided sign test at FLIP_ALPHA, however each row looks alone;
- a run claiming bfloat16 or float16 whose rows equal the float32 rescore bit for bit is held to float32.
"""

import math
from dataclasses import dataclass, field

from sst2_audit.formats.adopted import BITS, Bound, FLIP, OUT, WITHIN
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.protocol.metrics import argmax_metrics, METRICS
from sst2_audit.util.errors import InputError

# Measured (docs/measurements.md, "Honest drift of reduced precision", 2026-12-06, Intel Xeon with AMX): lm-eval's
# own HFLM.loglikelihood in bfloat16 and float16 against float32 on this CPU, the embedded SmolLM2-135M and tiny
# random Llamas of widths 64 and 256, continuations of 1 to 128 tokens (benchmarks/measure_drift.py). Largest point
# of |logged - rescored| - REL * |rescored| over sqrt(tokens): bfloat16 0.198, float16 0.0226, where REL is half an
# ulp of the dtype (the rounding of lm-eval's sum, which it takes in the model's dtype). The derived bound is
# SAFETY times the fit: REL * |rescored| + PER_TOKEN * sqrt(tokens) per candidate.
SAFETY = 2.0
FIT = {"bfloat16": (2 ** -8, 0.198), "float16": (2 ** -11, 0.0226)}
DERIVED = {dtype: (SAFETY * rel, round(SAFETY * per_token, 4)) for dtype, (rel, per_token) in FIT.items()}
# float32 on a CUDA device: TF32 matmuls keep float16's 10-bit mantissa, so the float16 fit stands in for it there
# (not measured here: no GPU); float32 on a CPU is held to the drift bound between CPUs (protocol/drift.py).
GPU_FLOAT32 = "float32 (on a CUDA device: TF32 matmuls have float16's mantissa; the float16 fit, not measured here)"
DTYPE_WORDS = {"torch.bfloat16": "bfloat16", "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.float16": "float16",
               "float16": "float16", "fp16": "float16", "half": "float16", "torch.float32": "float32",
               "float32": "float32", "fp32": "float32", "float": "float32"}
NARROWEST = ("float32", "float16", "bfloat16")  # by bound, narrowest first
FLIP_ALPHA = 0.01  # the sign test on the flips' directions, two-sided, per direction and metric


def claimed_dtype(results: dict, model_args: dict) -> tuple:
    """(dtype, words): the dtype the run says it computed in. Every place it is said counts (logged model_dtype,
    model_args dtype or torch_dtype); where they disagree the narrowest bound is taken, since the widest is the one
    a forger would write. float32 on a CUDA device is its own claim (GPU_FLOAT32)."""
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    said = {DTYPE_WORDS[v] for v in (config.get("model_dtype"), model_args.get("dtype"), model_args.get("torch_dtype"))
            if isinstance(v, str) and v in DTYPE_WORDS}
    if not said:
        return None, ""
    dtype = min(said, key=NARROWEST.index)
    device = config.get("device") if isinstance(config.get("device"), str) else ""
    words = f"the dtype the run claims ({dtype})" if len(said) == 1 else (
        f"the narrowest of the dtypes the run claims ({', '.join(sorted(said))}: {dtype})")
    if dtype == "float32" and (device.startswith("cuda") or model_args.get("device", "").startswith("cuda")):
        return "float32-gpu", f"{words} on device {device or model_args.get('device')}: {GPU_FLOAT32}"
    return dtype, words


# A generation's bound is on logits: where the logged text takes another token than this machine's maximum, that
# token's logit must lie within R * |maximum| + A of it (audit/adopt_generation.py::near_rule). Measured
# (docs/measurements.md, "Generative tasks", 2026-12-04, Intel AMX): a bfloat16 lm_eval run of the embedded model on
# 24 gsm8k-shaped rows against this machine's float32 decode, 11 near ties, the largest gap 0.1846 logits at a
# maximum of 20.26 (0.91 %): the bound is 2x that, 2^-6 of the maximum plus 2^-4. A row's ties spend a budget: the
# sum of each tie's gap over its own bound, at most TIE_BUDGET (one tie at the full bound; the embedded model's
# honest rows spent at most 0.49, a tiny random model's flat logits 0.1 over 9 ties: docs/measurements.md).
GENERATION_DERIVED = {"bfloat16": (2 ** -6, 2 ** -4), "float16": (2 ** -9, 2 ** -7), "float32": (0.0, DRIFT_BOUND),
                      "float32-gpu": (2 ** -9, 2 ** -7)}
TIE_BUDGET = 1.0


def tie_spend(ties, bound: Bound) -> float:
    """The part of a row's tie budget its near ties spend: each tie's gap over the bound at its maximum logit."""
    return sum(t["gap"] / (bound.relative * abs(t["logit"]) + bound.absolute) for t in ties)


def bound_for(given: float | None, dtype: str | None, generative: bool = False, words: str = "") -> Bound:
    """The bound of a multiple_choice row's scores (nats) or of a generation's near ties (logits)."""
    if given is not None:
        unit, rule = ("logits", f"gap <= {given:g} logits") if generative else \
            ("nats", f"|logged - rescored| <= {given:g}")
        return Bound(rule, 0.0, given, f"the reviewer's --bound {given:g} {unit}")
    table = GENERATION_DERIVED if generative else {**DERIVED, "float32": (0.0, DRIFT_BOUND),
                                                   "float32-gpu": DERIVED["float16"]}
    if dtype is None:
        option = "LOGITS" if generative else "NATS"
        raise InputError("the adopted run names no dtype this tool knows (results config.model_dtype, model_args "
                         f"dtype; known: {', '.join(sorted(set(DTYPE_WORDS.values())))}), so no bound can be derived "
                         f"for its {'near ties' if generative else 'scores'}: give one with --bound {option}.")
    relative, absolute = table[dtype]
    basis = f"derived from {words or f'the dtype the run claims ({dtype})'}"
    if generative:
        rule = (f"gap <= {relative:g} * |maximum logit| + {absolute:g}" if relative else f"gap <= {absolute:g} logits")
        return Bound(rule, relative, absolute, basis)
    if dtype == "float32":
        return Bound(f"|logged - rescored| <= {absolute:g}", 0.0, absolute, basis)
    return Bound(f"|logged - rescored| <= {relative:g} * |rescored| + {absolute:g} * sqrt(tokens)", relative, 0.0,
                 basis + f", fitted to measured honest drift x{SAFETY:g}", absolute)


def candidate_bounds(question, bound: Bound) -> list:
    """Each candidate's bound (nats), from its rescored score and its continuation's token count."""
    counts = question.candidate_token_counts or [1] * len(question.rescored)
    return [bound.relative * abs(score) + bound.absolute + bound.per_token * math.sqrt(max(tokens, 1))
            for score, tokens in zip(question.rescored, counts)]


def margin(scores) -> float:
    ordered = sorted(scores, reverse=True)
    return ordered[0] - ordered[1] if len(ordered) > 1 else float("inf")


@dataclass
class Flip:
    idx: int
    metric: str
    logged: int  # the logged scores' prediction
    rescored: int  # the reviewer's
    margin: float  # the reviewer's margin of its prediction over the logged one, in the metric's compared units
    band: float  # the two candidates' bounds in the same units: a flip beyond it is not a near tie
    gold: int

    @property
    def direction(self) -> str:
        return ("toward gold" if self.logged == self.gold else "away from gold" if self.rescored == self.gold
                else "between wrong choices")

    def line(self) -> str:
        return (f"row idx {self.idx} ({self.metric}): logged predicts {self.logged}, rescored predicts "
                f"{self.rescored}; your margin {self.margin:.4g} within the near-tie band {self.band:.4g}; "
                f"{self.direction}")


def row_class(question, bound: Bound, metrics) -> tuple:
    """(class, max |difference|, flips) of one rescored row."""
    logged, rescored = question.logged, question.rescored
    if len(logged) != len(rescored):
        return OUT, float("inf"), []
    diffs = [abs(a - b) for a, b in zip(logged, rescored)]
    if all(a == b and str(a) == str(b) for a, b in zip(logged, rescored)):  # -0.0 is not 0.0
        return BITS, 0.0, []
    bounds = candidate_bounds(question, bound)
    if any(not d <= b for d, b in zip(diffs, bounds)):
        return OUT, max(diffs), []
    flips = []
    for name in argmax_metrics(metrics):
        metric = METRICS[name]
        theirs, ours = metric.prediction(logged, question), metric.prediction(rescored, question)
        if theirs != ours:
            values, spread = metric.compared(rescored, question), metric.compared(bounds, question)
            flips.append(Flip(question.idx, name, theirs, ours, values[ours] - values[theirs],
                              spread[ours] + spread[theirs], question.label))
    if any(flip.margin > flip.band for flip in flips):
        return OUT, max(diffs), flips
    return (FLIP if flips else WITHIN), max(diffs), flips


def sign_test(k: int, n: int) -> float:
    """Exact two-sided binomial p of k of n at 1/2 (the sign test): twice the smaller tail, at most 1."""
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(0, min(k, n - k) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


@dataclass
class FlipTest:
    """The flips' directions per metric, and which of them run one way beyond FLIP_ALPHA."""
    counts: dict = field(default_factory=dict)  # metric -> {"toward gold", "away from gold", "to choice 0", ...}
    one_way: list = field(default_factory=list)  # words of each direction test that fails

    def words(self) -> list:
        return [f"{metric} flips: " + ", ".join(f"{n} {what}" for what, n in counts.items())
                for metric, counts in self.counts.items()]


def flip_test(flips: list, choices: int) -> FlipTest:
    """The exact sign test on the flips' directions: toward or away from the gold answer; in a two-choice task also
    which choice the logged scores raised. Honest rounding flips near ties both ways; a forger's flips run one way."""
    test = FlipTest()
    for metric in dict.fromkeys(flip.metric for flip in flips):
        mine = [flip for flip in flips if flip.metric == metric]
        toward = sum(flip.direction == "toward gold" for flip in mine)
        away = sum(flip.direction == "away from gold" for flip in mine)
        counts = {"toward gold": toward, "away from gold": away}
        pairs = [("toward gold", toward, away)]
        if choices == 2:
            zero = sum(flip.logged == 0 for flip in mine)
            counts.update({"to choice 0": zero, "to choice 1": len(mine) - zero})
            pairs.append(("to one choice", zero, len(mine) - zero))
        test.counts[metric] = counts
        for what, a, b in pairs:
            p = sign_test(a, a + b)
            if p < FLIP_ALPHA:
                said = "to choice 0" if what == "to one choice" else what
                test.one_way.append(f"{metric}: {a} of {a + b} flips {said} against {b}: exact two-sided sign test "
                                    f"p = {p:.3g} < {FLIP_ALPHA:g}: rounding flips near ties both ways, these run "
                                    "one way")
    return test
