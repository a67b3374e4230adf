"""A shared store of derived and downloaded files, so profiles that pin the same model keep one copy.

Every verified model file is also kept once by content (`objects/<sha256>`), whatever its source:
two caches of profiles that share a model entry hold hard links to one file.

The embedded profiles all pin the same wheel and GGUF member: the wheel and its float32 snapshot
are kept once, under the member's sha256, and every cache hard-links them (a copy where the file
system cannot link). Nothing from the store is trusted: prepare stages the files and checks each
against the lock's sha256 as it checks a fresh conversion, so a damaged store fails there.
"""

import os
import shutil
import tempfile
from pathlib import Path

from sst2_audit.util.hashing import sha256_file

COMPLETE = ".complete"  # written last: a folder without it is an interrupted put, ignored and replaced


def root() -> Path:
    """SST2_AUDIT_STORE, else ~/.cache/sst2-audit/store (XDG_CACHE_HOME honoured)."""
    given = os.environ.get("SST2_AUDIT_STORE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "sst2-audit" / "store"


def _link_or_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def get(key: str, target: Path) -> bool:
    """Link the stored folder `key` into target (created); False when the store does not hold it."""
    folder = root() / key
    if not (folder / COMPLETE).is_file():
        return False
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != COMPLETE:
            _link_or_copy(path, target / path.relative_to(folder))
    return True


def put(key: str, source: Path) -> None:
    """Keep a verified folder under `key` (best effort: a store that cannot be written is skipped)."""
    folder = root() / key
    if (folder / COMPLETE).is_file():
        return
    partial = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
        for path in sorted(Path(source).rglob("*")):
            if path.is_file():
                _link_or_copy(path, partial / path.relative_to(source))
        (partial / COMPLETE).write_text("")
        shutil.rmtree(folder, ignore_errors=True)  # an interrupted earlier put
        os.replace(partial, folder)
    except OSError:
        if partial is not None:
            shutil.rmtree(partial, ignore_errors=True)


def share(path: Path, sha256: str) -> None:
    """Make a verified cache file a link to the store's object of that content (best effort).

    An object already there is re-hashed before it replaces anything: the store is never trusted.
    """

    objects = root() / "objects"
    target = objects / sha256
    try:
        objects.mkdir(parents=True, exist_ok=True)
        if not target.is_file():
            partial = objects / f".{sha256}.{os.getpid()}"
            os.link(path, partial)
            os.replace(partial, target)
            return
        if os.stat(target).st_ino == os.stat(path).st_ino or sha256_file(target) != sha256:
            return  # already one file, or a damaged object that a fresh file must not be replaced by
        linked = Path(path).with_name(f".{Path(path).name}.shared")
        os.link(target, linked)
        os.replace(linked, path)
    except OSError:  # another file system, a read-only store: the cache keeps its own copy
        return
