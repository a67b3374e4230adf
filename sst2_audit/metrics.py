"""The metric registry: a metric is one entry of METRICS, how a question's prediction follows from its
candidate scores. Run, arithmetic, card, report and compare iterate the registry in the task's metric
order (summaries.py turns predictions into accuracies); nothing else names a metric.
"""

from dataclasses import dataclass
from typing import Callable

from .protocol import predict, predict_norm


@dataclass(frozen=True)
class Metric:
    name: str
    what: str  # one line for pages: what the prediction is
    prediction: Callable  # (candidate scores, question record) -> predicted choice index
    compared: Callable  # (candidate scores, question record) -> the values whose argmax is the prediction


def _per_character(scores, question) -> list:
    return [score / float(length) for score, length in zip(scores, question.choice_lengths)]


METRICS = {
    "acc": Metric("acc", "argmax of the log-likelihoods (nats)", lambda scores, q: predict(scores),
                  lambda scores, q: list(scores)),
    "acc_norm": Metric("acc_norm", "argmax of log-likelihood / characters of the choice (nats per character)",
                       lambda scores, q: predict_norm(scores, q.choice_lengths), _per_character),
}


def predictions(metrics, scores: list, question) -> dict:
    """{metric: predicted choice} of one path's scores for one question."""
    return {name: METRICS[name].prediction(scores, question) for name in metrics}
