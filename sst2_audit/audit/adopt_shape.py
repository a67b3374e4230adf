"""The seam of an adoption per task shape: what the levels, the rescore, the record and the public copy do
differently for a multiple_choice and a generate_until task. One implementation per shape
(audit/adopt_choice.py, audit/adopt_decode.py), picked once per task by audit/adopt_shapes.py and carried by the
Adoption; nothing else asks which shape a task is (tests/project/test_layers.py greps for it)."""

import json
from abc import ABC, abstractmethod
from collections.abc import Callable

from sst2_audit.audit import adopt_export
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats import lm_eval_output, records

UNTOKENIZED = ("prompts not tokenized: lm-eval logs no tokens, and only a rescore reads them (each input's length "
               "against max_length and the context/continuation boundary are checked where rows are rescored)")


class AdoptShape(ABC):
    rescored_as: str  # how a PASS says every row was checked
    exports = True  # False: no Every Eval Ever export of this shape yet (--export-eee refused before any work)
    writer: str | None = None  # whose files the run is, where not lm-eval's (adopted.json's source.writer)

    @abstractmethod
    def record_checks(self) -> tuple[Callable, Callable]:
        """(identity level(adoption, tokenizer), arithmetic level(adoption)) before any model work."""

    def tokenizes(self, adoption) -> bool:
        """Whether the identity level derives the prompts' tokens (else it is handed no tokenizer): lm-eval logs
        none, so they are derived for a rescore, or to check a record that holds them (take_claims)."""
        return bool(adoption.rescore) or adoption.tokens_claimed

    @abstractmethod
    def longest(self, adoption) -> int:
        """The most tokens one request of the rescore holds (the memory statement's)."""

    @abstractmethod
    def rescore(self, adoption, model, tokenizer, seed: int) -> LevelResult | None:
        """The rescore level at rank 0; None on the other ranks (they only score their share)."""

    @abstractmethod
    def reviewer_pairs(self, adoption) -> tuple:
        """(whose, [(metric, reported, the reviewer's number or None, rows)]) per reported number."""

    @abstractmethod
    def record(self, adoption, common: dict):
        """The adopted record (formats/adopted.py, adopted_generation.py, adopted_rolling.py: each an AdoptedCommon)
        from the fields every shape shares."""

    @abstractmethod
    def public_sample(self, sample) -> dict:
        """A logged sample as the public copy keeps it: no text of the data."""

    def public_copy(self, adoption) -> dict[str, bytes]:
        """The files an adopted folder keeps of the run, by name: lm-eval's results file (paths scrubbed) and each
        sample as public_sample keeps it (a lighteval run's own copy: audit/adopt_lighteval.py)."""
        results = json.dumps(lm_eval_output.public_results(adoption.output.results), indent=2, ensure_ascii=False)
        samples = "".join(json.dumps(self.public_sample(sample), ensure_ascii=False) + "\n"
                          for sample in adoption.output.samples)
        return {records.LM_EVAL_RESULTS_FILE: (results + "\n").encode(), records.LM_EVAL_SAMPLES_FILE: samples.encode()}

    @abstractmethod
    def take_claims(self, adoption, claimed) -> None:
        """What an adopted record claims that the audit of it must take again (a decode's near ties)."""

    @abstractmethod
    def check_adopted(self, claimed, here, bits: bool, settings: dict) -> LevelResult:
        """adopted.json against the record the levels re-derived here."""

    def recorded_bound(self, adoption, claimed):
        """The bound the adoption that wrote `claimed` derived (this shape's rescore does not take a claim back)."""
        return adoption.bound

    def claims_level(self) -> Callable | None:
        """The claims level(adoption) of the run's writer; None: lm-eval's (audit/adopt.py::check_claims)."""
        return None

    def as_logged(self, scores: list) -> list:
        """A rescore's scores as the run's writer logs them (lighteval 0.11+ rounds), compared with the logged."""
        return scores

    def exported_source(self, adoption, pairs: list) -> tuple[str, str, str, dict]:
        """(library, its version, when the run was made, {evaluation_result_id: numbers}) for the export's aggregate
        record (pairs: reviewer_pairs'); lm-eval's by default."""
        return adopt_export.lm_eval_source(adoption, pairs)

    @abstractmethod
    def exported_rows(self, adoption) -> list:
        """The rows as Every Eval Ever instances need them (formats/every_eval_ever.py::ExportedRow), from lm-eval's
        own files."""
