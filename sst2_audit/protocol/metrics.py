"""The metric registry: a metric is one entry of METRICS, how a question's logged value and the task's
reported number follow from the candidate scores. Run, arithmetic, card, report and compare iterate the
registry in the task's metric order (summaries.py aggregates); nothing else names a metric.

Three kinds, as lm-eval computes them:
- "accuracy" (acc, acc_norm): a predicted choice; the logged value is 1.0 when it is the gold choice; the
  reported number is their mean;
- "value" (mc2): a number per question, re-derived here from the scores with our own code (never with the
  task's process_results hook that lm-eval runs); the reported number is their mean;
- "corpus" (f1, mcc): a predicted choice; the logged value is the pair [gold, prediction]; the reported
  number is a statistic of all pairs, its stderr a seeded bootstrap (corpus.py).
"""

from dataclasses import dataclass
from typing import Callable, Literal

from sst2_audit.protocol import corpus
from sst2_audit.protocol.rules import accuracy, accuracy_stderr, mc2_mass, predict, predict_norm
from sst2_audit.util.errors import InternalError

# A value metric is re-derived in lm-eval's order of operations with the exp lm-eval's hook calls (numpy's),
# so on one machine it equals lm-eval's logged value bit for bit. numpy's float64 exp differs between CPUs
# with and without AVX-512F (numeric.numpy_exp): a record from the other kind of CPU is accepted to this
# largest |difference|, and the audit says so. The candidate scores themselves stay bit for bit.
VALUE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Metric:
    name: str  # as run.json names it
    reported_as: str  # lm-eval's key for it in samples and results
    kind: Literal["accuracy", "value", "corpus"]  # (above): read through the three properties below
    what: str  # one line for pages: what decides a question
    prediction: Callable | None = None  # (candidate scores, question record) -> predicted choice
    compared: Callable | None = None  # (candidate scores, question record) -> the values whose argmax is the prediction
    mass: Callable | None = None  # a value metric: (candidate scores, question record) -> its value
    bounds: tuple = (0.0, 1.0)  # the range of the reported number (an interval is clipped to it)
    statistic: Callable | None = None  # a corpus metric: (golds, predictions) -> the reported number
    choices_needed: int | None = None  # a metric defined for this many choices only (binary f1: 2)
    needs_nonempty_choices: bool = False  # it divides by each choice's length in characters (acc_norm)

    @property
    def counts_correct(self) -> bool:
        """An accuracy: a number of right answers (a Wilson interval, a paired accuracy test, the card's
        "accuracy")."""
        return self.kind == "accuracy"

    @property
    def per_question_value(self) -> bool:
        """Each question's own number, re-derived from its scores (mc2): the record keeps each question's true
        choices, and another CPU's numpy exp agrees to VALUE_TOLERANCE."""
        return self.kind == "value"

    @property
    def corpus_statistic(self) -> bool:
        """A statistic of all [gold, prediction] pairs (f1, mcc): a bootstrap stderr, rows in lm-eval's order."""
        return self.kind == "corpus"

    @property
    def argmax(self) -> bool:
        """It predicts a choice: run.json records the prediction per path."""
        return self.prediction is not None

    def predict(self, scores, question) -> int:
        """The predicted choice (a metric that predicts one: `argmax`)."""
        return _given(self.prediction, self.name, "predicts no choice")(scores, question)

    def compare(self, scores, question) -> list:
        """The values whose argmax is the prediction (log-likelihoods, or per character for acc_norm)."""
        return _given(self.compared, self.name, "compares no values")(scores, question)

    def value(self, scores, question):
        """The per-question value lm-eval logs: 1.0 / 0.0, a value metric's own, or [gold, prediction]."""
        if self.kind == "accuracy":
            return float(self.predict(scores, question) == question.label)
        if self.kind == "corpus":
            return [question.label, self.predict(scores, question)]
        return _given(self.mass, self.name, "has no per-question value")(scores, question)

    def agrees(self, ours, logged, exact: bool = True) -> bool:
        """Our per-question value against lm-eval's: exact; a value metric from a machine whose numpy exp
        differs from this one's (exact=False) to rounding."""
        if self.kind == "value" and not exact:
            return abs(ours - logged) <= VALUE_TOLERANCE
        return ours == logged

    def aggregate(self, values: list, bootstrap_iters: int) -> tuple[float, float]:
        """(reported number, its stderr) from the per-question values, in the order given."""
        if self.kind == "corpus":
            pairs, statistic = [tuple(v) for v in values], _given(self.statistic, self.name, "has no statistic")
            return (statistic([g for g, _ in pairs], [p for _, p in pairs]),
                    corpus.bootstrap_stderr(self.name, pairs, bootstrap_iters))
        return accuracy(values), accuracy_stderr(values)


def _given(function: Callable | None, name: str, words: str) -> Callable:
    """A registry entry's function, or our bug named (a caller asked a metric for what its kind does not have)."""
    if function is None:
        raise InternalError(f"metric {name} {words}")
    return function


def _per_character(scores, question) -> list:
    return [score / float(length) for score, length in zip(scores, question.choice_lengths)]


def _argmax(scores, question) -> int:
    return predict(scores)


METRICS = {
    "acc": Metric("acc", "acc", "accuracy", "argmax of the log-likelihoods (nats)", _argmax,
                  lambda scores, q: list(scores)),
    "acc_norm": Metric("acc_norm", "acc_norm", "accuracy",
                       "argmax of log-likelihood / characters of the choice (nats per character)",
                       lambda scores, q: predict_norm(scores, q.choice_lengths), _per_character,
                       needs_nonempty_choices=True),
    # truthfulqa's process_results_mc2 (lm-eval logs and reports it as `acc`): re-derived, SOURCE_MAP step 63
    "mc2": Metric("mc2", "acc", "value", "probability mass on the true choices: exp(score) normalised over all choices",
                  mass=lambda scores, q: mc2_mass(scores, q.true_choices)),
    # sklearn's binary f1 of class 1 and matthews_corrcoef over every (gold, prediction), SOURCE_MAP steps 65-67
    "f1": Metric("f1", "f1", "corpus", "argmax of the log-likelihoods; f1 of class 1 over the set", _argmax,
                 lambda scores, q: list(scores), statistic=corpus.f1_binary, choices_needed=2),
    "mcc": Metric("mcc", "mcc", "corpus", "argmax of the log-likelihoods; Matthews correlation over the set", _argmax,
                  lambda scores, q: list(scores), bounds=(-1.0, 1.0), statistic=corpus.mcc),
}


def predictions(metrics, scores: list, question) -> dict:
    """{metric: predicted choice} of one path's scores for one question (the metrics that predict one)."""
    return {name: METRICS[name].predict(scores, question) for name in metrics if METRICS[name].argmax}


def choice_count_needed(metrics) -> tuple | None:
    """(metric, the number of choices it is defined for) of the first metric that needs a fixed count, else None."""
    return next(((name, METRICS[name].choices_needed) for name in metrics if METRICS[name].choices_needed), None)


def needs_nonempty_choices(metrics) -> bool:
    """Whether a metric divides by each choice's length (an empty choice is then bad input, as in lm-eval)."""
    return any(METRICS[name].needs_nonempty_choices for name in metrics)


def argmax_metrics(metrics) -> list:
    return [name for name in metrics if METRICS[name].argmax]


def yaml_metrics() -> list:
    """The metric_list names a task YAML may use (mc2 comes only with truthfulqa's process_results)."""
    return [name for name, metric in METRICS.items() if metric.kind != "value"]


def result_key(reported_as: str, filter_name: str = "none", stderr: bool = False) -> str:
    """lm-eval's key of a reported number in a results file's task or group: "<metric>[_stderr],<filter>" (the
    one place it is spelled; a multiple_choice task's filter is "none")."""
    return f"{reported_as}{'_stderr' if stderr else ''},{filter_name}"
