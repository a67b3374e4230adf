"""Per-path summaries of acc and acc_norm, computed the same way by the run and by the audit."""

from .protocol import accuracy, accuracy_stderr, predict, predict_norm
from .records import PathSummary


def summarize(predictions: list, labels: list, names: tuple) -> PathSummary:
    correct = [1.0 if p == l else 0.0 for p, l in zip(predictions, labels)]
    return PathSummary(
        accuracy=accuracy(correct), stderr=accuracy_stderr(correct), correct=int(sum(correct)), rows=len(correct),
        predictions={name: predictions.count(i) for i, name in enumerate(names)},
    )


def choice_names(spec, questions) -> tuple:
    return spec.choice_names(max((len(q.candidates) for q in questions), default=0))


def label_counts(spec, questions) -> dict:
    labels = [q.label for q in questions]
    return {name: labels.count(i) for i, name in enumerate(choice_names(spec, questions))}


def path_summaries(spec, questions, path: str) -> tuple:
    """(acc summary, acc_norm summary or None) of one path ("official" or "independent"), recomputed
    from the scores (never from the recorded predictions)."""
    labels, names = [q.label for q in questions], choice_names(spec, questions)
    scores = [getattr(q, f"{path}_scores") for q in questions]
    acc = summarize([predict(s) for s in scores], labels, names)
    if "acc_norm" not in spec.metrics:
        return acc, None
    norm = summarize([predict_norm(s, q.choice_lengths) for s, q in zip(scores, questions)], labels, names)
    return acc, norm
