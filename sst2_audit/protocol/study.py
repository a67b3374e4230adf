"""A paired protocol-sensitivity study: several variants (profiles of one task and one data, differing in
shot count, shot seed, ...) scored on the same dev rows, and what varying them does.

From the variants' run records alone: per question, each variant's prediction, correctness and margin (the
gold choice's compared value minus the best other's: above 0 the gold answer won); per variant, the metric;
against the base variant (the first), the paired difference with its 95% Bonett-Price interval and the exact McNemar
test (protocol/stats.py, as `audit --compare` computes them), unadjusted and Holm-adjusted over the k comparisons;
and the spread of the metric across variants.
"""

import math

from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.stats import holm, paired_difference
from sst2_audit.util.errors import InputError


def margin(metric: str, scores: list, question) -> float:
    values = METRICS[metric].compare(scores, question)
    others = [value for number, value in enumerate(values) if number != question.label]
    return values[question.label] - max(others)


def require_comparable(runs: dict, metric: str) -> None:
    """Variants of one study: the same task, data and scored rows; an argmax metric they all report."""
    first = next(iter(runs.values()))
    if METRICS.get(metric) is None or not METRICS[metric].counts_correct:
        raise InputError(f"--metric {metric}: a study pairs per-question right and wrong: acc or acc_norm.")
    for profile, record in runs.items():
        if metric not in record.metrics:
            raise InputError(f"variant {profile}: task {record.task} reports {record.metrics}, not {metric}.")
        same = (record.task, [q.idx for q in record.questions], [q.doc_hash for q in record.questions])
        if same != (first.task, [q.idx for q in first.questions], [q.doc_hash for q in first.questions]):
            raise InputError(f"variant {profile}: a study's variants score the same task on the same rows; "
                             f"{profile} scored other rows or another task than {next(iter(runs))}.")


def study_numbers(runs: dict, metric: str) -> dict:
    """runs: profile -> run record, the base first. The study's numbers as study.json holds them."""
    require_comparable(runs, metric)
    profiles = list(runs)
    base = profiles[0]
    if len(runs[base].questions) < 2:
        raise InputError(f"a study pairs at least 2 questions; variant {base} scored {len(runs[base].questions)}.")
    correct = {p: [q.predictions["official"][metric] == q.label for q in runs[p].questions] for p in profiles}
    values = {p: runs[p].summaries["official"][metric].value for p in profiles}
    questions = []
    for number, question in enumerate(runs[base].questions):
        questions.append({"idx": question.idx, "label": question.label, "variants": {
            p: {"prediction": runs[p].questions[number].predictions["official"][metric],
                "correct": correct[p][number],
                "margin": margin(metric, runs[p].questions[number].scores["official"], runs[p].questions[number])}
            for p in profiles}})
    paired = {}
    for profile in profiles[1:]:  # A = the base, B = the variant: B - A, as audit --compare base variant says it
        comparison = paired_difference(correct[base], correct[profile])
        paired[profile] = {"rows": comparison.rows, "both_right": comparison.both_right,
                           "base_only": comparison.a_only, "variant_only": comparison.b_only,
                           "both_wrong": comparison.both_wrong, "difference": comparison.difference,
                           "interval": list(comparison.interval), "mcnemar_p": comparison.p_value}
    # k comparisons against one base: each p is shown unadjusted and with Holm's adjustment over the k; a variant
    # differs from the base when the adjusted p is below 0.05 (the page's colours say the same)
    for profile, adjusted in zip(paired, holm([paired[p]["mcnemar_p"] for p in paired])):
        paired[profile].update({"mcnemar_p_holm": adjusted, "differs": adjusted < 0.05})
    numbers = list(values.values())
    mean = sum(numbers) / len(numbers)
    spread = {"min": min(numbers), "max": max(numbers), "range": max(numbers) - min(numbers),
              "sd": math.sqrt(sum((v - mean) ** 2 for v in numbers) / (len(numbers) - 1)) if len(numbers) > 1 else 0.0,
              "questions_that_flip": sum(len({v["correct"] for v in q["variants"].values()}) > 1 for q in questions)}
    return {"metric": metric, "base": base, "values": values, "paired": paired, "spread": spread,
            "questions": questions}
