"""An adopted run's bundle: adopted.json, the public copy of the lm-eval files, the reviewer's lock and the cache
manifest, with SHA256SUMS; the same tar rules and reader as a run's bundle (bundle/run.py, ustar.py)."""

import json
from pathlib import Path

from sst2_audit.audit.loading import BUNDLE_LOCK, BUNDLE_MANIFEST
from sst2_audit.bundle.run import archive, bundle_path, check_sums, read_members, require_exactly, SUMS, sums_file
from sst2_audit.formats import records
from sst2_audit.formats.adopted import ADOPTED_FILE
from sst2_audit.formats.manifest import read_manifest
from sst2_audit.util import atomic
from sst2_audit.util.environment import scrub_paths
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME

PUBLIC_FILES = (ADOPTED_FILE, records.LM_EVAL_RESULTS_FILE, records.LM_EVAL_SAMPLES_FILE)
MEMBERS = frozenset({*PUBLIC_FILES, BUNDLE_LOCK, BUNDLE_MANIFEST, SUMS})


def is_adopted(path: Path) -> bool:
    """An adopted folder (it holds adopted.json) or a bundle whose members include it."""
    if Path(path).is_dir():
        return (Path(path) / ADOPTED_FILE).is_file()
    try:
        return ADOPTED_FILE in read_members(Path(path))[1]
    except (CheckFailed, InputError):  # the run bundle's reader refuses it and says why
        return False


def pack(folder: Path, files: dict, run_name: str, lock, cache: Path, results: Path) -> Path:
    """files: {name: bytes} the audit read and checked, packed as read."""
    if not RUN_NAME.match(run_name):
        raise InputError(f"run name {run_name!r} is not a safe file name (letters, digits, '.', '_', '-').")
    target = bundle_path(run_name, results)
    manifest = read_manifest(cache)
    if manifest is None:
        raise InputError(f"{cache}: no manifest; the bundle needs the cache the adoption used (--cache).")
    contents = {name: files[name] for name in PUBLIC_FILES}
    contents[BUNDLE_LOCK] = lock.data
    scrub = {str(Path(cache).resolve()): "<cache>", str(Path.cwd()): "<cwd>", str(Path.home()): "<home>"}
    contents[BUNDLE_MANIFEST] = (json.dumps(scrub_paths(manifest.to_dict(), scrub), indent=2, sort_keys=True)
                                 + "\n").encode()
    contents[SUMS] = sums_file(contents)
    atomic.write_bytes(target, archive(run_name, contents))
    return target


def unpack_verified(bundle: Path, target: Path) -> tuple:
    """(folder, checks): limits, names and SHA256SUMS checked and the members exactly MEMBERS, then written."""
    _, members = read_members(bundle)
    problems = check_sums(members)
    if problems:
        raise CheckFailed(f"{bundle}: the bundle does not match its SHA256SUMS: " + "; ".join(problems[:10]) + ".")
    require_exactly(members, MEMBERS, bundle, "an adopted lm-eval run")
    folder = Path(target) / "adopted"
    folder.mkdir(parents=True)
    for name, body in members.items():
        (folder / name).write_bytes(body)
    return folder, len(members) + 1
