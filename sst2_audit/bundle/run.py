"""The reviewer bundle: a deterministic tar.gz of public records, with SHA256SUMS and a card.

It never carries a sentence, a prompt or a token id of the data. Reading one works like a
package installer (bundle/reading.py): size limits from the file and the tar headers first, one
gzip member with its CRC, no trailing data, plain file names in one folder, no duplicates, and
SHA256SUMS checked over the members before any record is parsed.
"""

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from sst2_audit.audit.loading import BUNDLE_LOCK, BUNDLE_MANIFEST
from sst2_audit.bundle.reading import check_sums, read_members, require_exactly, SUMS
from sst2_audit.formats import records
from sst2_audit.formats.manifest import MANIFEST_NAME, read_manifest
from sst2_audit.formats.strict_json import loads
from sst2_audit.pages import card
from sst2_audit.pages.html_report import OLDEST_SCHEMA, render
from sst2_audit.util import atomic
from sst2_audit.util.environment import scrub_paths
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME

CARD = "CARD.md"
PUBLIC_FILES = (records.RUN_FILE, records.FAILURE_FILE, records.LM_EVAL_RESULTS_FILE, records.LM_EVAL_SAMPLES_FILE,
                records.ENVIRONMENT_FILE)


def _refuse_machine_folders(lock) -> None:
    """The bundle carries the lock byte for byte; an absolute local folder in it would publish
    where files live on the submitter's machine (and would not exist on the reviewer's)."""
    for name, profile in sorted(lock.profiles.items()):
        for resource in profile.resources:
            written = resource.get("path") if resource.source == "local" else None
            if isinstance(written, str) and written.startswith("/"):
                raise InputError(
                    f"{lock.path}: profiles.{name}.{resource.kind}.path is the absolute folder {written!r}; a "
                    "bundle carries the lock as it is and would publish it. Write the folder relative to the "
                    "lock file or as ${VARIABLE} (e.g. \"${SST2_AUDIT_DATA}\"), prepare again, and re-run; "
                    "no bundle is written.")


def bundle_contents(run, cache: Path) -> dict:
    """{name: bytes} of everything the bundle holds, SHA256SUMS last."""
    contents = {}
    for name in PUBLIC_FILES:  # the bytes the audit read and checked (audit/loading.py), never read again
        if name in run.files:
            contents[name] = run.files[name]
    _refuse_machine_folders(run.lock)
    contents[BUNDLE_LOCK] = run.lock.data  # the bytes of the reviewer's lock the audit just passed, as read
    manifest = read_manifest(cache)
    if manifest is None:
        raise InputError(f"{cache}: no {MANIFEST_NAME}; the bundle needs the manifest of the cache the run used "
                         "(--cache).")
    if run.record is not None:
        used = {entry.path: entry.sha256 for entry in run.record.resources}
        here = {entry.path: entry.sha256 for entry in manifest.files}
        if used != here:
            raise InputError(f"{cache}/{MANIFEST_NAME} does not describe the resources run {run.name} used; "
                             "pass the --cache the run was made with.")
    scrub = {str(Path(cache).resolve()): "<cache>", str(Path.cwd()): "<cwd>", str(Path.home()): "<home>"}
    contents[BUNDLE_MANIFEST] = (json.dumps(scrub_paths(manifest.to_dict(), scrub), indent=2,
                                            sort_keys=True) + "\n").encode()
    if run.record is not None:
        contents[CARD] = card.render(run.record, run.lock, run.record_schema).encode()
        # regenerated from the checked records, as the card: what the audit will compare it with; record schema
        # 3's page (a design this version does not render) is packed as audited, and labelled a claim
        if run.record_schema >= OLDEST_SCHEMA:
            contents[records.REPORT_FILE] = render(run.record, run.lock, run.task_spec(),
                                                   written_schema=run.record_schema).encode()
        elif run.report_text is not None:
            contents[records.REPORT_FILE] = run.report_text.encode()
    contents[SUMS] = sums_file(contents)
    return contents


def sums_file(contents: dict) -> bytes:
    """SHA256SUMS of {name: bytes}: `sha256sum -c` reads it."""
    return "".join(f"{hashlib.sha256(body).hexdigest()}  {name}\n" for name, body in sorted(contents.items())).encode()


MAX_TOP_NAME = 100 - 1 - len("lm_eval_samples.public.jsonl")  # a ustar name field holds 100 bytes


def bundle_path(run_name: str, results: Path) -> Path:
    """Where --bundle writes; refused before any audit work when it cannot be written."""
    if len(run_name) > MAX_TOP_NAME:
        raise InputError(f"run name {run_name!r} has {len(run_name)} characters; a bundle's folder name holds at "
                         f"most {MAX_TOP_NAME} (plain ustar names). Re-run with a shorter --run-name.")
    target = Path(results) / f"{run_name}.tar.gz"
    if target.exists():
        raise InputError(f"{target} already exists; a bundle is never overwritten. Move it away first.")
    atomic.require_writable_folder(Path(results), "--results")
    return target


def archive(top: str, contents: dict) -> bytes:
    """The deterministic .tar.gz of {name: bytes} under one folder `top`: same contents, same bytes."""
    raw = io.BytesIO()
    # plain ustar, the one layout every tar reader unpacks alike (ustar.py)
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, body in sorted(contents.items()):
            info = tarfile.TarInfo(f"{top}/{name}")  # fixed metadata (ustar.py): owner 0, no names
            info.size, info.mode, info.mtime = len(body), 0o644, 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(body))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as compressed:
        compressed.write(raw.getvalue())
    return packed.getvalue()


def pack(run, cache: Path, results: Path) -> Path:
    if not RUN_NAME.match(run.name):  # the name decides where the bundle is written
        raise InputError(f"run name {run.name!r} is not a safe file name (letters, digits, '.', '_', '-'); "
                         "no bundle is written.")
    target = bundle_path(run.name, results)
    atomic.write_bytes(target, archive(run.name, bundle_contents(run, cache)))
    return target


# Exactly the members a bundle of each record schema holds: nothing unchecked rides along.
_OLD_MEMBERS = frozenset({records.RUN_FILE, records.LM_EVAL_RESULTS_FILE, records.LM_EVAL_SAMPLES_FILE,
                          records.ENVIRONMENT_FILE, BUNDLE_LOCK, BUNDLE_MANIFEST, CARD, SUMS})
SCHEMA_MEMBERS = {1: _OLD_MEMBERS, 2: _OLD_MEMBERS,  # report.html from schema 3 on
                  **{v: _OLD_MEMBERS | {records.REPORT_FILE} for v in range(3, records.RECORD_SCHEMA_VERSION + 1)}}


def check_member_set(members: dict, bundle: Path) -> None:
    """The members must be exactly those of the schema run.json names (read after SHA256SUMS matched)."""

    if records.RUN_FILE not in members:
        raise CheckFailed(f"{bundle}: refused: no {records.RUN_FILE}; a bundle packs a passing run "
                          f"(members: {', '.join(sorted(members))}).")
    raw = loads(members[records.RUN_FILE], f"{bundle}: {records.RUN_FILE}")
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if type(version) is not int:
        raise InputError(f"{bundle}: {records.RUN_FILE}: schema_version must be an integer, got {repr(version)[:40]}.")
    expected = SCHEMA_MEMBERS.get(version)
    if expected is None:
        raise InputError(f"{bundle}: {records.RUN_FILE}: schema_version {version!r} is not one this audit reads "
                         f"({', '.join(map(str, sorted(SCHEMA_MEMBERS)))}).")
    require_exactly(members, expected, bundle, f"record schema {version}")


def unpack_verified(bundle: Path, target: Path, name: str = "bundle") -> tuple:
    """Check a bundle (limits, names, SHA256SUMS, its exact members) and only then write its files
    under target. Nothing is parsed before SHA256SUMS matched; a bundle that fails is refused (exit 1).
    (folder, checks made).
    """
    top, members = read_members(bundle)
    problems = check_sums(members)
    if problems:
        raise CheckFailed(f"{bundle}: the bundle does not match its SHA256SUMS: " + "; ".join(problems[:10]) + ".")
    check_member_set(members, bundle)
    folder = Path(target) / name  # the top name is the submitter's; the folder name is ours
    folder.mkdir(parents=True)
    for name, body in members.items():
        (folder / name).write_bytes(body)
    return folder, len(members) + 1
