"""One reading of a bundle's tar stream: plain POSIX ustar, parsed by hand, nothing else accepted.

Readers disagree on the extensions: Python's tarfile lets a GNU long-name (`L`) header win
over a following pax `path`, GNU tar lets the pax `path` win, so one archive can unpack to
different files in the audit and on the reviewer's disk. A bundle therefore holds only ustar
headers (magic "ustar\\0", version "00") for regular files and one folder: no pax (`x`, `g`)
or GNU (`L`, `K`, sparse) headers, no ustar `prefix`, no link name, sizes in octal. What is
left has one meaning to Python's tarfile, GNU tar and bsdtar alike. The metadata a tar writes to
the reviewer's disk is fixed, as audit.py --bundle writes it: mode 0644 (a folder 0755), owner and
group 0 with no names, mtime 0: no setuid or world-writable file, no escape sequence in a name a
listing prints, nothing a tar reader would refuse that this reader accepted.
"""

from dataclasses import dataclass

from sst2_audit.util.errors import CheckFailed

BLOCK = 512
REGULAR, DIRECTORY = (b"0", b"\0"), b"5"
KINDS = {b"1": "hard link", b"2": "symbolic link", b"3": "character device", b"4": "block device",
         b"6": "FIFO", b"7": "contiguous file", b"x": "pax extended header", b"g": "pax global header",
         b"L": "GNU long-name header", b"K": "GNU long-link header", b"S": "GNU sparse file",
         b"V": "GNU volume header", b"M": "GNU multi-volume member", b"D": "GNU dump directory"}


@dataclass
class Member:
    name: str
    is_dir: bool
    data: object  # what the caller's `keep` made of the body: its bytes, or where it was written (bundle/run.py)


CHUNK = 1 << 20  # a member's body reaches `keep` in pieces of at most this: memory flat in the member's size


def _octal(field: bytes, what: str, where: str) -> int:
    digits = field.rstrip(b"\0 ")
    if not digits or field[:1] in (b"\x80", b"\xff") or not all(48 <= c <= 55 for c in digits):
        raise CheckFailed(f"{where}: refused: header field {what} is not a plain octal number ({field!r}).")
    return int(digits, 8)


def _text(field: bytes, what: str, where: str) -> str:
    value, _, rest = field.partition(b"\0")
    if rest.strip(b"\0"):  # bytes after the terminator: one reader may show them, another not
        raise CheckFailed(f"{where}: refused: header field {what} has bytes after its end.")
    try:
        return value.decode("ascii")
    except UnicodeDecodeError:
        raise CheckFailed(f"{where}: refused: header field {what} is not ASCII.") from None


FILE_MODE, FOLDER_MODE = 0o644, 0o755


def _fixed_metadata(header: bytes, name: str, is_dir: bool, where: str) -> None:
    """Mode, owner, group, their names, mtime and device numbers exactly as the packer writes them."""
    expected = {"mode": FOLDER_MODE if is_dir else FILE_MODE, "uid": 0, "gid": 0, "mtime": 0}
    fields = {"mode": header[100:108], "uid": header[108:116], "gid": header[116:124], "mtime": header[136:148]}
    for what, field in fields.items():
        value = _octal(field, what, where)
        if value != expected[what]:
            raise CheckFailed(f"{where}: refusing member {name!r}: header field {what} is {value:o} (octal); a "
                              f"bundle's is {expected[what]:o}.")
    for what, field in (("uname", header[265:297]), ("gname", header[297:329])):
        if field.strip(b"\0"):
            raise CheckFailed(f"{where}: refusing member {name!r}: header field {what} is set; a bundle's is empty.")
    for what, field in (("devmajor", header[329:337]), ("devminor", header[337:345])):
        if field.strip(b"\0") and _octal(field, what, where) != 0:
            raise CheckFailed(f"{where}: refusing member {name!r}: header field {what} is set.")


def _body(stream, size: int, name: str, where: str):
    """A member's body from the stream in pieces; a stream that ends first is refused."""
    left = size
    while left:
        piece = stream.read(min(left, CHUNK))
        if not piece:
            raise CheckFailed(f"{where}: refused: member {name!r} is cut short.")
        left -= len(piece)
        yield piece


def read(stream, where: str, max_members: int, max_member_bytes: int, keep) -> list:
    """The members of the tar stream (`stream.read(n)`: at most n bytes, fewer only at its end) up to and with its
    end-of-archive block; what follows that block is the caller's to read. Every header is checked before its body
    is read; keep(name, is_dir, pieces) consumes the body's pieces and returns what the member holds."""
    members: list = []
    offset = 0
    while True:
        header = stream.read(BLOCK)
        if len(header) < BLOCK:
            raise CheckFailed(f"{where}: refused: the tar stream ends without an end-of-archive block.")
        if header == bytes(BLOCK):
            return members
        if len(members) >= max_members:
            raise CheckFailed(f"{where}: refused: more than {max_members} members (limit).")
        stored = _octal(header[148:156], "chksum", where)
        if stored != sum(header[:148]) + 8 * 32 + sum(header[156:]):
            raise CheckFailed(f"{where}: refused: a tar header's checksum does not match (at byte {offset}).")
        name = _text(header[0:100], "name", where)
        kind = header[156:157]
        if kind in KINDS:
            raise CheckFailed(f"{where}: refusing member {name!r}: a {KINDS[kind]} in a bundle (a bundle is "
                              "plain ustar: regular files in one folder).")
        if kind not in REGULAR and kind != DIRECTORY:
            raise CheckFailed(f"{where}: refusing member {name!r}: tar type {kind!r} is not a regular file.")
        if header[257:263] != b"ustar\0" or header[263:265] != b"00":
            raise CheckFailed(f"{where}: refusing member {name!r}: not a POSIX ustar header "
                              f"(magic {header[257:265]!r}; GNU and v7 headers are not accepted).")
        if header[345:500].strip(b"\0") or header[157:257].strip(b"\0"):
            raise CheckFailed(f"{where}: refusing member {name!r}: a ustar prefix or link name is set.")
        _fixed_metadata(header, name, kind == DIRECTORY, where)
        size = _octal(header[124:136], "size", where)
        if kind == DIRECTORY and size:
            raise CheckFailed(f"{where}: refusing member {name!r}: a folder with data.")
        if size > max_member_bytes:
            raise CheckFailed(f"{where}: refused: member {name!r} is {size} bytes (limit {max_member_bytes}).")
        pieces = _body(stream, size, name, where)
        members.append(Member(name, kind == DIRECTORY, keep(name, kind == DIRECTORY, pieces)))
        for _ in pieces:  # what keep left unread
            pass
        padding = -size % BLOCK
        if len(stream.read(padding)) < padding:
            raise CheckFailed(f"{where}: refused: member {name!r} is cut short.")
        offset += BLOCK + size + padding
