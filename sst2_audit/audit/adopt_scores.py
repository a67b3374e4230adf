"""An adopted run's scores: the bound a logged score is held to, and each row's class after its rescore.

A plain lm-eval run was made on the submitter's machine, often a GPU in bfloat16: its scores can equal the
reviewer's float32 CPU rescore bit for bit only when it was made the same way (float32, the lock's numeric
mode). Otherwise each score is held to a bound, the reviewer's (--bound) or derived from the dtype the run
claims, and stated in the verdict. A row is "bit for bit", "within the bound", a "prediction flip" (within the
bound, but its argmax moved: a near tie, listed with both margins) or "out of the bound" (FAIL).
"""

from sst2_audit.formats.adopted import BITS, Bound, FLIP, OUT, WITHIN
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.protocol.rules import predict
from sst2_audit.util.errors import InputError

# Measured (docs/measurements.md, 2026-12-03, AMD EPYC Zen 5): the embedded model's 32 SST-2 demo scores in bfloat16
# against float32, both lm-eval's own CLI on this CPU: at most 0.474 nats apart, 6.8 % of the score. The derived
# bound is 2^-3 of |score| plus 2^-3 nats (1.8x the measured relative spread); float16 keeps 3 more mantissa bits
# than bfloat16, so 2^-6; float32 claims the drift bound between CPUs (protocol/drift.py).
DERIVED = {"bfloat16": (2 ** -3, 2 ** -3), "float16": (2 ** -6, 2 ** -6), "float32": (0.0, DRIFT_BOUND)}
DTYPE_WORDS = {"torch.bfloat16": "bfloat16", "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.float16": "float16",
               "float16": "float16", "fp16": "float16", "half": "float16", "torch.float32": "float32",
               "float32": "float32", "fp32": "float32", "float": "float32"}


def claimed_dtype(results: dict, model_args: dict) -> str | None:
    """The dtype the run says it computed in: lm-eval's logged model_dtype, else the dtype of its model_args."""
    config = results.get("config") if isinstance(results.get("config"), dict) else {}
    for said in (config.get("model_dtype"), model_args.get("dtype")):
        if isinstance(said, str) and said in DTYPE_WORDS:
            return DTYPE_WORDS[said]
    return None


# A generation's bound is on logits: where the logged text takes another token than this machine's maximum, that
# token's logit must lie within R * |maximum| + A of it (audit/adopt_generation.py::near_rule). Measured
# (docs/measurements.md, "Generative tasks", 2026-12-04, Intel AMX): a bfloat16 lm_eval run of the embedded model on
# 24 gsm8k-shaped rows against this machine's float32 decode (the measured gaps are in the docs).
GENERATION_DERIVED = {"bfloat16": (2 ** -5, 2 ** -3), "float16": (2 ** -8, 2 ** -6), "float32": (0.0, DRIFT_BOUND)}


# what a bound holds, per kind of row: (the dtype table, the bounded quantity, what the relative term scales,
# the unit said after an absolute-only rule, the unit of --bound, what the bound is for)
SCORES = (DERIVED, "|logged - rescored|", "|rescored|", "", "nats", "scores")
GENERATIONS = (GENERATION_DERIVED, "gap", "|maximum logit|", " logits", "logits", "near ties")


def bound_for(given: float | None, dtype: str | None, generative: bool = False) -> Bound:
    """The bound of a multiple_choice row's scores (nats) or of a generation's near ties (logits)."""
    table, bounded, scale, unit, option, what = GENERATIONS if generative else SCORES
    if given is not None:
        return Bound(f"{bounded} <= {given:g}{unit}", 0.0, given, f"the reviewer's --bound {given:g} {option}")
    if dtype is None:
        raise InputError("the adopted run names no dtype this tool knows (results config.model_dtype, model_args "
                         f"dtype; known: {', '.join(sorted(table))}), so no bound can be derived for its {what}: "
                         f"give one with --bound {option.upper()}.")
    relative, absolute = table[dtype]
    rule = (f"{bounded} <= {relative:g} * {scale} + {absolute:g}" if relative else f"{bounded} <= {absolute:g}{unit}")
    return Bound(rule, relative, absolute, f"derived from the dtype the run claims ({dtype})")


def margin(scores) -> float:
    ordered = sorted(scores, reverse=True)
    return ordered[0] - ordered[1] if len(ordered) > 1 else float("inf")


def row_class(logged: list, rescored: list, bound: Bound) -> tuple:
    """(class, max |difference|) of one row."""
    if len(logged) != len(rescored):
        return OUT, float("inf")
    diffs = [abs(a - b) for a, b in zip(logged, rescored)]
    largest = max(diffs)
    if all(a == b and str(a) == str(b) for a, b in zip(logged, rescored)):  # -0.0 is not 0.0
        return BITS, 0.0
    if any(not d <= bound.relative * abs(b) + bound.absolute for d, b in zip(diffs, rescored)):
        return OUT, largest
    return (FLIP if predict(logged) != predict(rescored) else WITHIN), largest


def flip_line(question) -> str:
    return (f"row idx {question.idx}: logged predicts {predict(question.logged)} (margin "
            f"{margin(question.logged):.4g}), rescored predicts {predict(question.rescored)} (margin "
            f"{margin(question.rescored):.4g})")
