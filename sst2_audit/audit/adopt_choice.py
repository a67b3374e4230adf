"""A multiple_choice task's adoption (audit/adopt_shape.py): every candidate's log-likelihood rescored and held
bit for bit (or to a claimed dtype's bound), the metrics re-aggregated from the rescored scores."""

from sst2_audit.audit import adopt, adopt_export, adopt_rescore, adopt_scores, adopted_level
from sst2_audit.audit.adopt_shape import AdoptShape
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats import lm_eval_output
from sst2_audit.protocol.metrics import METRICS, result_key
from sst2_audit.scoring.identity import longest_recorded
from sst2_audit.scoring.summaries import bootstrap_iters


class ChoiceAdoption(AdoptShape):
    rescored_as = "rescored bit for bit"

    def record_checks(self) -> tuple:
        return adopt.check_identity, adopt.check_arithmetic

    def longest(self, adoption) -> int:
        return longest_recorded(adoption.questions.values())

    def rescore(self, adoption, model, tokenizer, seed: int) -> LevelResult | None:
        return adopt_rescore.check_rescore(adoption, model, seed)

    def reviewer_pairs(self, adoption) -> tuple:
        reported = adoption.output.results["results"].get(adoption.spec.name, {})
        summary = adopt_rescore.rescored_summary(adoption.questions.values(), adoption.spec.metrics,
                                                 bootstrap_iters(adoption.settings))
        return "yours", [(metric, reported.get(result_key(METRICS[metric].reported_as)), summary.get(metric),
                          summary.get("rows", 0)) for metric in adoption.spec.metrics]

    def record(self, adoption, common: dict):
        return adopt_rescore.choice_record(adoption, common)

    def public_sample(self, sample) -> dict:
        return lm_eval_output.public_sample(sample)


    def take_claims(self, adoption, claimed) -> None:
        """A score is rescored from the row alone: nothing the record claims is taken again; a record whose rows
        hold tokens (or a rescore) has them held to the tokens derived here."""
        adoption.tokens_claimed = adopted_level.claims_tokens(claimed.questions, adopted_level.TOKEN_FIELDS,
                                                              "rescored")

    def check_adopted(self, claimed, here, bits: bool, settings: dict) -> LevelResult:
        return adopted_level.check(claimed, here, bits, bootstrap_iters(settings))

    def recorded_bound(self, adoption, claimed):
        return adopt_scores.recorded_bound(adoption, claimed.questions)

    def exported_rows(self, adoption) -> list:
        return adopt_export.choice_rows(adoption)
