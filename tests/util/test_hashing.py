"""util/hashing: a file's sha256, and the stop that ends a hash nobody wants any more (adopt hashes the model
beside the record levels and stops when one fails)."""

import hashlib
import threading

import pytest

from sst2_audit.util.hashing import CHUNK, Cancelled, sha256_file


def test_a_file_s_hash_is_hashlib_s_and_a_set_stop_ends_it_before_its_next_megabyte(tmp_path):
    path = tmp_path / "three-chunks.bin"
    data = bytes(range(256)) * (3 * CHUNK // 256) + b"tail"
    path.write_bytes(data)
    stop = threading.Event()
    assert sha256_file(path) == sha256_file(path, stop) == hashlib.sha256(data).hexdigest()
    stop.set()
    with pytest.raises(Cancelled, match="three-chunks.bin"):
        sha256_file(path, stop)
