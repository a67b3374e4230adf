"""A confirmation's reviewer bundle: the chain in one file. CONFIRMATION.md, confirmation.json,
preregistration.json and one run bundle per dev run (`dev-<profile>.tar.gz`) and per confirmation run
(`confirm-<profile>.tar.gz`), with SHA256SUMS.

Read like a group bundle: limits and plain names, SHA256SUMS before anything is parsed, then exactly the
members the pre-registration's profiles call for, each of them profiles of the reviewer's lock; each inner
run bundle is read by every rule of a run bundle.
"""

from pathlib import Path

from sst2_audit.bundle import reading, run as bundle
from sst2_audit.bundle.group import LIMITS
from sst2_audit.formats import prereg as formats
from sst2_audit.formats import strict_json
from sst2_audit.util import atomic
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME

FIRST_MEMBER = formats.CONFIRMATION_CARD  # sorted names: CONFIRMATION.md < SHA256SUMS < the lower-case rest
KINDS = (formats.DEV_FOLDER, formats.CONFIRM_FOLDER)


def run_member(kind: str, profile: str) -> str:
    return f"{kind}-{profile}.tar.gz"


def is_confirmation_bundle(path: Path) -> bool:
    name = reading.first_member_name(path, LIMITS)
    return name is not None and name.endswith(f"/{FIRST_MEMBER}")


def bundle_target(record, profiles, results: Path) -> Path:
    """Where a confirmation's bundle is written; refused (exit 2) before any audit work when it cannot be."""
    longest = max((len(run_member(kind, p)) for kind in KINDS for p in profiles), default=0)
    if not RUN_NAME.match(record.run_name) or len(record.run_name) + 1 + max(longest, 20) > 100:
        raise InputError(f"confirmation run name {record.run_name!r} is not a safe file name short enough for plain "
                         "ustar names with its run bundles; no bundle is written.")
    return bundle.bundle_path(record.run_name, results)


def pack(checked: dict, record, runs: dict, caches: dict, results: Path) -> Path:
    """results/<run name>.tar.gz of a confirmation whose audit passed: `checked` holds confirmation.json,
    preregistration.json and the card as the audit read or regenerated them; runs: (kind, profile) -> RunFolder."""
    target = bundle_target(record, sorted({p for _, p in runs}), results)
    contents = dict(checked)
    for (kind, profile), run in runs.items():
        contents[run_member(kind, profile)] = bundle.archive(profile, bundle.bundle_contents(run, caches[profile]))
    contents[reading.SUMS] = bundle.sums_file(contents)
    atomic.write_bytes(target, bundle.archive(record.run_name, contents))
    return target


def unpack_verified(path: Path, scratch: Path, lock) -> tuple:
    """The confirmation folder a bundle unpacks to, and the checks made; nothing is written before every
    member passed its rules."""
    path = Path(path)
    _, members = reading.read_members(path, LIMITS)
    problems = reading.check_sums(members, LIMITS)
    if problems:
        raise CheckFailed(f"{path}: the confirmation bundle does not match its SHA256SUMS: "
                          + "; ".join(problems[:10]) + ".")
    raw = strict_json.loads(members.get(formats.PREREG_FILE, b"null"), f"{path}: {formats.PREREG_FILE}")
    rule = raw.get("rule") if isinstance(raw, dict) else None
    profiles = rule.get("profiles") if isinstance(rule, dict) else None
    known = isinstance(profiles, list) and all(isinstance(p, str) and p in lock.profiles for p in profiles)
    if not known or not profiles or len(set(profiles)) != len(profiles):
        raise InputError(f"{path}: {formats.PREREG_FILE}: rule.profiles {repr(profiles)[:80]} are not profiles of "
                         f"the reviewer's lock {lock.path}.")
    runs = [(kind, profile) for kind in KINDS for profile in profiles]
    reading.require_exactly(members, {formats.CONFIRMATION_FILE, formats.CONFIRMATION_CARD, formats.PREREG_FILE,
                                     reading.SUMS} | {run_member(*run) for run in runs}, path, "a confirmation")
    folder, inner = Path(scratch) / "confirmation", Path(scratch) / "run-bundles"
    inner.mkdir(parents=True)
    checks = len(members) + 1
    for kind, profile in runs:
        name = run_member(kind, profile)
        shown = inner / name
        shown.write_bytes(members[name])
        try:
            _, made = bundle.unpack_verified(shown, folder / kind, profile)
        except (CheckFailed, InputError) as error:  # name the member of the reviewer's file, not our scratch copy
            error.args = (str(error).replace(str(shown), f"{path}: {name}"),)
            raise
        checks += made
    for name in (formats.CONFIRMATION_FILE, formats.CONFIRMATION_CARD, formats.PREREG_FILE):
        (folder / name).write_bytes(members[name])
    return folder, checks
