"""Per-path summaries, computed the same way by the run and by the audit."""

from .protocol import CHOICES, accuracy, accuracy_stderr
from .records import PathSummary


def summarize(predictions: list, labels: list) -> PathSummary:
    correct = [1.0 if p == l else 0.0 for p, l in zip(predictions, labels)]
    return PathSummary(
        accuracy=accuracy(correct), stderr=accuracy_stderr(correct), correct=int(sum(correct)), rows=len(correct),
        predictions={name: predictions.count(i) for i, name in enumerate(CHOICES)},
    )
