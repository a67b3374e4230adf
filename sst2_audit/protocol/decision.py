"""A pre-registered decision rule, in a small fixed vocabulary, and its outcome on a set of runs.

A rule names a metric, the profiles it compares (in the pre-registration's order: A, then B) and, for
`at_least`, a threshold. Its outcome is computed from the runs' own summaries (the official path's value;
both paths are equal bit for bit in every passing run) and, for the paired rule, from each question's
correctness. The same function decides the dev outcome (shown when the rule is written), the confirmation's
outcome and the audit's re-evaluation.
"""

from dataclasses import dataclass

from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.stats import paired_difference
from sst2_audit.util.errors import InputError

# kind -> (number of profiles, what it says, with {metric}, {A}, {B}, {threshold})
RULES = {
    "exceeds": (2, "{metric} of profile {A} exceeds {metric} of profile {B}"),
    "at-least": (1, "{metric} of profile {A} is at least {threshold!r}"),
    "paired-excludes-zero": (2, "the 95% paired interval of {metric} of profile {A} minus {metric} of profile {B} "
                                "over the same questions excludes 0"),
}


@dataclass(frozen=True)
class Rule:
    kind: str
    metric: str
    profiles: tuple
    threshold: float | None = None

    def statement(self) -> str:
        names = dict(zip("AB", self.profiles))
        return RULES[self.kind][1].format(metric=self.metric, threshold=self.threshold, **names)


def make_rule(kind: str, metric: str, profiles, threshold: float | None) -> Rule:
    """A rule, or InputError naming what the vocabulary does not allow."""
    if kind not in RULES:
        raise InputError(f"--rule {kind!r}: expected one of {', '.join(RULES)}.")
    count = RULES[kind][0]
    if len(profiles) != count or len(set(profiles)) != count:
        raise InputError(f"--rule {kind}: expected dev runs of {count} different profile(s) (--dev-run), got "
                         f"{list(profiles)}.")
    if metric not in METRICS:
        raise InputError(f"--metric {metric!r}: expected one of {', '.join(METRICS)}.")
    if kind == "paired-excludes-zero" and METRICS[metric].kind != "accuracy":
        raise InputError(f"--rule {kind}: a paired interval needs a per-question right or wrong (acc, acc_norm); "
                         f"{metric} has none: use exceeds.")
    if (threshold is None) != (kind != "at-least"):
        raise InputError(f"--threshold: {'required' if kind == 'at-least' else 'only'} with --rule at-least.")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InputError(f"--threshold {threshold!r}: expected a number from 0 to 1.")
    return Rule(kind, metric, tuple(profiles), threshold)


def _correct(record, metric: str) -> list:
    return [question.predictions["official"][metric] == question.label for question in record.questions]


def outcome(rule: Rule, runs: dict) -> dict:
    """runs: profile -> its run record. {"holds", "values", and for the paired rule "paired"}; the values are
    the official path's (equal to the independent path's in every run that passed)."""
    values = {profile: runs[profile].summaries["official"][rule.metric].value for profile in rule.profiles}
    result = {"holds": False, "values": values, "paired": None}
    if rule.kind == "exceeds":
        result["holds"] = values[rule.profiles[0]] > values[rule.profiles[1]]
    elif rule.kind == "at-least":
        result["holds"] = values[rule.profiles[0]] >= rule.threshold
    else:
        a, b = (runs[profile] for profile in rule.profiles)
        if [q.idx for q in a.questions] != [q.idx for q in b.questions]:
            raise InputError(f"--rule {rule.kind}: profiles {rule.profiles[0]} and {rule.profiles[1]} scored "
                             "different questions; a paired interval needs the same ones (the same data).")
        paired = paired_difference(_correct(b, rule.metric), _correct(a, rule.metric))  # A - B
        low, high = paired.interval
        result["paired"] = {"rows": paired.rows, "a_only": paired.b_only, "b_only": paired.a_only,
                            "difference": paired.difference, "interval": [low, high], "mcnemar_p": paired.p_value}
        result["holds"] = low > 0 or high < 0
    return result


def outcome_line(rule: Rule, result: dict) -> str:
    values = ", ".join(f"{profile} {value!r}" for profile, value in result["values"].items())
    line = f"{rule.statement()}: {'HOLDS' if result['holds'] else 'DOES NOT HOLD'} ({rule.metric}: {values}"
    if result["paired"]:
        paired = result["paired"]
        low, high = paired["interval"]
        line += (f"; A - B = {paired['difference']:+.4f}, 95% paired interval {low:+.4f} to {high:+.4f}, only A "
                 f"right {paired['a_only']}, only B right {paired['b_only']}, exact McNemar p = "
                 f"{paired['mcnemar_p']:.4g}")
    return line + ")"
