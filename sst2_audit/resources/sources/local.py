"""Files already on disk: a lock resource with source "local", or --from DIR."""

import os
import re
import shutil
from pathlib import Path

from sst2_audit.util.errors import InputError
from sst2_audit.resources.sources.interface import FetchContext, StagedFile, cache_path_for


def _copy_in(resource, locked, origin: Path, context: FetchContext, source: str) -> StagedFile:
    if not origin.is_file():
        raise InputError(f"{origin}: file is missing (lock entry {locked.path!r} of the {resource.kind}).")
    cache_path, role = cache_path_for(resource, locked)
    staged = context.staging / cache_path
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(origin, staged)
    return StagedFile(cache_path, role, staged, source, locked)


PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def folder(resource, lock_folder: Path) -> tuple:
    """(the folder on this machine, how records name it).

    A lock may name the folder relative to the lock file or through ${VARIABLE}s, so the same
    lock (and its sha256) works on every machine and no record publishes a machine's folder.
    An absolute folder works locally, but records name it only as "<the lock's data folder>".
    """
    written = resource.get("path")
    if not isinstance(written, str) or not written:
        raise InputError(f"lock: a local {resource.kind} resource needs a non-empty 'path', got {written!r}.")
    missing = [name for name in PLACEHOLDER.findall(written) if not os.environ.get(name)]
    if missing:
        raise InputError(f"lock: the local {resource.kind} folder {written!r} uses ${{{missing[0]}}}, which is not "
                         f"set in the environment; set it to the folder that holds the files.")
    base = Path(PLACEHOLDER.sub(lambda m: os.environ[m.group(1)], written))
    if PLACEHOLDER.search(written) and not base.is_absolute():  # a variable's folder is the user's: from here
        base = base.resolve()
    # records name a folder as the lock writes it only where that names no machine: a ${VARIABLE} or a
    # folder inside the lock's own folder; an absolute folder or one that climbs out (it would name the
    # folders above the lock, a home folder among them) is "<the lock's model folder>"
    climbs = Path(written).is_absolute() or ".." in Path(written).parts
    shown = f"<the lock's {resource.kind} folder>" if climbs else written
    return (base if base.is_absolute() else lock_folder / base), shown


def fetch(resource, context: FetchContext) -> list:
    base, shown = folder(resource, context.lock.folder)
    return [
        _copy_in(resource, f, base / f.path, context, f"local file {shown}/{f.path}")
        for f in resource.files
    ]


def fetch_import(resource, context: FetchContext) -> list:
    """--from DIR: DIR/<repo_id>/<path>, accepted only against a pinned sha256."""
    unpinned = [f.path for f in resource.files if not f.sha256]
    if unpinned:
        raise InputError(
            f"--from {context.import_dir}: the lock has no sha256 for {', '.join(unpinned)} of "
            f"{resource.get('repo_id')}, so imported copies cannot be verified. On the connected "
            "machine run sst2-audit prepare --update-lock and bring that lock along."
        )
    base = context.import_dir / resource.get("repo_id")
    return [
        _copy_in(resource, f, base / f.path, context,
                 f"imported copy of {resource.get('repo_id')}@{resource.get('revision')}/{f.path}")
        for f in resource.files
    ]
