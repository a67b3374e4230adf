"""Every file is written to a temporary name, flushed, then renamed into place.

An interrupted step therefore leaves either the old file or none, never a
half-written file that looks complete.
"""

import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from sst2_audit.util import json_text
from sst2_audit.util.errors import InputError


def _unwritable(path: Path, error: OSError) -> InputError:
    """The user's environment, not our bug: exit 2 naming the folder."""
    return InputError(f"{path}: cannot write here ({error.strerror or error}); choose a folder you can write to.")


def write_bytes(path: Path, data: bytes, *, overwrite: bool = False) -> None:
    write_chunks(path, (data,), overwrite=overwrite)


def write_chunks(path: Path, chunks: Iterable[bytes], *, overwrite: bool = False) -> None:
    """The file written from its chunks as they come: a large record is never one string in memory."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise InputError(f"{path}: refusing to overwrite an existing file.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as error:
        raise _unwritable(path.parent, error) from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make shared records unreadable to others
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        if overwrite:
            os.replace(tmp, path)
        else:
            _link_new(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _link_new(tmp: str, path: Path) -> None:
    """Rename into place only if nothing is there: two writers of one name cannot both succeed
    (a check then os.replace could let the second silently replace the first)."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise InputError(f"{path}: refusing to overwrite an existing file (another process wrote it first).") from None
    except OSError:  # a file system without hard links: the check above, then a plain rename
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_text(path: Path, text: str, *, overwrite: bool = False) -> None:
    write_bytes(path, text.encode("utf-8"), overwrite=overwrite)


def write_json(path: Path, value, *, overwrite: bool = False) -> None:
    """json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) and a newline, byte for byte, encoded as it
    is written (json.dumps with an indent first lists every piece: about 0.3 GB for a 60 MB adopted.json). A
    record (a dataclass) anywhere in value is written as dataclasses.asdict writes it, one object at a time: the
    record is never copied whole into dicts first."""
    write_chunks(path, _grouped(_streamed(value, 0)), overwrite=overwrite)


_SCALARS = (str, int, float)


def _streamed(value, level: int) -> Iterator[str]:
    """The text in pieces: the containers of the top two levels (a record, its rows) item by item, each row's text
    built whole (util/json_text.py: json's indented text, sort_keys)."""
    if level >= 2 or value is None or isinstance(value, _SCALARS):
        out: list = []
        json_text.write(value, level, out)
        yield "".join(out)
        return
    if not isinstance(value, (list, tuple, dict)):
        yield from _streamed(json_text.fields_of(value), level)
        return
    if not value:
        yield "[]" if isinstance(value, (list, tuple)) else "{}"
        return
    inner, dict_like = "\n" + "  " * (level + 1), isinstance(value, dict)
    yield "{" if dict_like else "["
    for number, item in enumerate(sorted(value.items()) if isinstance(value, dict) else value):
        yield ("," if number else "") + inner
        if dict_like:
            yield json_text.string(json_text.key_text(item[0])) + ": "
        yield from _streamed(item[1] if dict_like else item, level + 1)
    yield "\n" + "  " * level + ("}" if dict_like else "]")


def _grouped(pieces: Iterator[str], size: int = 1 << 16) -> Iterator[bytes]:
    """The encoder's many small pieces joined into writes of about `size` characters, the newline last."""
    group: list = []
    length = 0
    for piece in pieces:
        group.append(piece)
        length += len(piece)
        if length >= size:
            yield "".join(group).encode("utf-8")
            group, length = [], 0
    group.append("\n")
    yield "".join(group).encode("utf-8")


def temp_path_beside(path: Path) -> Path:
    """A fresh temporary name in the target's folder, so the final rename is atomic."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    return Path(tmp)


def new_directory(path: Path, what: str) -> Path:
    """Create a run folder that did not exist: a finished run is never overwritten."""
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InputError(
            f"{what} {path} already exists and is not empty; a finished run is never "
            "overwritten. Choose another folder or move the old one away."
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{what} {path}: cannot create the folder ({error.strerror or error}).") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: the folder is not writable.")
    return path


def require_writable_folder(path: Path, what: str) -> None:
    """Refuse, before any work, an output folder that cannot be created or written: its nearest existing
    ancestor must be a folder in which a file can be created. Probed by creating one, because root ignores
    mode bits and a read-only mount does not."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path}: expected a folder, got a file. Choose a folder you can write to.")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{what} {path}: cannot create the folder ({existing} is a file). Choose a folder you can "
                         "write to.")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-probe.", dir=existing)
    except OSError as error:
        raise InputError(f"{what} {path}: cannot write in {existing} ({error.strerror or error}). Choose a folder "
                         "you can write to.") from None
    os.close(fd)
    os.unlink(probe)
