"""The task shapes (lm-eval's `output_type`): the one registry that says which shape a task is. Everything that
differs by shape below the audit asks the shape (its requests, the filters lm-eval logs a row under, what the
model does), never which output_type it has; the adoption's levels per shape are in audit/adopt_shapes.py,
keyed by the shape's name. A new shape is one class here and one module in audit/ (docs/design.md)."""

from abc import ABC, abstractmethod

from sst2_audit.protocol.generation import FILTERS


class TaskShape(ABC):
    """What a task of this shape asks of lm-eval and of the independent path, as data."""

    name: str  # lm-eval's output_type
    decodes: bool  # the model generates tokens: a context and every token the decode may add must fit
    bound_unit: str  # what a claimed dtype's bound is over: "NATS" (scores) or "LOGITS" (near ties of a decode)
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
    def sample_filters(self, spec) -> list | None:
        """The filters the samples reader expects (formats/lm_eval_output.py): None reads multiple_choice rows."""


class MultipleChoice(TaskShape):
    name, decodes, bound_unit = "multiple_choice", False, "NATS"
    protocol_words = "acc, acc_norm, f1, mcc, a re-derived mc2"

    def requests(self, spec, doc: dict, prefix: str) -> list:
        return spec.choice_requests(doc, prefix)

    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        return [(context, target_delimiter + choice) for choice in spec.choices(doc)]

    def logged_filters(self, spec) -> list:
        return ["none"]  # a multiple_choice task's only filter

    def sample_filters(self, spec) -> list | None:
        return None


class GenerateUntil(TaskShape):
    name, decodes, bound_unit = "generate_until", True, "LOGITS"
    protocol_words = "greedy decoding, the filters " + ", ".join(FILTERS) + ", exact_match"

    def requests(self, spec, doc: dict, prefix: str) -> list:
        return [(prefix + spec.text(doc), "")]  # lm-eval pairs the context with the generation_kwargs

    def context_requests(self, spec, doc: dict, context: str, target_delimiter: str) -> list:
        return [(context, "")]

    def logged_filters(self, spec) -> list:
        return sorted(spec.generation.filter_names)

    def sample_filters(self, spec) -> list | None:
        return list(spec.generation.filter_names)


SHAPES: dict[str, TaskShape] = {shape.name: shape for shape in (MultipleChoice(), GenerateUntil())}


def shape_of(output_type) -> TaskShape:
    """The shape of a task the spec reader accepted (task/support.py refuses the other output types first): a
    config that leaves output_type out is read as multiple_choice, as the spec reader always has."""
    return SHAPES["generate_until" if output_type == "generate_until" else "multiple_choice"]
