"""Reading untrusted JSON: bounded, regular files only, UTF-8, no duplicate keys, finite numbers.

Every parse failure becomes an InputError naming the file (exit 2), never a traceback:
a person reading a record sees the first of two duplicate keys while json keeps the last,
so duplicates are refused; NaN/Infinity are not JSON; a 5000-digit integer or deep
nesting is refused by the parser's own limits and reported here.
"""

import json
import os
import re
import stat
from pathlib import Path

from sst2_audit.util.errors import InputError

MAX_RECORD_BYTES = 16 << 20  # a full 64-row run.json is about 75 KB
MAX_DEPTH = 64


def read_bytes(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """A regular file's bytes, at most `limit`; links, FIFOs and devices are refused before opening."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise InputError(f"{path}: expected a regular file, got {kind}.")
    if info.st_size > limit:
        raise InputError(f"{path}: {info.st_size} bytes, more than the limit of {limit} for a record.")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped between lstat and open
            raise InputError(f"{path}: expected a regular file.")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: more than the limit of {limit} bytes for a record.")
    return data


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _depth(value, where: str, level: int = 0) -> None:
    if level > MAX_DEPTH:
        raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels.")
    if isinstance(value, dict):
        for item in value.values():
            _depth(item, where, level + 1)
    elif isinstance(value, list):
        for item in value:
            _depth(item, where, level + 1)


# A surrogate escape reaches Python's str only through a JSON escape (UTF-8 bytes cannot hold one): valid JSON whose
# string no encoder writes back (hashing a doc, writing a record). Looked for only where the text has such an escape.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in text)


def _lone_surrogate(value, path: str = ""):
    """The field path of the first string (key or value) holding a lone surrogate, or None."""
    if isinstance(value, str):
        return (path or "(the value)") if _has_surrogate(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and _has_surrogate(key):
            return f"{path}.{key[:40]!r}".lstrip(".")
        found = _lone_surrogate(item, f"{path}.{key}".lstrip(".") if isinstance(key, str) else f"{path}[{key}]")
        if found:
            return found
    return None


def loads(data: bytes, where: str):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{where}: not valid UTF-8 (byte {error.start}).") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise InputError(f"{where}: not valid JSON ({error.msg} at line {error.lineno}).") from None
    except (ValueError, RecursionError) as error:  # duplicate key, NaN, too many digits, too deep
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error).split(";")[0]
        raise InputError(f"{where}: not acceptable JSON ({reason}).") from None
    _depth(value, where)
    if SURROGATE_ESCAPE.search(text):
        field = _lone_surrogate(value)
        if field:
            raise InputError(f"{where}: field {field}: expected text that UTF-8 can encode, got a lone surrogate "
                             "escape (\\ud800-\\udfff without its pair): refused.")
    return value


def read(path: Path, limit: int = MAX_RECORD_BYTES):
    return loads(read_bytes(path, limit), str(path))


def loads_lines(data: bytes, where: str) -> list:
    """JSON Lines: one strict value per line."""
    return [loads(line, f"{where}:{number}") for number, line in enumerate(data.split(b"\n"), start=1) if line.strip()]


def read_lines(path: Path, limit: int = MAX_RECORD_BYTES) -> list:
    return loads_lines(read_bytes(path, limit), str(path))
