"""Files already on disk: a lock resource with source "local", or --from DIR."""

import shutil
from pathlib import Path

from ..errors import InputError
from .interface import FetchContext, StagedFile, cache_path_for


def _copy_in(resource, locked, origin: Path, context: FetchContext, source: str) -> StagedFile:
    if not origin.is_file():
        raise InputError(f"{origin}: file is missing (lock entry {locked.path!r} of the {resource.kind}).")
    cache_path, role = cache_path_for(resource, locked)
    staged = context.staging / cache_path
    staged.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(origin, staged)
    return StagedFile(cache_path, role, staged, source, locked)


def fetch(resource, context: FetchContext) -> list:
    base = Path(resource.get("path"))
    if not base.is_absolute():
        base = context.lock.folder / base
    return [
        _copy_in(resource, f, base / f.path, context, f"local file {base / f.path}")
        for f in resource.files
    ]


def fetch_import(resource, context: FetchContext) -> list:
    """--from DIR: DIR/<repo_id>/<path>, accepted only against a pinned sha256."""
    unpinned = [f.path for f in resource.files if not f.sha256]
    if unpinned:
        raise InputError(
            f"--from {context.import_dir}: the lock has no sha256 for {', '.join(unpinned)} of "
            f"{resource.get('repo_id')}, so imported copies cannot be verified. On the connected "
            "machine run prepare.py --update-lock and bring that lock along."
        )
    base = context.import_dir / resource.get("repo_id")
    return [
        _copy_in(resource, f, base / f.path, context,
                 f"imported copy of {resource.get('repo_id')}@{resource.get('revision')}/{f.path}")
        for f in resource.files
    ]
