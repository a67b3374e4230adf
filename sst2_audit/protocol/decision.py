"""A pre-registered decision rule, in a small fixed vocabulary, and its outcome on a set of runs.

A rule names a metric, the profiles it compares (in the pre-registration's order: A, then B) and, for
`at_least`, a threshold. Its outcome is computed from the runs' own summaries (the official path's value;
both paths are equal bit for bit in every passing run) and, for the paired rule, from each question's
correctness. The same function decides the dev outcome (shown when the rule is written), the confirmation's
outcome and the audit's re-evaluation.
"""

from dataclasses import dataclass

from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.stats import mcnemar_power, minimum_detectable, paired_difference
from sst2_audit.util.errors import InputError

# kind -> (number of profiles, what it says, with {metric}, {A}, {B}, {threshold}). The point-estimate rules say so in
# their words (no test: on 128 rows, `exceeds` holds 44-48 % of the time between equal accuracies); the paired rule
# decides on the exact McNemar test, never a Wald interval (which held at discordant counts (0, 4) where p = 0.125).
ALPHA = 0.05
RULES = {
    "exceeds": (2, "the point estimate of {metric} of profile {A} exceeds that of profile {B} (a point estimate, no "
                   "test)"),
    "at-least": (1, "the point estimate of {metric} of profile {A} is at least {threshold!r} (a point estimate, no "
                    "test)"),
    "paired-exact": (2, "the exact two-sided McNemar test of {metric} of profile {A} against profile {B} over the same "
                        "questions gives p < 0.05"),
}
RETIRED = {"paired-excludes-zero": "it decided on a Wald interval, which held where the exact McNemar p on the same "
                                   "line was 0.125 (discordant counts 0 and 4 at 64 rows): use paired-exact"}


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
    if kind in RETIRED:
        raise InputError(f"--rule {kind}: retired, {RETIRED[kind]} (a pre-registration that names it is pre-registered "
                         "again).")
    if kind not in RULES:
        raise InputError(f"--rule {kind!r}: expected one of {', '.join(RULES)}.")
    count = RULES[kind][0]
    if len(profiles) != count or len(set(profiles)) != count:
        raise InputError(f"--rule {kind}: expected dev runs of {count} different profile(s) (--dev-run), got "
                         f"{list(profiles)}.")
    if metric not in METRICS:
        raise InputError(f"--metric {metric!r}: expected one of {', '.join(METRICS)}.")
    if kind == "paired-exact" and not METRICS[metric].counts_correct:
        raise InputError(f"--rule {kind}: a paired test needs a per-question right or wrong (acc, acc_norm); "
                         f"{metric} has none: use exceeds.")
    if (threshold is None) != (kind != "at-least"):
        raise InputError(f"--threshold: {'required' if kind == 'at-least' else 'only'} with --rule at-least.")
    if threshold is not None and not 0.0 <= threshold <= 1.0:
        raise InputError(f"--threshold {threshold!r}: expected a number from 0 to 1.")
    return Rule(kind, metric, tuple(profiles), threshold)


def _correct(record, metric: str) -> list:
    return [question.predictions["official"][metric] == question.label for question in record.questions]


def outcome(rule: Rule, runs: dict, sealed_rows: int | None = None) -> dict:
    """runs: profile -> its run record. {"holds", "values", and for the paired rule "paired"}; the values are
    the official path's (equal to the independent path's in every run that passed). sealed_rows (a pre-registration):
    the paired rule's power over that many sealed rows at this discordance (stats.minimum_detectable)."""
    values = {profile: runs[profile].summaries["official"][rule.metric].value for profile in rule.profiles}
    result: dict = {"holds": False, "values": values, "paired": None}
    if rule.kind == "exceeds":
        result["holds"] = values[rule.profiles[0]] > values[rule.profiles[1]]
    elif rule.kind == "at-least":
        result["holds"] = values[rule.profiles[0]] >= rule.threshold
    else:
        a, b = (runs[profile] for profile in rule.profiles)
        if [(q.idx, q.doc_hash) for q in a.questions] != [(q.idx, q.doc_hash) for q in b.questions]:
            raise InputError(f"--rule {rule.kind}: profiles {rule.profiles[0]} and {rule.profiles[1]} scored "
                             "different questions (by idx and doc hash); a paired test needs the same ones (the same "
                             "data).")
        paired = paired_difference(_correct(b, rule.metric), _correct(a, rule.metric))  # A - B
        result["paired"] = {"rows": paired.rows, "a_only": paired.b_only, "b_only": paired.a_only,
                            "difference": paired.difference, "mcnemar_p": paired.p_value}
        result["holds"] = paired.p_value < ALPHA
        if sealed_rows:
            discordance = (paired.a_only + paired.b_only) / paired.rows if paired.rows else 0.0
            result["paired"]["power"] = {
                "sealed_rows": sealed_rows, "discordance": discordance,
                "minimum_detectable": minimum_detectable(sealed_rows, discordance),
                "power_for_dev_effect": round(mcnemar_power(sealed_rows, discordance, abs(paired.difference)), 4)}
    return result


def outcome_line(rule: Rule, result: dict, power: dict | None = None) -> str:
    """The outcome in words; power (a pre-registration's): what the sealed rows can detect, said where it did not
    hold."""
    values = ", ".join(f"{profile} {value!r}" for profile, value in result["values"].items())
    line = f"{rule.statement()}: {'HOLDS' if result['holds'] else 'DOES NOT HOLD'} ({rule.metric}: {values}"
    if result["paired"]:
        paired = result["paired"]
        line += (f"; A - B = {paired['difference']:+.4f}, only A right {paired['a_only']}, only B right "
                 f"{paired['b_only']}, exact McNemar p = {paired['mcnemar_p']:.4g}")
        power = power or paired.get("power")
        if power:
            smallest = power["minimum_detectable"]
            line += (f"; at the dev discordance {power['discordance']:.3f}, {power['sealed_rows']} sealed rows detect "
                     + (f"|A - B| >= {smallest:.3f} at 80 % power (exact)" if smallest is not None else
                        "no difference at 80 % power")
                     + f", power {power['power_for_dev_effect']:.2f} for the dev effect")
            if not result["holds"]:
                line += (f": under-powered for effects below {smallest:.3f}" if smallest is not None else
                         ": under-powered for any effect")
    return line + ")"


def prereg_power(prereg) -> dict | None:
    """The power a pre-registration stated for its sealed rows (the paired rule's), or None."""
    paired = prereg.dev_outcome.get("paired") if isinstance(prereg.dev_outcome, dict) else None
    return paired.get("power") if isinstance(paired, dict) else None
