"""Reading untrusted JSON: bounded, regular files only, UTF-8, no duplicate keys, finite numbers.

Every parse failure becomes an InputError naming the file (exit 2), never a traceback:
a person reading a record sees the first of two duplicate keys while json keeps the last,
so duplicates are refused; NaN/Infinity are not JSON; a 5000-digit integer or deep
nesting is refused by the parser's own limits and reported here.
"""

import hashlib
import json
import os
import re
import stat
from pathlib import Path

from sst2_audit.util.errors import InputError

MAX_RECORD_BYTES = 16 << 20  # a full 64-row run.json is about 75 KB
MAX_DEPTH = 64


def require_regular(path: Path) -> os.stat_result:
    """The lstat of a regular file; anything else someone put under a file's name (a link, a folder, a pipe, a
    device) is refused by what it is, before anything opens it."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    if not stat.S_ISREG(info.st_mode):
        kind = ("a symbolic link" if stat.S_ISLNK(info.st_mode) else "a folder" if stat.S_ISDIR(info.st_mode)
                else "a named pipe" if stat.S_ISFIFO(info.st_mode) else "not a regular file")
        raise InputError(f"{path}: expected a regular file, got {kind}.")
    return info


def open_regular(path: Path, limit: int):
    """A regular file opened for reading, at most `limit` bytes; links, FIFOs and devices are refused before opening
    and a file swapped between the check and the open is refused too."""
    path = Path(path)
    info = require_regular(path)
    if info.st_size > limit:
        raise InputError(f"{path}: {info.st_size} bytes, more than the limit of {limit} for a record.")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    handle = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped between lstat and open
        handle.close()
        raise InputError(f"{path}: expected a regular file.")
    return handle


def read_bytes(path: Path, limit: int = MAX_RECORD_BYTES) -> bytes:
    """A regular file's bytes, at most `limit`; links, FIFOs and devices are refused before opening."""
    with open_regular(path, limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{path}: more than the limit of {limit} bytes for a record.")
    return data


def _no_duplicates(pairs):
    seen = dict(pairs)  # in C: the per-object cost of a samples file's millions of objects
    if len(seen) != len(pairs):
        keys = set()
        for key, _ in pairs:  # the first repeated key, named
            if key in keys:
                raise ValueError(f"duplicate key {key!r}")
            keys.add(key)
    return seen


def _no_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _depth(value, where: str, level: int = 0) -> None:
    """A container nested at most MAX_DEPTH deep (only containers are visited: a samples line holds thousands of
    scalars)."""
    if level > MAX_DEPTH:
        raise InputError(f"{where}: nested deeper than {MAX_DEPTH} levels.")
    for item in (value.values() if type(value) is dict else value):
        if type(item) is dict or type(item) is list:
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
    if type(value) is dict or type(value) is list:
        _depth(value, where)  # a walk of the containers: cheaper than counting a line's brackets first (measured)
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


MAX_LINE_BYTES = 64 << 20  # one JSON Lines value: a leaderboard sample with its ten 5-shot contexts is about 60 KB


class Lines:
    """JSON Lines read one line at a time, each strict (memory: one line, not the file), the file's sha256 and size
    taken on the way: `sha256` is set once every line was read. Blank lines are skipped, as loads_lines does."""

    def __init__(self, path: Path, limit: int):
        self.path, self.limit, self.sha256, self.size = Path(path), limit, None, 0

    def __iter__(self):
        digest, where = hashlib.sha256(), str(self.path)
        with open_regular(self.path, self.limit) as handle:
            for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), start=1):
                digest.update(line)
                self.size += len(line)
                if self.size > self.limit:
                    raise InputError(f"{where}: more than the limit of {self.limit} bytes for a record.")
                if len(line) > MAX_LINE_BYTES:
                    raise InputError(f"{where}:{number}: a line of more than {MAX_LINE_BYTES} bytes.")
                if line.strip():
                    yield number, loads(line, f"{where}:{number}")
        self.sha256 = digest.hexdigest()
