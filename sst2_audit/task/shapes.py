"""The task shapes (lm-eval's `output_type`): the one registry that says which shape a task is. Everything that
differs by shape below the audit asks the shape (its requests, the filters lm-eval logs a row under, what the
model does), never which output_type it has; the adoption's levels per shape are in audit/adopt_shapes.py,
keyed by the shape's name. A new shape is one class here and one module in audit/ (docs/design.md)."""

from abc import ABC, abstractmethod

from sst2_audit.formats.lm_eval_rolling import read_rolling_sample
from sst2_audit.protocol.generation import FILTERS
from sst2_audit.protocol.perplexity import ROLLING_METRICS
from sst2_audit.util.errors import InputError


class TaskShape(ABC):
    """What a task of this shape asks of lm-eval and of the independent path, as data."""

    name: str  # lm-eval's output_type
    decodes: bool  # the model generates tokens: a context and every token the decode may add must fit
    bound_unit: str  # what a claimed dtype's bound is over: "NATS" (scores) or "LOGITS" (near ties of a decode)
    rolls: bool = False  # scored in rolling windows of max_length tokens: no input is ever too long
    runs: bool = False  # `run` scores it (its stages in run/job.py); else a plain lm_eval run of it is adopted
    protocol_words: str  # what the audit re-derives for a task of this shape (`run --list-tasks`)

    @abstractmethod
    def requests(self, spec, doc: dict, prefix: str) -> list:
        """(context, continuation) per request, as construct_requests builds them (SOURCE_MAP step 61)."""

    @abstractmethod
    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        """The requests around a whole rendered prompt (a chat template's): construct_requests given the context."""

    @abstractmethod
    def logged_filters(self, spec) -> list:
        """The filter names lm-eval logs each row under, sorted."""

    @abstractmethod
    def samples_args(self, spec) -> dict:
        """How the samples reader reads a row of this shape (formats/lm_eval_output.py::read_plain_files's keywords):
        {} reads multiple_choice rows."""

    def renders(self, spec, doc: dict) -> None:
        """Everything a row of this shape needs rendered, rendered (`--pin` checks every row before a model load)."""
        spec.gold(doc, spec.choices(doc))
        spec.requests(doc, spec.prefix(doc))


class MultipleChoice(TaskShape):
    name, decodes, bound_unit, runs = "multiple_choice", False, "NATS", True
    protocol_words = "acc, acc_norm, f1, mcc, a re-derived mc2"

    def requests(self, spec, doc: dict, prefix: str) -> list:
        return spec.choice_requests(doc, prefix)

    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        return [(context, target_delimiter + choice) for choice in spec.choices(doc)]

    def logged_filters(self, spec) -> list:
        return ["none"]  # a multiple_choice task's only filter

    def samples_args(self, spec) -> dict:
        return {}


class GenerateUntil(TaskShape):
    name, decodes, bound_unit = "generate_until", True, "LOGITS"
    protocol_words = "greedy decoding, the filters " + ", ".join(FILTERS) + ", exact_match"

    def requests(self, spec, doc: dict, prefix: str) -> list:
        return [(prefix + spec.text(doc), "")]  # lm-eval pairs the context with the generation_kwargs

    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        return [(context, "")]

    def logged_filters(self, spec) -> list:
        return sorted(spec.generation.filter_names)

    def samples_args(self, spec) -> dict:
        return {"filters": list(spec.generation.filter_names)}

    def renders(self, spec, doc: dict) -> None:
        spec.reference(doc), spec.text(doc), spec.prefix(doc)


class LoglikelihoodRolling(TaskShape):
    """lm-eval's perplexity tasks: one request per document, the whole of doc_to_target's text, scored in rolling
    windows (scoring/rolling.py); the metrics are ratios of summed log-likelihoods to words or bytes."""
    name, decodes, bound_unit, rolls = "loglikelihood_rolling", False, "NATS", True
    protocol_words = "rolling windows of max_length tokens, " + ", ".join(ROLLING_METRICS)

    def requests(self, spec, doc: dict, prefix: str) -> list:
        return [(spec.rolling_text(doc), "")]  # lm-eval's construct_requests: (doc_to_target,), no context

    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        raise InputError(f"task {spec.name}: a loglikelihood_rolling task has no prompt a chat template renders.")

    def logged_filters(self, spec) -> list:
        return ["none"]

    def samples_args(self, spec) -> dict:
        return {"reader": read_rolling_sample, "stderr_hint": str}

    def renders(self, spec, doc: dict) -> None:
        spec.rolling_text(doc), spec.rolling_counts(doc)


SHAPES: dict[str, TaskShape] = {shape.name: shape for shape in (MultipleChoice(), GenerateUntil(),
                                                                LoglikelihoodRolling())}


def shape_of(output_type) -> TaskShape:
    """The shape of a task the spec reader accepted (task/support.py refuses the other output types first): a
    config that leaves output_type out is read as multiple_choice, as the spec reader always has."""
    return SHAPES[output_type if output_type in ("generate_until", "loglikelihood_rolling") else "multiple_choice"]
