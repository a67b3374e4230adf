"""adopted.json of a loglikelihood_rolling task (audit/adopt_rolling.py): each document's logged log-likelihood
against the reviewer's rescore of its rolling windows, as public records. No text and no token ids: each document's
hashes, its counts and the sha256 of its tokens."""

from dataclasses import dataclass

from sst2_audit.formats.adopted import AdoptedCommon, BITS, NOT_DRAWN, OUT, read_record, SEALED, WITHIN

ROLLING_KIND, ROLLING_VERSION = "sst2-audit/adopted-rolling", 1
ROLLING_CLASSES = (BITS, WITHIN, OUT, SEALED, NOT_DRAWN)


@dataclass
class RolledRow:
    idx: int  # the logged doc_id, identity-checked against the reviewer's row at that position
    doc_hash: str
    prompt_hash: str  # lm-eval's: the sha256 of the one request's text (its target_hash is the same)
    target_hash: str
    counts: dict[str, int]  # per metric: the words or bytes of the reviewer's row
    # None, these three, where the adoption rescored nothing (lm-eval logs no tokens)
    tokens: int | None  # the tokens the windows predict, by the reviewer's tokenizer
    tokens_sha256: str | None  # util/hashing.py::tokens_hash of [their ids]
    windows: int | None  # rolling windows of the profile's max_length
    logged: float  # the run's summed log-likelihood (a claim)
    rescored: float | None = None  # this machine's, summed over the windows; None: sealed or not drawn
    row_class: str = NOT_DRAWN  # one of ROLLING_CLASSES
    max_abs_diff: float | None = None


@dataclass(kw_only=True)
class AdoptedRollingRecord(AdoptedCommon):
    """A loglikelihood_rolling task's (its bound over each document's summed log-likelihood, in nats)."""
    metrics: list[str]
    reported: dict[str, float | str]  # "<metric>" and "<metric>_stderr" ("N/A") as the results file says
    rederived: dict[str, float | str]  # the same from the logged per-document values
    rescored_summary: dict[str, float | int]  # each metric over the rescored documents, and the rows
    rows: list[RolledRow]
    schema_version: int = ROLLING_VERSION
    kind: str = ROLLING_KIND


def from_dict(raw, where: str) -> AdoptedRollingRecord:
    return read_record(AdoptedRollingRecord, raw, where, "rows", ROLLING_CLASSES)
