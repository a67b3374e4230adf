"""One reader of a bundle file, for every kind of bundle: the gzip stream inflated as the tar stream is read
(bundle/ustar.py: every header checked before its body is used), each member's name checked as it is reached, size
limits from the file and the headers first, SHA256SUMS checked before any record is parsed. A member is held in memory
(a run's bundle: small limits) or written to a new folder as it is read (an adopted bundle: memory flat in its size).
"""

import hashlib
import re
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.bundle import ustar
from sst2_audit.formats.strict_json import open_regular, read_bytes
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import RUN_NAME, SAFE_NAME

SUMS = "SHA256SUMS"


@dataclass(frozen=True)
class Limits:
    """Checked from sizes and headers as the stream is read (docs/cli.md: "Bundles")."""
    bundle_bytes: int  # compressed
    unpacked_bytes: int  # the whole tar stream after gunzip
    member_bytes: int
    members: int


MAX_BUNDLE_BYTES = 8 << 20  # compressed; the reference bundle is about 25 KB
MAX_UNPACKED_BYTES = 32 << 20
MAX_MEMBER_BYTES = 16 << 20
MAX_MEMBERS = 16  # a bundle holds 9 files and their folder
RUN_LIMITS = Limits(MAX_BUNDLE_BYTES, MAX_UNPACKED_BYTES, MAX_MEMBER_BYTES, MAX_MEMBERS)
SUMS_LINE = re.compile(f"^([0-9a-f]{{64}})  ({SAFE_NAME})\\Z")


class _Inflated:
    """A bundle's gzip stream inflated as its tar stream is read: one gzip member, its CRC and length checked by
    zlib, nothing after it, at most limits.unpacked_bytes out. Memory: a piece of the file at a time, never the
    bundle or a member whole (a gzip bomb stays small)."""

    def __init__(self, bundle: Path, limits: Limits):
        self.bundle, self.limit = bundle, limits.unpacked_bytes
        self.handle = open_regular(bundle, limits.bundle_bytes)
        self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.buffer, self.out, self.pending = bytearray(), 0, self.handle.read(ustar.CHUNK)
        if self.pending[:2] != b"\x1f\x8b":
            self.handle.close()
            raise InputError(f"{bundle}: not a gzip file (a bundle is a .tar.gz written by sst2-audit audit "
                             "--bundle).")

    def read(self, size: int) -> bytes:
        while len(self.buffer) < size and not self.inflater.eof:
            self._inflate()
        piece = bytes(self.buffer[:size])
        del self.buffer[:size]
        return piece

    def _inflate(self) -> None:
        data = self.inflater.unconsumed_tail or self.pending or self.handle.read(ustar.CHUNK)
        self.pending = b""
        try:  # with no input left, zlib may still hold a little output: asked for once more
            out = self.inflater.decompress(data, ustar.CHUNK)
        except zlib.error as error:
            raise CheckFailed(f"{self.bundle}: refused: the gzip stream is corrupt ({error}).") from None
        if not data and not out and not self.inflater.eof:
            raise InputError(f"{self.bundle}: the gzip stream is truncated.")
        self.out += len(out)
        if self.out > self.limit:
            raise CheckFailed(f"{self.bundle}: refused: unpacks to more than {self.limit} bytes (limit).")
        self.buffer += out
        if self.inflater.eof:
            trailing = len(self.inflater.unused_data) + sum(map(len, iter(lambda: self.handle.read(ustar.CHUNK), b"")))
            if trailing:
                raise CheckFailed(f"{self.bundle}: refused: {trailing} bytes of trailing data after the gzip stream.")

    def rest_not_padding(self) -> int:
        """How many bytes follow the tar's end-of-archive block where any of them is not zero (a tar record's
        padding), else 0."""
        rest, zeros = 0, True
        while not self.inflater.eof or self.buffer:
            piece = self.read(ustar.CHUNK)
            rest, zeros = rest + len(piece), zeros and not piece.strip(b"\0")
        return 0 if zeros else rest


@dataclass(frozen=True)
class Written:
    """A member unpacked to disk as it was read (read_members' `folder`)."""
    path: Path
    sha256: str

    def read_bytes(self, limit: int) -> bytes:
        return read_bytes(self.path, limit)


def first_member_name(bundle: Path, limits: Limits) -> str | None:
    """The name in the first tar header, or None when it cannot be read: which reader applies (a group
    bundle's first member is GROUP.md). Both readers check everything, so the choice loosens nothing."""

    try:
        stream = _Inflated(Path(bundle), limits)
        with stream.handle:
            head = stream.read(512)
    except (CheckFailed, InputError):
        return None
    return head[:100].partition(b"\0")[0].decode("ascii", errors="replace") if len(head) == 512 else None


def has_member(bundle: Path, limits: Limits, wanted: str) -> bool:
    """Whether a member of the bundle is named `wanted`, read up to it: which reader applies. False where the
    bundle cannot be read this far; the reader chosen checks everything, so the choice loosens nothing."""

    def keep(name: str, is_dir: bool, pieces):
        if name.partition("/")[2] == wanted and not is_dir:
            raise _Found
        return None

    try:
        stream = _Inflated(Path(bundle), limits)
        with stream.handle:
            ustar.read(stream, str(bundle), limits.members, limits.member_bytes, keep)
    except _Found:
        return True
    except (CheckFailed, InputError):
        return False
    return False


class _Found(Exception):
    pass


def read_members(bundle: Path, limits: Limits = RUN_LIMITS, folder: Path | None = None) -> tuple:
    """(top folder, {name: bytes}) of a bundle, every rule checked from the headers before a byte is used; with
    `folder` (a new folder), each member is written there as it is read and held as its Written path and sha256
    instead (a bundle larger than memory should hold), and the folder is removed when the bundle is refused."""

    bundle = Path(bundle)
    members: dict = {}
    folded: dict = {}
    top: list = []

    def keep(name: str, is_dir: bool, pieces):
        parts = _member_parts(bundle, name, is_dir, top, folded)
        if parts is None or folder is None:
            return None if parts is None else b"".join(pieces)
        if not re.fullmatch(SAFE_NAME, parts[1]):  # a file on the reviewer's disk: SHA256SUMS lists only such names
            raise CheckFailed(f"{bundle}: refusing member {name!r}: not a plain file name.")
        return _write(folder / parts[1], pieces)

    stream = _Inflated(bundle, limits)
    with stream.handle:
        if folder is not None:
            Path(folder).mkdir(parents=True)
        try:
            for entry in ustar.read(stream, str(bundle), limits.members, limits.member_bytes, keep):
                if not entry.is_dir:
                    members[entry.name.split("/")[1]] = entry.data
            after = stream.rest_not_padding()  # the stream to its end first: its limit, CRC and trailing bytes
            if not top:
                raise CheckFailed(f"{bundle}: refused: an empty archive.")
            if not RUN_NAME.match(top[0]):  # `tar -xzf` makes this folder on the reviewer's disk
                raise CheckFailed(f"{bundle}: refused: the top folder {top[0][:100]!r} is not a safe run name "
                                  "(letters, digits, '.', '_', '-').")
            if after:
                raise CheckFailed(f"{bundle}: refused: {after} bytes after the tar archive's end are not padding.")
        except BaseException:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            raise
    return top[0], members


def _member_parts(bundle: Path, name: str, is_dir: bool, top: list, folded: dict) -> list | None:
    """A member's name checked as it is reached: (top, file name), or None for the one top folder's own entry."""
    name = name.removesuffix("/") if is_dir else name
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or ".." in parts or "" in parts or "." in parts:
        raise CheckFailed(f"{bundle}: refusing member {name!r}: absolute path, '..' or an unclean name.")
    if not top:
        top.append(parts[0])
    if parts[0] != top[0]:
        raise CheckFailed(f"{bundle}: expected one top-level run folder, found {top[0]!r} and {parts[0]!r}.")
    if is_dir:
        if len(parts) != 1:
            raise CheckFailed(f"{bundle}: refusing member {name!r}: a bundle has no sub-folders.")
        return None
    if len(parts) != 2:
        raise CheckFailed(f"{bundle}: refusing member {name!r}: a bundle's files sit in its one folder.")
    if parts[1] in folded.values():
        raise CheckFailed(f"{bundle}: refused: member {name!r} appears twice.")
    if parts[1].casefold() in folded:  # one file on a case-insensitive disk
        raise CheckFailed(f"{bundle}: refused: members {folded[parts[1].casefold()]!r} and {parts[1]!r} "
                          "differ only in case.")
    folded[parts[1].casefold()] = parts[1]
    return parts


def _write(path: Path, pieces) -> Written:
    digest = hashlib.sha256()
    with open(path, "xb") as handle:  # a new file: the names were checked unique
        for piece in pieces:
            digest.update(piece)
            handle.write(piece)
    return Written(path, digest.hexdigest())


def _sha256(body) -> str:
    return body.sha256 if isinstance(body, Written) else hashlib.sha256(body).hexdigest()


def check_sums(members: dict, limits: Limits = RUN_LIMITS) -> list:
    """SHA256SUMS first: strict lines, plain names, every member listed once and unchanged."""
    if SUMS not in members:
        return [f"{SUMS} is missing from the bundle"]
    most = limits.members * (64 + 2 + 100 + 1)
    sums = members[SUMS]
    if isinstance(sums, Written):
        if sums.path.stat().st_size > most:
            return [f"{SUMS}: {sums.path.stat().st_size} bytes, more than the {most} a list of {limits.members} "
                    "members needs"]
        sums = sums.read_bytes(most)
    if len(sums) > most:  # bounded before it is decoded or split
        return [f"{SUMS}: {len(sums)} bytes, more than the {most} a list of {limits.members} members needs"]
    problems, listed = [], {}
    try:
        text = sums.decode("utf-8")
    except UnicodeDecodeError:
        return [f"{SUMS}: not valid UTF-8"]
    for number, line in enumerate(text.splitlines(), start=1):
        match = SUMS_LINE.match(line)
        if not match or match.group(2) == SUMS:
            problems.append(f"{SUMS}:{number}: malformed line {line[:120]!r} (expected '<sha256>  <file name>')")
            continue
        digest, name = match.groups()
        if name in listed:
            problems.append(f"{SUMS}:{number}: {name} listed twice")
        listed[name] = digest
    for name, digest in listed.items():
        if name not in members:
            problems.append(f"{name}: listed in {SUMS} but missing")
        elif _sha256(members[name]) != digest:
            problems.append(f"{name}: sha256 expected {digest} (SHA256SUMS), got {_sha256(members[name])}")
    for name in sorted(set(members) - set(listed) - {SUMS}):
        problems.append(f"{name}: in the bundle but not listed in {SUMS}")
    return problems


def require_exactly(members: dict, expected, bundle: Path, what: str) -> None:
    """Refuse a bundle whose members are not exactly `expected`, naming what is extra and what is missing."""
    extra, missing = sorted(set(members) - set(expected)), sorted(set(expected) - set(members))
    if extra or missing:
        raise CheckFailed(f"{bundle}: refused: a bundle of {what} holds exactly {', '.join(sorted(expected))}; "
                          + "; ".join(([f"unexpected {', '.join(map(repr, extra))}"] if extra else [])
                                      + ([f"missing {', '.join(missing)}"] if missing else [])) + ".")
