"""A group's reviewer bundle: group.json, GROUP.md and one run bundle per subtask, with SHA256SUMS.

Each subtask's member is the bundle bundle.py writes for that run (`<task>.tar.gz`), and is read by
every rule of a run bundle. The outer archive is read the same way first: limits and plain names,
SHA256SUMS before anything is parsed, then exactly the members the reviewer's lock names for the
group (group.json names the group; the lock, not group.json, names its subtasks).
"""

from pathlib import Path

from sst2_audit.bundle import reading, run as bundle
from sst2_audit.formats import strict_json
from sst2_audit.pages.card import group_card
from sst2_audit.task.group import GROUP_CARD, GROUP_FILE, group_spec
from sst2_audit.util import atomic
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME

MAX_SUBTASKS = 64
# the members are compressed run bundles: the stream unpacks to about the file's own size
LIMITS = reading.Limits(bundle_bytes=64 << 20, unpacked_bytes=72 << 20, member_bytes=reading.MAX_BUNDLE_BYTES,
                       members=MAX_SUBTASKS + 4)
FIRST_MEMBER = GROUP_CARD  # sorted names: GROUP.md < SHA256SUMS < group.json < the subtasks' lower-case names


def subtask_member(task: str) -> str:
    return f"{task}.tar.gz"


def is_group_bundle(path: Path) -> bool:
    """A group bundle's first member is GROUP.md; anything else is read (and judged) as a run bundle."""
    name = reading.first_member_name(path, LIMITS)
    return name is not None and name.endswith(f"/{FIRST_MEMBER}")


def bundle_target(record, results: Path) -> Path:
    """Where a group's bundle is written; refused (exit 2) before any audit work when it cannot be."""
    if not RUN_NAME.match(record.run_name):
        raise InputError(f"group run name {record.run_name!r} is not a safe file name; no bundle is written.")
    longest = max(len(subtask_member(m.task)) for m in record.members)
    if len(record.run_name) + 1 + max(longest, len(reading.SUMS)) > 100:  # a ustar name field holds 100 bytes
        raise InputError(f"group run name {record.run_name!r} is too long for plain ustar names with its subtask "
                         f"bundles (at most {99 - longest} characters); re-run the group with a shorter --run-name.")
    return bundle.bundle_path(record.run_name, results)


def pack(group_bytes: bytes, record, runs: dict, caches: dict, results: Path) -> Path:
    """results/<group run name>.tar.gz of a group whose audit passed: group.json's bytes as the audit read them,
    the card the group level regenerated and compared, each subtask's run as audited; runs and caches by task."""
    target = bundle_target(record, results)
    contents = {GROUP_FILE: group_bytes, GROUP_CARD: group_card(record).encode()}
    for member in record.members:
        run = runs[member.task]
        # the subtask's top folder is its task name: the run name may exceed a ustar name with the group's prefix
        inner = bundle.bundle_contents(run, caches[member.task])
        contents[subtask_member(member.task)] = bundle.archive(member.task, inner)
    contents[reading.SUMS] = bundle.sums_file(contents)
    atomic.write_bytes(target, bundle.archive(record.run_name, contents))
    return target


def unpack_verified(path: Path, scratch: Path, lock) -> tuple:
    """The group folder a group bundle unpacks to (group.json, GROUP.md, one run folder per subtask), and
    the checks made. Nothing is written before every member passed its rules."""

    path = Path(path)
    _, members = reading.read_members(path, LIMITS)
    problems = reading.check_sums(members, LIMITS)
    if problems:
        raise CheckFailed(f"{path}: the group bundle does not match its SHA256SUMS: " + "; ".join(problems[:10]) + ".")
    raw = strict_json.loads(members.get(GROUP_FILE, b"null"), f"{path}: {GROUP_FILE}")
    name = raw.get("group_name") if isinstance(raw, dict) else None
    if not isinstance(name, str) or name not in lock.groups:
        raise InputError(f"{path}: {GROUP_FILE}: group_name {repr(name)[:80]} is not a group of the reviewer's lock "
                         f"{lock.path} (groups: {', '.join(sorted(lock.groups)) or 'none'}).")
    tasks = [task for task, _ in group_spec(lock, name).members]  # the reviewer's lock names the members
    reading.require_exactly(members, {GROUP_FILE, GROUP_CARD, reading.SUMS} | {subtask_member(task) for task in tasks},
                           path, f"group {name}")
    folder = Path(scratch) / "group"
    inner = Path(scratch) / "subtask-bundles"
    inner.mkdir(parents=True)
    checks = len(members) + 1
    for task in tasks:
        shown = inner / subtask_member(task)
        shown.write_bytes(members[subtask_member(task)])
        try:
            _, made = bundle.unpack_verified(shown, folder, task)
        except (CheckFailed, InputError) as error:  # name the member of the reviewer's file, not our scratch copy
            error.args = (str(error).replace(str(shown), f"{path}: {subtask_member(task)}"),)
            raise
        checks += made
    for record_file in (GROUP_FILE, GROUP_CARD):
        (folder / record_file).write_bytes(members[record_file])
    return folder, checks
