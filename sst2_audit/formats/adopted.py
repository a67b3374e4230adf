"""adopted.json: a plain lm-eval run adopted by `sst2-audit adopt` (audit/adopt.py), as public records.

The run was made by someone else's lm-eval, on their machine: its logged scores are claims, each row's own
rescore on the reviewer's machine is the measurement, and the class of every row (bit for bit, within the
bound, a flip, out of the bound, sealed) is what the adoption found. No data text, no token ids, no paths.
"""

from dataclasses import dataclass

from sst2_audit.formats.manifest import ManifestFile
from sst2_audit.formats.schema import convert, require_kind
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError

ADOPTED_FILE = "adopted.json"
# about 0.7-1 KB a row: a record of some 250,000 rows (a leaderboard MMLU-Pro run's, 11,037 rows, is 11 MB; the
# 16 MiB of a run's record would refuse what an adoption of a 20,000-row task writes)
MAX_ADOPTED_BYTES = 256 << 20
ADOPTED_KIND, ADOPTED_VERSION = "sst2-audit/adopted", 2
SEALED, NOT_DRAWN = "sealed", "not drawn"  # the classes of a row not rescored, whatever the task's shape
# each row's class, in the order a verdict names them
BITS, WITHIN, FLIP, OUT = "bit for bit", "within the bound", "prediction flip", "out of the bound"
ROW_CLASSES = (BITS, WITHIN, FLIP, OUT, SEALED, NOT_DRAWN)


@dataclass
class AdoptedQuestion:
    idx: int  # the logged doc_id, identity-checked against the reviewer's row at that position
    label: int
    doc_hash: str
    prompt_hash: str
    target_hash: str
    # tokens, by the reviewer's tokenizer; None where the adoption rescored nothing (lm-eval logs no tokens)
    context_length: int | None
    candidate_token_counts: list[int] | None
    candidate_tokens_sha256: str | None
    choice_lengths: list[int]
    shots: list[int]
    logged: list[float]  # the run's log-likelihoods (a claim)
    rescored: list[float] | None  # this machine's independent path; None: sealed or not drawn
    logged_metrics: dict[str, float | list[int]]  # lm-eval's per-document values, by our metric name
    row_class: str  # one of ROW_CLASSES
    max_abs_diff: float | None
    true_choices: list[int] | None = None  # mc2


@dataclass
class Bound:
    per_score: str  # the rule in words: "|logged - rescored| <= R * |rescored| + T * sqrt(tokens)"
    relative: float
    absolute: float
    basis: str  # why this bound: the reviewer's --bound, or derived from the claimed dtype
    per_token: float = 0.0  # nats per sqrt(continuation tokens): honest rounding of a sum of per-token terms
    # the drift of a difference of two candidates' scores (what a prediction needs): R * (|a| + |b|) + A + T *
    # sqrt(tokens); rounding moves a context's candidates largely together, so this is tighter than two bounds
    margin_relative: float = 0.0
    margin_absolute: float = 0.0
    margin_per_token: float = 0.0


@dataclass(kw_only=True)
class AdoptedCommon:
    """What adopted.json holds for a task of every shape; each shape's record adds its numbers and rows (this
    module's AdoptedRecord, adopted_generation.py, adopted_rolling.py; read by kind: adopted_read.py)."""
    run_name: str
    profile: str
    task: str
    demo: bool
    notice: str
    lock_sha256: str
    resources: list[ManifestFile]  # the reviewer's cache entries read
    source: dict[str, str]  # the adopted files' names and sha256, as given (lm-eval's own files)
    claims: dict  # what the run says of itself and nothing here can check (model, dtype, device, batch size)
    config_differences: dict  # the logged task config's differences from the pinned YAML (data fields only)
    bound: Bound  # a score's (a generate_until task's: a near tie's margin, in logits)
    rescore: dict  # {"rows": "all" or N, "seed": S, "processes": P}
    platform: dict  # this machine's numeric platform (numeric.fingerprint)
    bits_required: bool  # this machine runs the lock's numeric mode
    versions: dict[str, str | None]
    row_classes: dict[str, int]
    row_set: dict  # the logged rows against the rules a reviewer recognises (audit/row_set.py)
    timings: dict[str, float]


@dataclass(kw_only=True)
class AdoptedRecord(AdoptedCommon):
    """A multiple_choice task's."""
    metrics: list[str]
    reported: dict[str, float]  # the results file's numbers (metric, metric_stderr)
    rederived: dict[str, float]  # the same from the logged per-document values, by lm-eval's aggregation
    rescored_summary: dict[str, float | int]  # the metric from the rescored scores, and the rows rescored
    flips: dict  # per metric, the prediction flips' directions; the sign test's failures (audit/adopt_scores.py)
    questions: list[AdoptedQuestion]
    schema_version: int = ADOPTED_VERSION
    kind: str = ADOPTED_KIND


def write(path, record: AdoptedCommon) -> None:
    """adopted.json of any shape's record, written last and atomically."""
    atomic.write_json(path, record)


def read_record(record_type, raw, where: str, field: str, classes: tuple):
    """adopted.json of one shape's record type (its kind and schema_version are the type's defaults): the envelope,
    the typed fields, and each row's row_class (the rows in `field`) one of the shape's classes (exit 2 naming the
    row)."""
    kind, version = record_type.kind, record_type.schema_version
    refuse_old(raw, kind, version, where)
    record = convert(record_type, require_kind(raw, kind, version, where), where)
    for number, row in enumerate(getattr(record, field)):
        if row.row_class not in classes:
            raise InputError(f"{where}.{field}[{number}].row_class: expected one of {list(classes)}, got "
                             f"{row.row_class[:40]!r}.")
    return record


def refuse_old(raw, kind: str, version: int, where: str) -> None:
    """Schema 1 (before the row set, the flips' test and the fitted bound were recorded): adopt the run again."""
    if isinstance(raw, dict) and raw.get("kind") == kind and raw.get("schema_version") == 1 and version > 1:
        raise InputError(f"{where}: schema_version 1 of {kind!r}, written before sst2-audit recorded the row set and "
                         f"the flips' directions (schema {version}); adopt the lm-eval run again to audit it.")


def from_dict(raw, where: str) -> AdoptedRecord:
    return read_record(AdoptedRecord, raw, where, "questions", ROW_CLASSES)
