"""The record schema, defined once: run.py writes these and audit.py reads them.

Public records (run.json, failure.json) carry ids, hashes, scores and settings,
never text or token ids of the data; private.json carries those.
"""

import dataclasses
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path

from . import atomic
from .errors import InputError

RECORD_SCHEMA_VERSION = 2  # 2: run.json gained `platform` (the numeric fingerprint); 1 is read and upgraded
RUN_FILE = "run.json"
FAILURE_FILE = "failure.json"
PRIVATE_FILE = "private.json"
ENVIRONMENT_FILE = "environment.json"
LM_EVAL_RESULTS_FILE = "lm_eval_results.json"
LM_EVAL_SAMPLES_FILE = "lm_eval_samples.public.jsonl"
LM_EVAL_PRIVATE_SAMPLES_FILE = "lm_eval_samples.jsonl"


@dataclass
class QuestionRecord:
    idx: int
    label: int
    logged_doc_id: int
    doc_hash: str
    prompt_hash: str
    context_length: int
    candidates: list
    candidate_token_ids: list
    official_scores: list
    independent_scores: list
    official_prediction: int
    independent_prediction: int
    official_logged_acc: float


@dataclass
class PathSummary:
    accuracy: float
    stderr: float
    correct: int
    rows: int
    predictions: dict  # candidate choice -> count


@dataclass
class ConfirmRow:
    idx: int
    row_hash: str


@dataclass
class SplitRecord:
    salt: str
    rule: str
    dev_ids: list  # hash order; the run scored all of them or, with --smoke, the first two
    scored_ids: list
    confirm: list  # ConfirmRow


@dataclass
class RunRecord:
    run_name: str
    mode: str  # "full" or "smoke"
    profile: str
    demo: bool
    notice: str
    lock_sha256: str
    lock_fully_hashed: bool
    resources: list  # manifest entries: path, role, size, sha256, source, locked_sha256
    evaluator: dict  # package, version, commit, task_yaml, task_yaml_sha256, files_verified
    settings: dict
    split: SplitRecord
    task_config: dict  # effective config and its differences from the official YAML
    versions: dict
    timings: dict
    peak_rss_bytes: int
    official: PathSummary
    independent: PathSummary
    labels: dict
    max_abs_diff: float
    identity_checks_passed: int
    lm_eval_reported: dict  # acc and acc_stderr as lm-eval reported them
    questions: list  # QuestionRecord
    platform: dict | None = None  # numeric.fingerprint(); None only in records upgraded from schema 1
    schema_version: int = RECORD_SCHEMA_VERSION
    kind: str = "sst2-audit/run"


@dataclass
class Mismatch:
    logged_position: int  # position in the checked list; -1 for a whole-set check
    claimed_id: object  # the doc_id / idx the record claims to be
    fields: list
    expected: dict
    logged: dict


@dataclass
class FailureRecord:
    run_name: str
    check: str
    message: str
    mismatches: list
    settings: dict = field(default_factory=dict)
    schema_version: int = RECORD_SCHEMA_VERSION
    kind: str = "sst2-audit/failure"


@dataclass
class PrivateQuestion:
    idx: int
    sentence: str
    context: str
    context_tokens: list
    candidate_token_ids: list


@dataclass
class PrivateRecord:
    run_name: str
    questions: list  # PrivateQuestion
    schema_version: int = RECORD_SCHEMA_VERSION
    kind: str = "sst2-audit/private"


def to_dict(record) -> dict:
    return dataclasses.asdict(record)


# List fields whose items are records themselves.
LIST_ITEMS = {
    ("RunRecord", "questions"): QuestionRecord,
    ("SplitRecord", "confirm"): ConfirmRow,
    ("FailureRecord", "mismatches"): Mismatch,
    ("PrivateRecord", "questions"): PrivateQuestion,
}


def _convert(kind, value, where):
    """Build nested dataclasses from plain JSON, checking field names exactly."""
    if not dataclasses.is_dataclass(kind):
        return value
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object, got {type(value).__name__}.")
    hints = typing.get_type_hints(kind)
    fields = dataclasses.fields(kind)
    missing = [f.name for f in fields if f.name not in value
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    extra = sorted(set(value) - {f.name for f in fields})
    if missing or extra:
        raise InputError(f"{where}: fields missing {missing}, unexpected {extra}.")
    built = {}
    for name, item in value.items():
        inner = LIST_ITEMS.get((kind.__name__, name))
        if inner is not None:
            if not isinstance(item, list):
                raise InputError(f"{where}.{name}: expected a list.")
            built[name] = [_convert(inner, entry, f"{where}.{name}[{i}]") for i, entry in enumerate(item)]
        else:
            built[name] = _convert(hints[name], item, f"{where}.{name}")
    return kind(**built)


def _upgrade_from_1(raw: dict) -> dict:
    """Schema 1 had no numeric platform; everything else is unchanged."""
    upgraded = dict(raw, schema_version=2)
    if raw.get("kind") == "sst2-audit/run":
        upgraded["platform"] = None
    return upgraded


UPGRADES = {1: _upgrade_from_1}  # schema_version -> function returning the next version's dict


def from_dict(kind, raw: dict, where: str):
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object.")
    expected_kind = next(f.default for f in dataclasses.fields(kind) if f.name == "kind")
    version = raw.get("schema_version")
    while type(version) is int and version in UPGRADES and raw.get("kind") == expected_kind:
        raw = UPGRADES[version](raw)
        version = raw.get("schema_version")
    if raw.get("kind") != expected_kind or raw.get("schema_version") != RECORD_SCHEMA_VERSION:
        raise InputError(
            f"{where}: expected kind {expected_kind!r} schema_version {RECORD_SCHEMA_VERSION}, "
            f"got {raw.get('kind')!r} {raw.get('schema_version')!r}."
        )
    return _convert(kind, raw, where)


def write(path: Path, record) -> None:
    atomic.write_json(path, to_dict(record))


def read(path: Path, kind):
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}).") from None
    return from_dict(kind, raw, str(path))
