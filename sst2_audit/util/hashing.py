"""Content hashes: sha256 for everything we pin, git blob sha1 for the hub's small files."""

import hashlib
import json
from pathlib import Path

CHUNK = 1 << 20


class Cancelled(Exception):
    """A file's hash stopped by its caller, who no longer wants it (stop set): nothing was verified."""


def _hex_of_file(digest, path: Path, stop=None) -> str:
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            if stop is not None and stop.is_set():
                raise Cancelled(str(path))
            digest.update(block)
    return digest.hexdigest()


def sha256_file(path: Path, stop=None) -> str:
    """stop: a threading.Event; once it is set, the hash stops at its next megabyte and raises Cancelled."""
    return _hex_of_file(hashlib.sha256(), path, stop)


def git_blob_sha1(path: Path) -> str:
    """The id git (and so the hub's ETag for non-LFS files) gives a file's content."""
    return _hex_of_file(hashlib.sha1(f"blob {Path(path).stat().st_size}\0".encode()), path)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tokens_hash(token_lists) -> str:
    """The sha256 of token id lists' canonical JSON: how records, and lighteval's logged tokens, are compared."""
    return sha256_text(canonical_json([list(ids) for ids in token_lists]))
