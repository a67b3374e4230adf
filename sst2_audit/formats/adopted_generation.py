"""adopted.json of a generate_until task: a plain lm-eval run's generations re-decoded by the independent greedy
decoder, its filters and exact_match re-derived (audit/adopt_generation.py), as public records.

No text of a generation, an answer or the data: each is its sha256 (a generation can quote the data). The row
classes say what the re-decode found: the same text token for token, a near-tie drift (the decode that follows the
logged text takes another token than its maximum only where that token's logit is within the bound of it: another
machine's rounding may pick it), or a generation that differs (no token within the bound keeps to the logged text).
"""

from dataclasses import dataclass

from sst2_audit.formats.adopted import AdoptedCommon, NOT_DRAWN, read_record, SEALED
from sst2_audit.util.errors import InputError

GENERATION_KIND, GENERATION_VERSION = "sst2-audit/adopted-generation", 2
SAME, DRIFT, DIFFERS = "token for token", "near-tie drift", "differs"
GENERATION_CLASSES = (SAME, DRIFT, DIFFERS, SEALED, NOT_DRAWN)


@dataclass
class GeneratedRow:
    idx: int  # the logged doc_id, identity-checked against the reviewer's row at that position
    doc_hash: str
    prompt_hash: str
    target_hash: str
    context_length: int | None  # tokens, by the reviewer's tokenizer; None where the adoption re-decoded nothing
    shots: list[int]
    response_sha256: str  # the logged generation's (a claim)
    filtered_sha256: dict[str, str]  # per filter: the logged answer's
    logged_exact_match: dict[str, float]  # per filter, as logged
    row_class: str  # one of GENERATION_CLASSES
    rescored_response_sha256: str | None = None  # the independent decoder's generation, cut as lm-eval cuts it
    generated_tokens_sha256: str | None = None  # sha256 of its token ids, comma-joined
    generated_tokens: int | None = None
    stopped: str | None = None  # "eos", "stop string <i>", "max_gen_toks"
    closest_step: int | None = None  # the step with the smallest margin to the runner-up
    closest_margin: float | None = None  # in logits (float32)
    ties: list[dict] | None = None  # {"step", "gap", "logit", "rank"}: near ties the logged generation took the
    # other way, rank the token's among those within the bound, best first (a record before rank: none)
    left_at: dict | None = None  # {"step", "gap": None, "logit"}: where no token within the bound keeps to it
    rescored_exact_match: dict[str, float] | None = None  # per filter, from the re-decoded generation
    # a row that took a near tie is decoded greedily too (no tie taken): the reviewer's own answer
    greedy_response_sha256: str | None = None
    greedy_exact_match: dict[str, float] | None = None  # per filter


@dataclass(kw_only=True)
class AdoptedGenerationRecord(AdoptedCommon):
    """A generate_until task's (its bound: the margin, in logits, under which a differing step is a near tie)."""
    filters: list[str]
    generation_kwargs: dict  # the task's, as every logged request must carry them
    reported: dict[str, float]  # "exact_match,<filter>" and its stderr, as the results file says
    rederived: dict[str, float]  # the same from the logged per-document values
    rescored_summary: dict[str, float | int]  # exact_match per filter over the re-decoded rows, and the rows
    greedy_summary: dict[str, float | int]  # exact_match per filter of the reviewer's pure greedy decode
    answer_changes: dict  # per filter, greedy answers against the logged ones: directions and the sign test
    rows: list[GeneratedRow]
    schema_version: int = GENERATION_VERSION
    kind: str = GENERATION_KIND


def from_dict(raw, where: str) -> AdoptedGenerationRecord:
    record = read_record(AdoptedGenerationRecord, raw, where, "rows", GENERATION_CLASSES)
    for number, row in enumerate(record.rows):
        for tie in row.ties or ():
            if not _tie(tie):
                raise InputError(f"{where}.rows[{number}].ties: expected {{\"step\": a step >= 0, \"gap\" and "
                                 f"\"logit\": numbers, \"rank\": 1 or more (optional)}} each, got {str(tie)[:80]!r}.")
    return record


def _tie(tie: dict) -> bool:
    """A recorded near tie's shape (the re-audit of our public copy takes its step and rank)."""
    def whole(value, least):
        return type(value) is int and least <= value <= 1 << 31

    return (set(tie) in ({"step", "gap", "logit"}, {"step", "gap", "logit", "rank"}) and whole(tie["step"], 0)
            and all(type(tie[k]) in (int, float) for k in ("gap", "logit")) and whole(tie.get("rank", 1), 1))
