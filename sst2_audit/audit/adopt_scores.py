"""An adopted run's scores: the bound a logged score is held to, each row's class after its rescore, and the test
that tells honest rounding from a forger's spending of the bound.

A plain lm-eval run was made on the submitter's machine, often a GPU in bfloat16: its scores can equal the
reviewer's float32 CPU rescore bit for bit only when it was made the same way (float32, the lock's numeric mode).
Otherwise each score is held to a bound, the reviewer's (--bound) or fitted to honest drift measured for the dtype
the run claims; a tolerance widened on the submitter's word is a budget a forger can spend, so:
- the fitted bound grows with the square root of the continuation's tokens (honest rounding), not with the score;
- a prediction flip (acc, acc_norm, each metric's own prediction) is accepted only where the reviewer's own margin
  lies within the margin's band (a near tie); a flip beyond it is out of the bound;
- a margin (the difference of two candidates) is held to its own, tighter fit: rounding moves a context's
  candidates largely together;
- flips that run toward the gold answer FAIL by an exact two-sided sign test at FLIP_ALPHA, however each row looks
  alone;
- a run claiming bfloat16 or float16 whose rows equal the float32 rescore bit for bit is held to float32.
"""

import math
from dataclasses import dataclass, field

from sst2_audit.formats.adopted import BITS, Bound, FLIP, OUT, WITHIN
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.protocol.metrics import argmax_metrics, METRICS
from sst2_audit.protocol.stats import mcnemar_exact
from sst2_audit.task.rows import shown_ids
from sst2_audit.util.errors import InputError

# Measured (docs/measurements.md, "Honest drift of reduced precision", 2026-12-06, Intel Xeon with AMX): lm-eval's
# own HFLM.loglikelihood in bfloat16 and float16 against float32 on this CPU, the embedded SmolLM2-135M and tiny random
# Llamas of widths 64 and 256, SST-2-shaped 1-token choices and continuations of 1 to 128 tokens
# (benchmarks/measure_drift.py). Rounding moves the candidates of one context largely together (the normaliser), so
# two fits: a candidate's |logged - rescored| - REL * |rescored| over sqrt(tokens) (bfloat16 0.519, float16 0.0665),
# and a margin's (the difference of two candidates) drift - REL * (|a| + |b|) over sqrt(tokens) (bfloat16 0.151,
# float16 0.0229); REL is half an ulp of the dtype (lm-eval sums in the model's dtype). The bound is SAFETY times each.
SAFETY = 2.0
FIT = {"bfloat16": (2 ** -8, 0.519, 0.151), "float16": (2 ** -11, 0.0665, 0.0229)}
DERIVED = {dtype: (SAFETY * rel, round(SAFETY * per_token, 4), round(SAFETY * margin, 4))
           for dtype, (rel, per_token, margin) in FIT.items()}
# float32 on a CUDA device: TF32 matmuls keep float16's 10-bit mantissa, so the float16 fit stands in for it there
# (not measured here: no GPU); float32 on a CPU is held to the drift bound between CPUs (protocol/drift.py).
GPU_FLOAT32 = "float32 (on a CUDA device: TF32 matmuls have float16's mantissa; the float16 fit, not measured here)"
DTYPE_WORDS = {"torch.bfloat16": "bfloat16", "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.float16": "float16",
               "float16": "float16", "fp16": "float16", "half": "float16", "torch.float32": "float32",
               "float32": "float32", "fp32": "float32", "float": "float32"}
NARROWEST = ("float32", "float16", "bfloat16")  # by bound, narrowest first
FLIP_ALPHA = 0.01  # the sign test on the flips' directions (toward gold or away), two-sided, per metric


def claimed_dtype(results: dict, model_args: dict) -> tuple:
    """(dtype, words): the dtype the run says it computed in. Every place it is said counts (logged model_dtype,
    model_args dtype or torch_dtype); where they disagree the narrowest bound is taken, since the widest is the one
    a forger would write. float32 on a CUDA device is its own claim (GPU_FLOAT32)."""
    logged = results.get("config")
    config = logged if isinstance(logged, dict) else {}
    # a device is said in the results config or in model_args (someone else's values: text, or anything JSON holds)
    return dtype_claimed((config.get("model_dtype"), model_args.get("dtype"), model_args.get("torch_dtype")),
                         (config.get("device"), model_args.get("device")))


def dtype_claimed(values, devices) -> tuple:
    """(dtype, words) from every field a run says its dtype in (the narrowest where they disagree) and every field
    it says its device in: any writer's (lm-eval's results and model_args, lighteval's model config)."""
    said = {DTYPE_WORDS[v] for v in values if isinstance(v, str) and v in DTYPE_WORDS}
    if not said:
        return None, ""
    dtype = min(said, key=NARROWEST.index)
    words = f"the dtype the run claims ({dtype})" if len(said) == 1 else (
        f"the narrowest of the dtypes the run claims ({', '.join(sorted(said))}: {dtype})")
    device = next((d for d in devices if isinstance(d, str) and d.startswith("cuda")), None)
    if dtype == "float32" and device:
        return "float32-gpu", f"{words} on device {device}: {GPU_FLOAT32}"
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


def bound_for(given: float | None, dtype: str | None, decodes: bool = False, words: str = "") -> Bound:
    """The bound of a multiple_choice row's scores (nats) or of a generation's near ties (logits)."""
    if given is not None:
        if decodes:
            return Bound(f"gap <= {given:g} logits", 0.0, given, f"the reviewer's --bound {given:g} logits")
        return Bound(f"|logged - rescored| <= {given:g}", 0.0, given, f"the reviewer's --bound {given:g} nats",
                     margin_absolute=2 * given)
    if dtype is None:
        option = "LOGITS" if decodes else "NATS"
        raise InputError("the adopted run names no dtype this tool knows (results config.model_dtype, model_args "
                         f"dtype; known: {', '.join(sorted(set(DTYPE_WORDS.values())))}), so no bound can be derived "
                         f"for its {'near ties' if decodes else 'scores'}: give one with --bound {option}.")
    basis = f"derived from {words or f'the dtype the run claims ({dtype})'}"
    if decodes:
        relative, absolute = GENERATION_DERIVED[dtype]
        rule = (f"gap <= {relative:g} * |maximum logit| + {absolute:g}" if relative else f"gap <= {absolute:g} logits")
        return Bound(rule, relative, absolute, basis)
    if dtype == "float32":
        return Bound(f"|logged - rescored| <= {DRIFT_BOUND:g}", 0.0, DRIFT_BOUND, basis,
                     margin_absolute=2 * DRIFT_BOUND)
    relative, per_token, margin_per_token = DERIVED["float16" if dtype == "float32-gpu" else dtype]
    return Bound(f"|logged - rescored| <= {relative:g} * |rescored| + {per_token:g} * sqrt(tokens), a margin's drift "
                 f"<= {relative:g} * (|a| + |b|) + {margin_per_token:g} * sqrt(tokens)", relative, 0.0,
                 basis + f", fitted to measured honest drift x{SAFETY:g}", per_token, relative, 0.0, margin_per_token)


def score_bound(score: float, tokens: int, bound: Bound) -> float:
    """One rescored score's bound (nats), from the score and the tokens its sum runs over."""
    return bound.relative * abs(score) + bound.absolute + bound.per_token * math.sqrt(max(tokens, 1))


def candidate_bounds(question, bound: Bound) -> list:
    """Each candidate's bound (nats), from its rescored score and its continuation's token count."""
    counts = question.candidate_token_counts or [1] * len(question.rescored)
    return [score_bound(score, tokens, bound) for score, tokens in zip(question.rescored, counts)]


def margin_bound(question, bound: Bound, i: int, j: int) -> float:
    """The bound of the drift of rescored[i] - rescored[j] (nats)."""
    counts = question.candidate_token_counts or [1] * len(question.rescored)
    return (bound.margin_relative * (abs(question.rescored[i]) + abs(question.rescored[j])) + bound.margin_absolute
            + bound.margin_per_token * math.sqrt(max(counts[i], counts[j], 1)))


def _band(metric, question, bound: Bound, bounds: list, i: int, j: int) -> float:
    """The near-tie band of a metric's compared values c_k = w_k * score_k (w = 1 for acc, 1/characters for
    acc_norm) between choices i and j: w_i * (the margin's bound) + |w_i - w_j| * (j's candidate bound)."""
    weights = metric.compare([1.0] * len(bounds), question)
    return weights[i] * margin_bound(question, bound, i, j) + abs(weights[i] - weights[j]) * bounds[j]


@dataclass
class Flip:
    idx: int
    metric: str
    logged: int  # the logged scores' prediction
    rescored: int  # the reviewer's
    margin: float  # the reviewer's margin of its prediction over the logged one, in the metric's compared units
    band: float  # the margin's bound in the same units (_band): a flip beyond it is not a near tie
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
    pairs = [(i, j) for i in range(len(logged)) for j in range(i + 1, len(logged))]
    if any(not abs((logged[i] - logged[j]) - (rescored[i] - rescored[j])) <= margin_bound(question, bound, i, j)
           for i, j in pairs):
        return OUT, max(diffs), []
    flips = []
    for name in argmax_metrics(metrics):
        metric = METRICS[name]
        theirs, ours = metric.predict(logged, question), metric.predict(rescored, question)
        if theirs != ours:
            values = metric.compare(rescored, question)
            flips.append(Flip(question.idx, name, theirs, ours, values[ours] - values[theirs],
                              _band(metric, question, bound, bounds, ours, theirs), question.label))
    if any(flip.margin > flip.band for flip in flips):
        return OUT, max(diffs), flips
    return (FLIP if flips else WITHIN), max(diffs), flips


@dataclass
class FlipTest:
    """The flips' directions per metric, and which of them run one way beyond FLIP_ALPHA."""
    counts: dict = field(default_factory=dict)  # metric -> {"toward gold", "away from gold", "between wrong choices"}
    one_way: list = field(default_factory=list)  # words of each direction test that fails

    def words(self) -> list:
        return [f"{metric} flips: " + ", ".join(f"{n} {what}" for what, n in counts.items())
                for metric, counts in self.counts.items()]


def flip_test(flips: list) -> FlipTest:
    """The exact sign test on the flips' directions: toward or away from the gold answer. Honest rounding flips near
    ties both ways, whatever the gold answer (not whatever the choice: rounding may favour one choice's token
    throughout, measured on tiny models, so no test on which choice a flip raised); a forger's flips run toward it."""
    test = FlipTest()
    for metric in dict.fromkeys(flip.metric for flip in flips):
        mine = [flip for flip in flips if flip.metric == metric]
        toward = sum(flip.direction == "toward gold" for flip in mine)
        away = sum(flip.direction == "away from gold" for flip in mine)
        counts = {"toward gold": toward, "away from gold": away}
        counts["between wrong choices"] = len(mine) - toward - away
        test.counts[metric] = counts
        p = mcnemar_exact(toward, away)  # the sign test: exact two-sided binomial at 1/2
        if p < FLIP_ALPHA:
            test.one_way.append(f"{metric}: {toward} of {toward + away} flips toward gold against {away}: exact "
                                f"two-sided sign test p = {p:.3g} < {FLIP_ALPHA:g}: rounding flips near ties both "
                                "ways, these run one way")
    return test


def drift_causes(adoption) -> str:
    """What the run's own files show that makes scores differ from the reviewer's float32 CPU rescore: words for a
    drift verdict (empty when nothing is seen; the numeric mode's environment variables are never logged)."""
    config = adoption.output.results.get("config") or {}
    seen, attention = [], adoption.model_args.get("attn_implementation")
    if attention != adoption.settings["attention"]:
        seen.append(f"attention {attention!r} (model_args attn_implementation; unset: transformers picks sdpa) where "
                    f"your lock computes {adoption.settings['attention']!r}")
    if adoption.dtype not in (None, "float32"):
        seen.append(f"the dtype the run claims, {adoption.dtype}")
    device = config.get("device")
    if isinstance(device, str) and not device.startswith("cpu"):
        seen.append(f"device {device!r}")
    return (f"; likely causes the run's files show: {'; '.join(seen)}" if seen else
            "; the run's files show no cause (attention, dtype, device as your lock's): a run made outside your "
            "lock's numeric mode (its environment variables, docs/cli.md) rounds differently and is not logged")


def claim_not_taken(adoption, chosen: list, bits: list):
    """The float32 bound of a run claiming a reduced precision whose rescored rows hold bits equal to the float32
    rescore (a reduced-precision sum is never the float32 rescore's bits, so such rows say the run was float32);
    None where the claim stands: no such row, a bound of the reviewer's, or no reduced precision claimed."""
    if not bits or adoption.bound_given is not None or adoption.dtype in (None, "float32"):
        return None
    return bound_for(None, "float32", False, f"float32: {len(bits)} of {len(chosen)} rescored rows of this run, which "
                     f"claims {adoption.dtype}, equal the float32 rescore bit for bit (row idx {shown_ids(bits, 4)}), "
                     "so the claim is not taken")


def take_claim_back(adoption, chosen: list, bits: list, shaped=lambda bound: bound) -> bool:
    """The rescore's bound from here on (shaped: a document's, for loglikelihood_rolling) where claim_not_taken
    applies, the claims level's kept as adoption.claims_bound; whether it did."""
    taken_back = claim_not_taken(adoption, chosen, bits)
    if taken_back is not None:
        adoption.claims_bound, adoption.bound = adoption.bound, shaped(taken_back)
    return taken_back is not None


def recorded_bound(adoption, rows: list, shaped=lambda bound: bound):
    """The bound the adoption that wrote a record of `rows` derived: the claim's not taken where its own rescored
    rows held float32's bits (claim_not_taken of those rows), else the claims level's. An adoption that rescored no
    row, or drew a sample, keeps the claim's bound or words of its own rows, which this audit's rescore of every
    row would not give (its rows' rescores and classes are held to this machine's in adopted_level)."""
    rescored = [row.idx for row in rows if row.rescored is not None]
    taken_back = claim_not_taken(adoption, rescored, [row.idx for row in rows if row.rescored is not None
                                                      and row.row_class == BITS])
    return shaped(taken_back) if taken_back is not None else adoption.claims_bound or adoption.bound
