"""Per-path, per-metric summaries (the mean, its stderr, counts), computed the same way by the run and the audit."""

from .metrics import METRICS
from .protocol import accuracy, accuracy_stderr
from .records import PATHS, PathSummary


def summarize(predicted: list, labels: list, names: tuple) -> PathSummary:
    """An argmax metric: the mean of the per-question 0/1 and the predicted choices' counts."""
    correct = [1.0 if p == l else 0.0 for p, l in zip(predicted, labels)]
    return PathSummary(
        accuracy=accuracy(correct), stderr=accuracy_stderr(correct), correct=int(sum(correct)), rows=len(correct),
        predictions={name: predicted.count(i) for i, name in enumerate(names)},
    )


def summarize_values(values: list) -> PathSummary:
    """A value metric (mc2): the mean of the per-question values, in lm-eval's order of operations."""
    return PathSummary(accuracy=accuracy(values), stderr=accuracy_stderr(values), correct=None, rows=len(values),
                       predictions={})


def choice_names(spec, questions) -> tuple:
    return spec.choice_names(max((len(q.candidates) for q in questions), default=0))


def label_counts(spec, questions) -> dict:
    labels = [q.label for q in questions]
    return {name: labels.count(i) for i, name in enumerate(choice_names(spec, questions))}


def path_summaries(spec, questions, path: str) -> dict:
    """{metric: summary} of one path, recomputed from the scores (never from the recorded predictions)."""
    labels, names = [q.label for q in questions], choice_names(spec, questions)
    return {name: summarize([METRICS[name].prediction(q.scores[path], q) for q in questions], labels, names)
            if METRICS[name].argmax else summarize_values([METRICS[name].value(q.scores[path], q) for q in questions])
            for name in spec.metrics}


def lm_eval_aggregate(metric: str, questions) -> tuple:
    """(mean, stderr) as lm-eval aggregates the values it logged: in doc_id order (lm-eval's evaluator iterates
    the sorted ids it was given), mean and mean_stderr (lm_eval/api/metrics.py)."""
    logged = [q.logged[metric] for q in sorted(questions, key=lambda q: q.idx)]
    return accuracy(logged), accuracy_stderr(logged)


def summaries(spec, questions) -> dict:
    """{path: {metric: summary}} as run.json records them."""
    return {path: path_summaries(spec, questions, path) for path in PATHS}
