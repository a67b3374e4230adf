"""A generate_until task's adoption (audit/adopt_shape.py): every chosen row re-decoded token for token, the
logged generation followed through near ties within the bound, exact_match re-derived per filter, and the
reviewer's own number from a pure greedy decode."""

from sst2_audit.audit import adopt_export, adopt_generation, adopt_rescore, adopted_level
from sst2_audit.audit.adopt_shape import AdoptShape
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats import lm_eval_output
from sst2_audit.protocol.generation import EXACT_MATCH
from sst2_audit.protocol.metrics import result_key


class DecodeAdoption(AdoptShape):
    rescored_as = "re-decoded token for token"

    def record_checks(self) -> tuple:
        return adopt_generation.check_identity, adopt_generation.check_arithmetic

    def longest(self, adoption) -> int:
        return max(map(len, adoption.contexts.values()), default=0) + adoption.spec.generation.max_gen_toks

    def rescore(self, adoption, model, tokenizer, seed: int) -> LevelResult | None:
        return adopt_rescore.check_generation_rescore(adoption, model, tokenizer, seed)

    def reviewer_pairs(self, adoption) -> tuple:
        reported = adoption.output.results["results"].get(adoption.spec.name, {})
        filters = adoption.spec.generation.filter_names
        mine = adopt_generation.exact_match_summary(adoption.questions.values(), filters, "greedy_exact_match")
        return "your greedy decode", [(result_key(EXACT_MATCH, name), reported.get(result_key(EXACT_MATCH, name)),
                                       mine.get(result_key(EXACT_MATCH, name)), mine["rows"]) for name in filters]

    def record(self, adoption, common: dict):
        return adopt_rescore.generation_record(adoption, common)

    def public_sample(self, sample) -> dict:
        return lm_eval_output.public_generated_sample(sample)


    def take_claims(self, adoption, claimed) -> None:
        # the near ties the record says were taken: a claim each, re-decoded and held to the hash
        adoption.recorded_ties = {row.idx: [t for t in row.ties if "rank" in t] for row in claimed.rows if row.ties}
        adoption.tokens_claimed = adopted_level.claims_tokens(claimed.rows, adopted_level.GENERATED_TOKEN_FIELDS,
                                                              "rescored_response_sha256")

    def check_adopted(self, claimed, here, bits: bool, settings: dict) -> LevelResult:
        return adopted_level.check_generation(claimed, here, bits)

    def exported_rows(self, adoption) -> list:
        return adopt_export.generated_rows(adoption)
