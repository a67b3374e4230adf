"""An adopted run's bundle: adopted.json, the public copy of the lm-eval files, the reviewer's lock and the cache
manifest, with SHA256SUMS; the same tar rules and reader as a run's bundle (bundle/run.py, ustar.py)."""

import json
import os
import shutil
from pathlib import Path

from sst2_audit.audit.loading import BUNDLE_LOCK, BUNDLE_MANIFEST
from sst2_audit.bundle.reading import (check_sums, has_member, Limits, MAX_MEMBERS, read_members, require_exactly,
                                       SUMS)
from sst2_audit.bundle.run import archive, bundle_path, sums_file
from sst2_audit.formats import records
from sst2_audit.formats.adopted import ADOPTED_FILE, MAX_ADOPTED_BYTES
from sst2_audit.formats.adopted_run import ADOPTED_RUN_FILE, MAX_TASKS
from sst2_audit.formats.manifest import read_manifest
from sst2_audit.util import atomic
from sst2_audit.util.environment import scrub_paths
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME

PUBLIC_FILES = (ADOPTED_FILE, records.LM_EVAL_RESULTS_FILE, records.LM_EVAL_SAMPLES_FILE)
LIGHTEVAL_PUBLIC_FILES = (ADOPTED_FILE, records.LIGHTEVAL_RESULTS_FILE, records.LIGHTEVAL_DETAILS_FILE)
# An adopted bundle is read as a stream and its members written to disk as they come (bundle/reading.py::
# read_members' folder): memory stays flat, so its limits are an adopted folder's (adopted.json up to 256 MiB; an
# adoption of the leaderboard's MMLU-Pro, 12,032 rows, is about 12 MB model-free) and a gzip bomb costs disk up to
# unpacked_bytes.
TASK_LIMITS = Limits(bundle_bytes=MAX_ADOPTED_BYTES, unpacked_bytes=3 * MAX_ADOPTED_BYTES,
                     member_bytes=MAX_ADOPTED_BYTES, members=MAX_MEMBERS)
# a run of many tasks: adopted-run.json, SHA256SUMS and one adopted bundle per task (<task>.tar.gz), unpacked alike
RUN_LIMITS = Limits(bundle_bytes=4 * MAX_ADOPTED_BYTES, unpacked_bytes=4 * MAX_ADOPTED_BYTES + (16 << 20),
                    member_bytes=TASK_LIMITS.bundle_bytes, members=MAX_TASKS + 3)


def public_files(names) -> tuple:
    """The public files of an adopted folder or bundle holding `names`: a lighteval run's copy where its details
    are among them, else lm-eval's."""
    return LIGHTEVAL_PUBLIC_FILES if records.LIGHTEVAL_DETAILS_FILE in names else PUBLIC_FILES


def unread_note(folder: Path, known=None) -> str | None:
    """The entries of an adopted folder that are none of its files (`known`; by default a task's, as its listing
    says which writer's they are; and what its bundle brings: the lock, the manifest, SHA256SUMS), in words: someone
    else's additions, which no audit reads, so a verdict names them rather than seeming to vouch for them (a bundle
    with such a member is refused: require_exactly). None where there are none."""
    listed = {entry.name: entry.is_dir() for entry in Path(folder).iterdir()}
    expected = {*(public_files(listed) if known is None else known), BUNDLE_LOCK, BUNDLE_MANIFEST, SUMS}
    extra = sorted(name + ("/" if is_dir else "") for name, is_dir in listed.items() if name not in expected)
    shown = ", ".join(extra[:8]) + (f" and {len(extra) - 8} more" if len(extra) > 8 else "")
    return f"in the folder but no part of it, so neither read nor vouched for here: {shown}" if extra else None


def is_adopted(path: Path) -> bool:
    """An adopted folder (it holds adopted.json) or a bundle with that member (read up to it: the reader chosen
    checks everything). Anything under the record's name counts (a folder or a link is then refused by the reader,
    named as what it is, not taken for a run folder)."""
    if Path(path).is_dir():
        return os.path.lexists(Path(path) / ADOPTED_FILE)
    return has_member(Path(path), TASK_LIMITS, ADOPTED_FILE)


def is_adopted_run(path: Path) -> bool:
    """An adopted run of many tasks: a folder holding adopted-run.json, or a bundle whose members include it."""
    if Path(path).is_dir():
        return os.path.lexists(Path(path) / ADOPTED_RUN_FILE)
    return has_member(Path(path), RUN_LIMITS, ADOPTED_RUN_FILE)


def task_member(task: str) -> str:
    return f"{task}.tar.gz"


def pack(folder: Path, files: dict, run_name: str, lock, cache: Path, results: Path) -> Path:
    """files: {name: bytes} the audit read and checked, packed as read."""
    if not RUN_NAME.match(run_name):
        raise InputError(f"run name {run_name!r} is not a safe file name (letters, digits, '.', '_', '-').")
    target = bundle_path(run_name, results)
    atomic.write_bytes(target, _readable(_contents(files, lock, cache), run_name, TASK_LIMITS, folder))
    return target


def _readable(contents: dict, top: str, limits: Limits, source) -> bytes:
    """The bundle of `contents`, refused (exit 2) where the reader's limits would refuse it: nothing is packed that
    a reviewer's audit cannot open."""
    packed = archive(top, contents)
    # each member's header and padded body, the end blocks and the record's padding: at least the tar's size
    tar = sum(512 + -(-len(body) // 512) * 512 for body in contents.values()) + 1024 + 10240
    largest = max(contents, key=lambda name: len(contents[name]))
    if len(packed) > limits.bundle_bytes or len(contents[largest]) > limits.member_bytes or tar > limits.unpacked_bytes:
        raise InputError(f"{source}: its bundle would be {len(packed)} bytes packed, {tar} unpacked ({largest}: "
                         f"{len(contents[largest])}), more than a reviewer's reader takes ({limits.bundle_bytes}, "
                         f"{limits.unpacked_bytes}, {limits.member_bytes} a member); nothing packed: hand over the "
                         "adopted folder instead.")
    return packed


def pack_run(record: bytes, tasks: dict, run_name: str, lock, results: Path) -> Path:
    """A run of many tasks: adopted-run.json as written and each task's adopted bundle; tasks: {task: (files,
    cache)}, each task's files as its adoption wrote them."""
    target = bundle_path(run_name, results)
    contents = {ADOPTED_RUN_FILE: record}
    for task, (files, cache) in tasks.items():
        contents[task_member(task)] = _readable(_contents(files, lock, cache), task, TASK_LIMITS, f"task {task}")
    contents[SUMS] = sums_file(contents)
    atomic.write_bytes(target, _readable(contents, run_name, RUN_LIMITS, run_name))
    return target


def unpack_run_verified(bundle: Path, target: Path, tasks_of) -> tuple:
    """(folder, checks) of a run bundle: its SHA256SUMS, exactly adopted-run.json and one member per task the record
    names (tasks_of: the record's bytes -> its task names), each member unpacked by unpack_verified."""
    inner = Path(target) / "task-bundles"
    _, members = read_members(bundle, RUN_LIMITS, inner)
    problems = check_sums(members, RUN_LIMITS)
    if problems:
        raise CheckFailed(f"{bundle}: the bundle does not match its SHA256SUMS: " + "; ".join(problems[:10]) + ".")
    record = members[ADOPTED_RUN_FILE].read_bytes(RUN_LIMITS.member_bytes) if ADOPTED_RUN_FILE in members else b"null"
    tasks = tasks_of(record, f"{bundle}: {ADOPTED_RUN_FILE}")
    require_exactly(members, {ADOPTED_RUN_FILE, SUMS} | {task_member(task) for task in tasks}, bundle,
                    "an adopted lm-eval run of many tasks")
    folder, checks = Path(target) / "adopted-run", len(members) + 1
    folder.mkdir(parents=True)
    for task in tasks:
        shown = members[task_member(task)].path
        try:
            unpacked, made = unpack_verified(shown, Path(target) / "tasks" / task)
        except (CheckFailed, InputError) as error:  # name the member of the reviewer's file, not our scratch copy
            error.args = (str(error).replace(str(shown), f"{bundle}: {task_member(task)}"),)
            raise
        unpacked.rename(folder / task)
        checks += made
    (folder / ADOPTED_RUN_FILE).write_bytes(record)
    return folder, checks


def _contents(files: dict, lock, cache: Path) -> dict:
    """One task's bundle members: its public files, the reviewer's lock, the cache manifest (paths scrubbed)."""
    manifest = read_manifest(cache)
    if manifest is None:
        raise InputError(f"{cache}: no manifest; the bundle needs the cache the adoption used (--cache).")
    contents = {name: files[name] for name in public_files(files)}
    contents[BUNDLE_LOCK] = lock.data
    scrub = {str(Path(cache).resolve()): "<cache>", str(Path.cwd()): "<cwd>", str(Path.home()): "<home>"}
    contents[BUNDLE_MANIFEST] = (json.dumps(scrub_paths(manifest.to_dict(), scrub), indent=2, sort_keys=True)
                                 + "\n").encode()
    contents[SUMS] = sums_file(contents)
    return contents


def unpack_verified(bundle: Path, target: Path) -> tuple:
    """(folder, checks): limits, names and SHA256SUMS checked and the members exactly an adopted folder's public
    files (lm-eval's or a lighteval run's), the lock, the manifest and SHA256SUMS; each member written as it is read
    (memory flat in the bundle's size), the folder removed where the bundle is refused."""
    unpacked = Path(target) / "unpacked"
    _, members = read_members(bundle, TASK_LIMITS, unpacked)
    try:
        problems = check_sums(members, TASK_LIMITS)
        if problems:
            raise CheckFailed(f"{bundle}: the bundle does not match its SHA256SUMS: " + "; ".join(problems[:10])
                              + ".")
        public = public_files(members)
        require_exactly(members, frozenset({*public, BUNDLE_LOCK, BUNDLE_MANIFEST, SUMS}), bundle,
                        "an adopted lighteval run" if public == LIGHTEVAL_PUBLIC_FILES else "an adopted lm-eval run")
    except (CheckFailed, InputError):
        shutil.rmtree(unpacked, ignore_errors=True)
        raise
    folder = Path(target) / "adopted"
    unpacked.rename(folder)
    return folder, len(members) + 1
