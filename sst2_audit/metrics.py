"""The metric registry: a metric is one entry of METRICS, how a question's value follows from its candidate
scores. Run, arithmetic, card, report and compare iterate the registry in the task's metric order
(summaries.py turns per-question values into the reported mean); nothing else names a metric.

Two kinds: an argmax metric (acc, acc_norm) predicts a choice, and its per-question value is 1.0 when that
is the gold choice; a value metric (mc2) gives each question a number of its own, re-derived here from the
scores with our own code, never with the task's process_results hook that lm-eval runs.
"""

from dataclasses import dataclass
from typing import Callable

from .protocol import mc2_mass, predict, predict_norm

# A value metric's re-derivation sums in another order than lm-eval's numpy (pairwise sums, SIMD exp), so
# it agrees with lm-eval's logged value to rounding, not bit for bit: this is the largest |difference|
# accepted. The candidate scores themselves stay bit for bit.
VALUE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Metric:
    name: str  # as run.json names it
    reported_as: str  # lm-eval's key for it in samples and results
    what: str  # one line for pages: what the per-question value is
    prediction: Callable | None  # (candidate scores, question record) -> predicted choice; None: a value metric
    compared: Callable | None  # (candidate scores, question record) -> the values whose argmax is the prediction
    mass: Callable | None = None  # a value metric: (candidate scores, question record) -> its per-question value

    @property
    def argmax(self) -> bool:
        return self.prediction is not None

    def value(self, scores, question) -> float:
        """The per-question value lm-eval logs: 1.0 / 0.0 for an argmax metric, else the metric's own."""
        if self.argmax:
            return float(self.prediction(scores, question) == question.label)
        return self.mass(scores, question)

    def agrees(self, ours: float, logged: float) -> bool:
        """Our per-question value against lm-eval's: exact for an argmax metric, to rounding for a value metric."""
        return ours == logged if self.argmax else abs(ours - logged) <= VALUE_TOLERANCE


def _per_character(scores, question) -> list:
    return [score / float(length) for score, length in zip(scores, question.choice_lengths)]


METRICS = {
    "acc": Metric("acc", "acc", "argmax of the log-likelihoods (nats)", lambda scores, q: predict(scores),
                  lambda scores, q: list(scores)),
    "acc_norm": Metric("acc_norm", "acc_norm",
                       "argmax of log-likelihood / characters of the choice (nats per character)",
                       lambda scores, q: predict_norm(scores, q.choice_lengths), _per_character),
    # truthfulqa's process_results_mc2 (lm-eval logs and reports it as `acc`): re-derived, SOURCE_MAP step 62
    "mc2": Metric("mc2", "acc", "probability mass on the true choices: exp(score) normalised over all choices",
                  None, None, lambda scores, q: mc2_mass(scores, q.true_choices)),
}


def predictions(metrics, scores: list, question) -> dict:
    """{metric: predicted choice} of one path's scores for one question (argmax metrics only)."""
    return {name: METRICS[name].prediction(scores, question) for name in metrics if METRICS[name].argmax}


def argmax_metrics(metrics) -> list:
    return [name for name in metrics if METRICS[name].argmax]
