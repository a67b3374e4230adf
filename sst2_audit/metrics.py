"""The metric registry and per-path summaries, computed the same way by the run and by the audit.

A metric is one entry of METRICS: how a question's prediction follows from its candidate scores.
Run, arithmetic, card, report and compare iterate the registry in the task's metric order; nothing
else names a metric.
"""

from dataclasses import dataclass
from typing import Callable

from .protocol import accuracy, accuracy_stderr, predict, predict_norm
from .records import PATHS, PathSummary


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


def summarize(predicted: list, labels: list, names: tuple) -> PathSummary:
    correct = [1.0 if p == l else 0.0 for p, l in zip(predicted, labels)]
    return PathSummary(
        accuracy=accuracy(correct), stderr=accuracy_stderr(correct), correct=int(sum(correct)), rows=len(correct),
        predictions={name: predicted.count(i) for i, name in enumerate(names)},
    )


def choice_names(spec, questions) -> tuple:
    return spec.choice_names(max((len(q.candidates) for q in questions), default=0))


def label_counts(spec, questions) -> dict:
    labels = [q.label for q in questions]
    return {name: labels.count(i) for i, name in enumerate(choice_names(spec, questions))}


def path_summaries(spec, questions, path: str) -> dict:
    """{metric: summary} of one path, recomputed from the scores (never from the recorded predictions)."""
    labels, names = [q.label for q in questions], choice_names(spec, questions)
    return {name: summarize([METRICS[name].prediction(q.scores[path], q) for q in questions], labels, names)
            for name in spec.metrics}


def summaries(spec, questions) -> dict:
    """{path: {metric: summary}} as run.json records them."""
    return {path: path_summaries(spec, questions, path) for path in PATHS}
