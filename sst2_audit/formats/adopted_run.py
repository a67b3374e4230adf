"""adopted-run.json: a plain lm-eval run of several tasks adopted in one command (audit/adopt_run.py). The run's
folder holds this record and one adopted folder per task (adopted.json and the public copies, as a one-task
adoption writes them); a bundle holds this record and one adopted bundle per task. What this record says of its
members (their verdicts, the groups' numbers) is re-derived by `audit`, never believed."""

from dataclasses import dataclass

from sst2_audit.formats import strict_json
from sst2_audit.formats.schema import convert, require_kind
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError
from sst2_audit.util.sanitize import RUN_NAME

ADOPTED_RUN_FILE = "adopted-run.json"
ADOPTED_RUN_KIND, ADOPTED_RUN_VERSION = "sst2-audit/adopted-run", 1
MAX_TASKS = 64


@dataclass
class AdoptedTask:
    task: str  # the run's task name, and the member folder's name
    profile: str  # the reviewer's profile that pins it
    exit_code: int  # the task's verdict at adoption (0 or 4: a failed adoption is not kept)
    reported: dict[str, float]  # the results file's numbers of the task
    rescored: dict[str, float | int]  # the reviewer's numbers (rescored summary), with the rows rescored


@dataclass
class AdoptedGroup:
    group: str
    subtasks: list[str]  # every leaf below it, as the run logged them (group_subtasks, flattened)
    pinned_by: str | None  # the reviewer's lock's group entry whose pinned YAML gives the aggregation
    reported: dict[str, float]
    rederived: dict[str, float]  # from the members' re-derived numbers, by the pinned aggregation ({}: not derived)
    rescored: dict[str, float]  # the same from the reviewer's rescored numbers ({}: not derived)


@dataclass
class AdoptedRun:
    run_name: str
    lock_sha256: str
    source: dict[str, str]  # the results file's name and sha256, as given
    tasks: list[AdoptedTask]
    left_out: dict[str, str]  # task of the run -> why it was not adopted (no profile pins it: the pin command)
    groups: list[AdoptedGroup]
    limits: list[str]  # what the run's verdict says it did not verify, in words
    schema_version: int = ADOPTED_RUN_VERSION
    kind: str = ADOPTED_RUN_KIND


def write(path, record: AdoptedRun) -> None:
    atomic.write_json(path, record)


def from_dict(raw, where: str) -> AdoptedRun:
    record = convert(AdoptedRun, require_kind(raw, ADOPTED_RUN_KIND, ADOPTED_RUN_VERSION, where), where)
    names = [member.task for member in record.tasks]
    if not 0 < len(names) <= MAX_TASKS or len(set(names)) != len(names):
        raise InputError(f"{where}: tasks: expected 1 to {MAX_TASKS} distinct tasks, got {len(names)}.")
    for name in [*names, record.run_name]:
        if not RUN_NAME.match(name):  # a member is a folder and a bundle member: plain names only
            raise InputError(f"{where}: {name[:60]!r} is not a plain name (letters, digits, '.', '_', '-').")
    return record


def read(path) -> AdoptedRun:
    return from_dict(strict_json.read(path), str(path))
