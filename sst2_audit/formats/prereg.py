"""preregistration.json and confirmation.json: their schema, read by the one strict reader.

A pre-registration is public and its sha256 (of the file's bytes) is its identity: it names the lock, the
dev runs it rests on (each by its run.json's sha256), the metric and the decision rule. A confirmation
record cites it and each confirmation run (by sha256) and states the rule's outcome. Each kind has its own
version, starting at 1.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.schema import convert, require_kind
from sst2_audit.util import atomic
from sst2_audit.util.hashing import canonical_json

PREREG_FILE = "preregistration.json"
CONFIRMATION_FILE = "confirmation.json"
CONFIRMATION_CARD = "CONFIRMATION.md"
DEV_FOLDER, CONFIRM_FOLDER = "dev", "confirm"  # inside a confirmation folder: <folder>/<profile>/ run folders
# What no audit can know, said in every confirmation's verdict and card.
CANNOT_KNOW = ("not knowable from these records: whether other confirmations of this or another "
               "pre-registration were run elsewhere (the once-only ticket lives in the submitter's cache)")


@dataclass
class DecisionRuleRecord:
    kind: str  # protocol.decision.RULES
    metric: str
    profiles: list[str]  # A, then B
    threshold: float | None
    statement: str  # the rule in words, regenerated from the fields by every reader


@dataclass
class DevRun:
    profile: str
    run_name: str
    run_sha256: str  # of its run.json
    path: str  # where it was, relative to the pre-registration's folder (a hint; the sha256 decides)
    mode: str
    rows: int
    value: float  # the metric's value on the dev rows (official path)


@dataclass
class Preregistration:
    lock_sha256: str
    evaluator: str  # "lm-eval <version>" of the lock
    confirm_rows: int  # the lock's: what a confirmation run will score, per profile
    rule: DecisionRuleRecord
    dev_runs: list[DevRun]
    dev_outcome: dict  # the rule's outcome on the dev runs (protocol.decision.outcome), for the reader
    schema_version: int = 1
    kind: str = "sst2-audit/preregistration"


@dataclass
class ConfirmationRun:
    profile: str
    run: str  # its folder inside the confirmation folder: confirm/<profile>
    run_sha256: str
    rows: int
    value_official: float
    value_independent: float


@dataclass
class ConfirmationRecord:
    run_name: str
    preregistration_sha256: str
    lock_sha256: str
    statement: str
    runs: list[ConfirmationRun]  # in the rule's profile order
    outcome: dict  # protocol.decision.outcome on the confirmation runs
    outcome_line: str
    cannot_know: str
    # --reconfirm: profile -> the confirmations of its sealed rows this cache recorded before (the submitter's cache
    # says so: a claim no audit can check; absent or empty when the sealed rows were spent here for the first time)
    prior_confirmations: dict[str, int] = dataclasses.field(default_factory=dict)
    schema_version: int = 1
    kind: str = "sst2-audit/confirmation"


def parse_versioned(data: bytes, where: str, kind):
    """A record of a kind that began at version 1 and has had no other (pre-registration, confirmation, study)."""
    raw = strict_json.loads(data, where)
    expected = next(f.default for f in dataclasses.fields(kind) if f.name == "kind")
    return convert(kind, require_kind(raw, str(expected), 1, where), where)


def read_versioned(path: Path, kind):
    return parse_versioned(strict_json.read_bytes(Path(path)), str(path), kind)


def read_prereg(path: Path) -> Preregistration:
    return read_versioned(path, Preregistration)


def read_confirmation(path: Path) -> ConfirmationRecord:
    return read_versioned(path, ConfirmationRecord)


def write(path: Path, record) -> None:
    """Canonical JSON (sorted keys, no spaces): the bytes whose sha256 is a pre-registration's identity."""
    atomic.write_text(path, canonical_json(dataclasses.asdict(record)) + "\n")
