"""Per-path, per-metric summaries (the mean, its stderr, counts), computed the same way by the run and the audit."""

from sst2_audit.protocol.corpus import BOOTSTRAP_ITERS
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.rules import accuracy, accuracy_stderr
from sst2_audit.formats.records import PATHS, PathSummary
from sst2_audit.protocol.stats import wilson


def summarize(predicted: list, labels: list, names: tuple) -> PathSummary:
    """An argmax metric: the mean of the per-question 0/1 and the predicted choices' counts."""
    correct = [1.0 if p == l else 0.0 for p, l in zip(predicted, labels)]
    return PathSummary(
        value=accuracy(correct), stderr=accuracy_stderr(correct), correct=int(sum(correct)), rows=len(correct),
        predictions={name: predicted.count(i) for i, name in enumerate(names)},
    )


def interval(summary, metric: str) -> tuple:
    """95%: Wilson's for a count of right answers, else value +- 1.96 stderr within the metric's range
    (the console, the page and the card show the same)."""
    if summary.correct is None:
        low, high = METRICS[metric].bounds
        return max(low, summary.value - 1.96 * summary.stderr), min(high, summary.value + 1.96 * summary.stderr)
    return wilson(summary.correct, summary.rows)


def summarize_values(values: list, value: float, stderr: float, predictions: dict) -> PathSummary:
    """A value or corpus metric (mc2; f1, mcc): its number, no count of right answers."""
    return PathSummary(value=value, stderr=stderr, correct=None, rows=len(values), predictions=predictions)


def choice_names(spec, questions) -> tuple:
    return spec.choice_names(max((len(q.candidates) for q in questions), default=0))


def label_counts(spec, questions) -> dict:
    labels = [q.label for q in questions]
    return {name: labels.count(i) for i, name in enumerate(choice_names(spec, questions))}


def bootstrap_iters(settings: dict) -> int:
    return settings.get("bootstrap_iters", BOOTSTRAP_ITERS)


def path_summary(spec, questions, path: str, metric: str, settings: dict) -> PathSummary:
    """One metric of one path, recomputed from the scores (never from the recorded predictions). A corpus
    metric's bootstrap depends on the order of its items, a mean rounds by its order of summation, and so
    does a stderr's sum of squared deviations even over 0/1 values (172 rows differed in the last bit): all
    go in lm-eval's order, by doc id."""
    entry, names = METRICS[metric], choice_names(spec, questions)
    ordered = sorted(questions, key=lambda q: q.idx)
    if entry.counts_correct:
        return summarize([entry.predict(q.scores[path], q) for q in ordered], [q.label for q in ordered], names)
    values = [entry.value(q.scores[path], q) for q in ordered]
    predicted = [entry.predict(q.scores[path], q) for q in questions] if entry.argmax else None
    return summarize_values(values, *entry.aggregate(values, bootstrap_iters(settings)),
                            {name: predicted.count(i) for i, name in enumerate(names)} if predicted else {})


def path_summaries(spec, questions, path: str, settings: dict) -> dict:
    """{metric: summary} of one path."""
    return {metric: path_summary(spec, questions, path, metric, settings) for metric in spec.metrics}


def lm_eval_aggregate(metric: str, questions, settings: dict) -> tuple:
    """(number, stderr) as lm-eval aggregates the values it logged: in doc_id order (lm-eval's evaluator
    iterates the sorted ids it was given): mean and mean_stderr, or a corpus statistic and its bootstrap
    (lm_eval/api/metrics.py)."""
    logged = [q.logged[metric] for q in sorted(questions, key=lambda q: q.idx)]
    return METRICS[metric].aggregate(logged, bootstrap_iters(settings))


def summaries(spec, questions, settings: dict) -> dict:
    """{path: {metric: summary}} as run.json records them."""
    return {path: path_summaries(spec, questions, path, settings) for path in PATHS}
