"""Bundles are read like a package installer reads a package; no input escapes as a traceback.

The fuzz tests feed thousands of seeded mutations of a real run record and of the reference
bundle's bytes to audit.py in this process: the exit code is 0, 1 or 2, never 3 (our bug).
"""

import gzip
import io
import json
import os
import random
import subprocess
import sys
import tarfile

import pytest

from support.paths import REPO
from support.processes import one_paragraph
from sst2_audit.cli import audit_main
from support.bundles import REFERENCE, TOP, audit, members_of, pack


def test_a_2mb_gzip_bomb_is_refused_fast_and_small(tmp_path):
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(_zeros_gzip(2 << 30))
    assert bomb.stat().st_size < 2.5e6
    code, peak, done = _audited_in_a_process("--bundle-file", bomb, "--arithmetic-only")
    assert done.stdout.splitlines() == [done.stdout.splitlines()[0], f"{code} {peak}"], done.stdout
    assert done.stdout.startswith("VERDICT: FAIL (bundle SHA256SUMS and members): the bundle was refused"), done.stdout
    # what stopped the input is the limit named below, not the clock: no wall-clock bound here
    assert code == 1 and peak < 200e6, done.stdout
    assert f"{bomb}: refused: unpacks to more than 33554432 bytes (limit)." in one_paragraph(done.stderr)


def _audited_in_a_process(*args, env: dict | None = None) -> tuple:
    """audit_main(args) in a new interpreter: (its exit code, its peak memory in bytes, the finished process), the
    exit code and the peak its last line of output. VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and
    exec from this (large) test process."""
    probe = ("import re, sys; sys.path.insert(0, %r); from sst2_audit.cli import audit_main; code = audit_main(%r); "
             "hwm = int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024; "
             "print(code, hwm)" % (str(REPO), [str(arg) for arg in args]))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, env=env)
    code, peak = done.stdout.splitlines()[-1].split()
    return int(code), int(peak), done


def test_an_adopted_bundle_is_read_as_a_stream_its_members_on_disk_not_in_memory(tmp_path):
    """An adopted bundle may hold an adopted.json of up to 256 MiB (a task of many rows): it is inflated and written
    a piece at a time. A 201 MB member of zeros (a 200 KB file) is refused for SHA256SUMS with the process's peak
    memory far under the member's size, and nothing it wrote is left."""
    bomb = tmp_path / "big.tar.gz"
    info = tarfile.TarInfo("big/adopted.json")
    info.size = 12 << 24  # 201 MB
    with gzip.GzipFile(bomb, mode="wb", compresslevel=9) as writer:
        writer.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(info.size >> 24):
            writer.write(bytes(1 << 24))
        writer.write(bytes(1024))
    assert bomb.stat().st_size < 1e6
    scratch = tmp_path / "tmp"  # the audit's temporary folders: nothing left in it after
    scratch.mkdir()
    code, peak, done = _audited_in_a_process("--bundle-file", bomb, env={**os.environ, "TMPDIR": str(scratch)})
    assert code == 1 and peak < 150e6, done.stdout + done.stderr
    assert "SHA256SUMS is missing from the bundle" in one_paragraph(done.stdout + done.stderr), done.stdout
    assert not list(scratch.iterdir())


def _zeros_gzip(size: int) -> bytes:
    """gzip of `size` zero bytes, streamed (never the whole input in memory)."""
    out = io.BytesIO()
    block = b"\0" * (1 << 24)
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=9) as writer:
        for _ in range(size // len(block)):
            writer.write(block)
    return out.getvalue()


def _tar(entries) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for info, body in entries:
            archive.addfile(info, io.BytesIO(body) if body is not None else None)
    return raw.getvalue()


def _file(name: str, body: bytes):
    info = tarfile.TarInfo(name)
    info.size = len(body)
    return info, body


def _reference_entries() -> list:
    return [_file(f"{TOP}/{name}", body) for name, body in sorted(members_of(REFERENCE).items())]


def _sparse_member() -> bytes:
    data = bytearray(_tar([_file(f"{TOP}/run.json", b"{}")]))
    data[156:157] = b"S"  # GNU sparse type flag; the header checksum is fixed below
    header = bytes(data[:512])
    checksum = sum(header[:148]) + 8 * 32 + sum(header[156:512])
    data[148:156] = b"%06o\0 " % checksum
    return bytes(data)


def _with_directory_named_sums() -> bytes:
    info = tarfile.TarInfo(f"{TOP}/SHA256SUMS")
    info.type, info.mode = tarfile.DIRTYPE, 0o755  # a folder's own mode: refused for what it is, not its mode
    return gzip.compress(_tar(_reference_entries()[:-1] + [(info, None)]))


CASES = {
    "duplicate member": (lambda: gzip.compress(_tar(_reference_entries() + [_file(f"{TOP}/CARD.md", b"# forged")])),
                         1, "refused: member 'embedded-full-reference/CARD.md' appears twice."),
    "too many members": (lambda: gzip.compress(_tar([_file(f"{TOP}/f{i}", b"x") for i in range(40)])),
                         1, "refused: more than 16 members (limit)."),
    "sparse member": (lambda: gzip.compress(_sparse_member()), 1, "a GNU sparse file in a bundle"),
    "trailing data": (lambda: REFERENCE.read_bytes() + b"garbage", 1, "bytes of trailing data after the gzip stream"),
    "bad crc": (lambda: REFERENCE.read_bytes()[:-8] + b"\0\0\0\0" + REFERENCE.read_bytes()[-4:], 1,
                "refused: the gzip stream is corrupt"),
    "truncated gzip": (lambda: REFERENCE.read_bytes()[:-100], 2, "the gzip stream is truncated."),
    "garbage after the tar end": (lambda: gzip.compress(_tar(_reference_entries()) + b"CARD.md forged"), 1,
                                  "after the tar archive's end are not padding."),
    "directory named SHA256SUMS": (_with_directory_named_sums, 1, "a bundle has no sub-folders"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_malformed_bundles_are_refused(tmp_path, capsys, case):
    build, code, message = CASES[case]
    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(build())
    got, out = audit(capsys, "--bundle-file", bundle, "--arithmetic-only")
    assert got == code, out
    assert message in one_paragraph(out), out


@pytest.mark.parametrize("line, message", [
    ("0" * 64 + "  ../../etc/passwd", "SHA256SUMS:1: malformed line"),
    ("0" * 64 + "  /etc/passwd", "SHA256SUMS:1: malformed line"),
    ("0" * 64 + "  missing.json", "missing.json: listed in SHA256SUMS but missing"),
])
def test_sha256sums_lists_only_plain_names_of_members(tmp_path, capsys, line, message):
    members = members_of(REFERENCE)
    members["SHA256SUMS"] = (line + "\n").encode() + members["SHA256SUMS"]
    pack(tmp_path / "b.tar.gz", members, sums=False)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 1 and message in one_paragraph(out)


def _mutate(value, rng: random.Random):
    """One random change somewhere inside a JSON value."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        if rng.random() < 0.1:
            return {k: v for k, v in value.items() if k != key}
        return dict(value, **{key: _mutate(value[key], rng)})
    if isinstance(value, list) and value and rng.random() < 0.8:
        position = rng.randrange(len(value))
        if rng.random() < 0.1:
            return value[:position] + value[position + 1:]
        return value[:position] + [_mutate(value[position], rng)] + value[position + 1:]
    return rng.choice([None, True, 0, -1, 1.5, -0.0, 10 ** 30, "", "x", "../..", [], {}, [1, 2], {"a": 1},
                       float(rng.randrange(-10, 10)), rng.randrange(-3, 300), "\x1b[2J"])


def test_fuzz_run_records_never_escape_as_a_traceback(full_run, tmp_path, capsys):
    run = tmp_path / "run"
    import shutil

    shutil.copytree(full_run / "out", run)
    original = json.loads((run / "run.json").read_text())
    samples = (run / "lm_eval_samples.public.jsonl").read_text().splitlines()
    rng = random.Random(94)
    codes = {}
    for number in range(1500):
        target = rng.random()
        if target < 0.7:
            (run / "run.json").write_text(json.dumps(_mutate(original, rng)))
        else:
            (run / "run.json").write_text(json.dumps(original))
            line = rng.randrange(len(samples))
            mutated = samples[:line] + [json.dumps(_mutate(json.loads(samples[line]), rng))] + samples[line + 1:]
            (run / "lm_eval_samples.public.jsonl").write_text("\n".join(mutated) + "\n")
        code = audit_main(["--out", str(run), "--arithmetic-only"])
        out = capsys.readouterr()
        assert code in (1, 2, 4) and "Traceback" not in out.err, (number, code, out.err[-2000:])
        codes[code] = codes.get(code, 0) + 1
        (run / "lm_eval_samples.public.jsonl").write_text("\n".join(samples) + "\n")
    assert codes.get(1, 0) > 100 and codes.get(2, 0) > 100, codes


def test_fuzz_bundle_bytes_never_escape_as_a_traceback(tmp_path, capsys):
    codes = _fuzz_bytes(REFERENCE.read_bytes(), random.Random(4084), 600, tmp_path, capsys)
    assert codes.get(1, 0) > 100, codes


def _fuzz_bytes(reference: bytes, rng, count: int, tmp_path, capsys, *options, head: int | None = None) -> dict:
    """Mutate a bundle's bytes (or its tar stream, re-compressed) at random, cut some short, and audit each in
    this process: exit 1, 2 or 4, never 3 and never a traceback. `head`: half the changes within its first bytes."""
    tar = gzip.decompress(reference)
    codes = {}
    for number in range(count):
        data = bytearray(tar if rng.random() < 0.7 else reference)
        for _ in range(rng.randrange(1, 8)):
            near = head is not None and rng.random() < 0.5
            position = rng.randrange(min(len(data), head) if near else len(data))
            data[position] = rng.randrange(256)
        if rng.random() < 0.3:
            data = data[: rng.randrange(len(data))]
        if len(data) == len(tar) or data[:2] != b"\x1f\x8b":
            data = gzip.compress(bytes(data))
        bundle = tmp_path / f"f{number % 2}.tar.gz"
        bundle.write_bytes(bytes(data))
        code = audit_main([*map(str, options), "--bundle-file", str(bundle), "--arithmetic-only"])
        out = capsys.readouterr()
        assert code in (1, 2, 4) and "Traceback" not in out.err, (number, code, out.err[-2000:])
        codes[code] = codes.get(code, 0) + 1
    return codes


@pytest.mark.parametrize("count, size, message", [
    (100_000, 0, "more than 16 members (limit)"),  # 51 MB of headers: refused at the 17th, read as a stream
    (30_000, 0, "more than 16 members (limit)"),
    (3, 15 << 20, "unpacks to more than 33554432 bytes (limit)"),  # each member under its 16 MiB, 45 MiB in all
])
def test_many_tiny_members_are_refused_by_a_limit(tmp_path, capsys, count, size, message):
    entries = [_file(f"{TOP}/m{number}", bytes(size)) for number in range(count)]
    bundle = tmp_path / "many.tar.gz"
    bundle.write_bytes(gzip.compress(_tar(entries), compresslevel=9))
    code, out = audit(capsys, "--bundle-file", bundle, "--arithmetic-only")
    # the limit named is the one that stopped reading: headers are read lazily, one at a time
    assert code == 1 and f"{bundle}: refused: {message}." in one_paragraph(out), out


def test_fuzz_schema_2_records_and_locks_through_the_upgrade_readers(tmp_path, capsys):
    """Records and locks written before tasks were data go through the 2 -> 3 upgraders, and today's lock
    through its reader: mutations end in exit 0, 1 or 2 (records), or an InputError (locks), never a traceback."""
    from sst2_audit.util.errors import InputError
    from sst2_audit.formats.lock import lock_from_bytes

    members = members_of(REPO / "tests" / "data" / "v2-embedded-full-reference.tar.gz")
    run = tmp_path / "run"
    run.mkdir()
    for name in ("run.json", "lm_eval_results.json", "lm_eval_samples.public.jsonl", "environment.json"):
        (run / name).write_bytes(members[name])
    original = json.loads(members["run.json"])
    lock, current = json.loads(members["resources.lock.json"]), json.loads((REPO / "resources.lock.json").read_text())
    assert original["schema_version"] == 2 and lock["schema_version"] == 2 and current["schema_version"] == 3
    rng = random.Random(2)
    codes, outcomes = {}, {"read": 0, "refused": 0}
    for number in range(500):
        (run / "run.json").write_text(json.dumps(_mutate(original, rng)))
        code = audit_main(["--out", str(run), "--arithmetic-only", "--accept-old-schema"])
        out = capsys.readouterr()
        assert code in (1, 2, 4) and "Traceback" not in out.err, (number, code, out.err[-2000:])
        codes[code] = codes.get(code, 0) + 1
        for raw in (lock, current):  # the schema-2 lock through its upgrader, and today's
            try:
                lock_from_bytes(json.dumps(_mutate(raw, rng)).encode(), tmp_path / "lock.json")
                outcomes["read"] += 1
            except InputError:
                outcomes["refused"] += 1
    assert codes.get(1, 0) > 50 and codes.get(2, 0) > 50, codes
    assert outcomes["read"] > 50 and outcomes["refused"] > 50, outcomes


def test_fuzz_manifests_are_read_or_refused_never_a_traceback(embedded_cache, tmp_path):
    """The cache manifest through the strict reader and the lock match: every mutation is read (and
    then matched or refused by the lock) or refused as input, never anything else."""
    from sst2_audit.util.errors import CheckFailed, InputError
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.formats.manifest import read_manifest, require_matching

    original = json.loads((embedded_cache / "manifest.json").read_text())
    lock = load_lock(REPO / "resources.lock.json")
    rng = random.Random(4)
    outcomes = {"matched": 0, "refused": 0}
    for number in range(400):
        (tmp_path / "manifest.json").write_text(json.dumps(_mutate(original, rng)))
        try:
            require_matching(read_manifest(tmp_path), tmp_path, lock, lock.profile("embedded"))
            outcomes["matched"] += 1
        except (InputError, CheckFailed):
            outcomes["refused"] += 1
    assert outcomes["matched"] > 5 and outcomes["refused"] > 300, outcomes


def test_fuzz_group_bundle_bytes_never_escape_as_a_traceback(tmp_path, capsys):
    """A group bundle (a group.json naming the demo lock's inverse-scaling group, GROUP.md, and the reference run
    bundle under each subtask's name), its bytes mutated: read or refused, exit 1 or 2 (or 4), never 3."""
    import hashlib

    from support.paths import DEMOS
    from sst2_audit.formats import records
    from sst2_audit.bundle import group as group_bundle

    tasks = [("inverse_scaling_neqa", "embedded-inverse-scaling-neqa"),
             ("inverse_scaling_quote_repetition", "embedded-inverse-scaling-quote-repetition"),
             ("inverse_scaling_redefine_math", "embedded-inverse-scaling-redefine-math")]
    run_sha = hashlib.sha256(members_of(REFERENCE)["run.json"]).hexdigest()
    record = records.GroupRecord(
        run_name="g", group_name="inverse-scaling-demo", group="inverse_scaling_mc", demo=True, notice="demo",
        lock_sha256="0" * 64, group_yaml_files={}, aggregate=[], leaves_installed=3, rows_per_subtask=4,
        members=[records.GroupMember(t, p, t, run_sha, 4, {}, {}) for t, p in tasks], official={}, independent={})
    members = {"group.json": json.dumps(records.to_dict(record)).encode(), "GROUP.md": b"# Group\n",
               **{group_bundle.subtask_member(t): REFERENCE.read_bytes() for t, _ in tasks}}
    pack(tmp_path / "group.tar.gz", members, top="g")
    reference = (tmp_path / "group.tar.gz").read_bytes()
    assert group_bundle.is_group_bundle(tmp_path / "group.tar.gz")
    code, out = audit(capsys, "--lock", DEMOS, "--bundle-file", tmp_path / "group.tar.gz", "--arithmetic-only")
    assert code == 1 and "VERDICT: FAIL (" in out and "subtask inverse_scaling_neqa: VERDICT: FAIL" in out, out
    codes = _fuzz_bytes(reference, random.Random(19), 150, tmp_path, capsys, "--lock", DEMOS, head=4096)
    assert codes.get(1, 0) > 50, codes


# Issue 28: header fields a reader ignored reached the reviewer's disk through `tar -xzf`. Each is generated
# onto an otherwise genuine bundle (SHA256SUMS matching): refused with the field named, exit 1.
METADATA = {
    "setuid, world-writable": (lambda info: setattr(info, "mode", 0o6777), "header field mode is 6777 (octal)"),
    "world-writable": (lambda info: setattr(info, "mode", 0o666), "header field mode is 666 (octal)"),
    "executable": (lambda info: setattr(info, "mode", 0o755), "header field mode is 755 (octal)"),
    "owner": (lambda info: setattr(info, "uid", 1000), "header field uid is 1750 (octal)"),
    "group": (lambda info: setattr(info, "gid", 27), "header field gid is 33 (octal)"),
    "owner name with an escape": (lambda info: setattr(info, "uname", "\x1b[31mroot"), "header field uname is set"),
    "group name": (lambda info: setattr(info, "gname", "wheel"), "header field gname is set"),
    "mtime": (lambda info: setattr(info, "mtime", 1_700_000_000), "header field mtime is"),
}


@pytest.mark.parametrize("case", sorted(METADATA))
def test_tar_metadata_other_than_the_packers_is_refused(tmp_path, capsys, case):
    change, message = METADATA[case]
    entries = _reference_entries()
    rng = random.Random(case)
    for info, _ in rng.sample(entries, 2):  # on two members drawn at random
        change(info)
    bundle = tmp_path / "meta.tar.gz"
    bundle.write_bytes(gzip.compress(_tar(entries)))
    code, out = audit(capsys, "--bundle-file", bundle, "--arithmetic-only")
    assert code == 1 and message in out, out
    assert "\x1b" not in out


def test_a_non_octal_mtime_is_refused_like_tar_refuses_it(tmp_path, capsys):
    data = bytearray(_tar(_reference_entries()))
    data[136:148] = b"99999999999\0"  # not octal: Python's tarfile and GNU tar refuse the archive
    data[148:156] = b"        "
    data[148:155] = f"{sum(data[:512]):06o}\0".encode()
    (tmp_path / "b.tar.gz").write_bytes(gzip.compress(bytes(data)))
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 1 and "header field mtime is not a plain octal number" in out, out


@pytest.mark.parametrize("top", ["--to-command=touch x", "a\nVERDICT: PASS", "\x1b]0;x\x07", "-rf", ".hidden", "a b"])
def test_a_top_folder_that_is_not_a_safe_run_name_is_refused(tmp_path, capsys, top):
    members = members_of(REFERENCE)
    pack(tmp_path / "top.tar.gz", members, top=top)
    code, out = audit(capsys, "--bundle-file", tmp_path / "top.tar.gz", "--arithmetic-only")
    assert code == 1 and "is not a safe run name" in out, out
    assert not any(line.startswith("VERDICT: PASS") for line in out.splitlines())
    assert "\x1b" not in out and "\x07" not in out


def test_the_packer_writes_exactly_the_fixed_metadata(full_run, embedded_cache, tmp_path):
    """What --bundle writes is what the reader demands (and a file system gets 0644 files, no owner)."""
    done = subprocess.run([sys.executable, str(REPO / "audit.py"), "--out", str(full_run / "out"), "--cache",
                           str(embedded_cache), "--structural", "--bundle", "--results", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 4, done.stdout + done.stderr
    with tarfile.open(tmp_path / "my-run.tar.gz") as archive:
        for member in archive.getmembers():
            assert (member.mode, member.uid, member.gid, member.uname, member.gname, member.mtime) == \
                (0o644, 0, 0, "", "", 0), member.name
            assert member.isfile() and member.name.startswith("my-run/")


def test_fuzz_adopted_bundle_bytes_never_escape_as_a_traceback(plain, tmp_path, capsys, monkeypatch):
    """An adopted bundle is read by the streamed reader that writes its members to disk as they come: 240 mutations of
    a real one, each audited with the reviewer's lock and cache (structural: no model): its gzip or tar bytes changed
    (some cut short), or a member's bytes changed and SHA256SUMS made to match, as a forger packs. Each exit 1, 2 or
    4 (never 3, never a traceback; never 4 for a changed lock, which the record names by its sha256), and nothing a
    refused one wrote is left in the scratch folder. (A changed byte of a field nothing reads, such as the CPU
    flags lm-eval logs, is the submitter's claim as it was in their file: exit 4.)"""
    from support.paths import LOCK
    from support.plain_runs import adopt

    done = adopt(plain, plain / "sorted", "--run-name", "fz", "--structural", "--bundle", "--results",
                 tmp_path / "results", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    original = tmp_path / "results" / "fz.tar.gz"
    reference, members = original.read_bytes(), members_of(original)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    common = ["--lock", str(plain / LOCK.name), "--cache", str(plain / "cache"), "--structural"]
    assert audit_main([*common, "--bundle-file", str(original)]) == 4
    capsys.readouterr()
    # the bundle's lock and manifest are held to adopted.json, each named where it differs
    manifest = json.loads(members["manifest.json"])
    manifest["files"][0]["sha256"] = "0" * 64
    for name, body, field in (("resources.lock.json", members["resources.lock.json"] + b"\n",
                               "resources.lock.json: sha256 (adopted.json's lock_sha256): expected"),
                              ("manifest.json", json.dumps(manifest).encode(),
                               "manifest.json: files (adopted.json's resources: path, role, sha256, pin): expected")):
        pack(tmp_path / "edited.tar.gz", dict(members, **{name: body}), top="fz")
        code = audit_main([*common, "--bundle-file", str(tmp_path / "edited.tar.gz")])
        out = capsys.readouterr().out
        assert code == 1 and out.startswith("VERDICT: FAIL (bundle lock and manifest)") and field in out, out
    rng, tar, codes = random.Random(6258), gzip.decompress(reference), {}
    for number in range(240):
        bundle = tmp_path / f"f{number % 2}.tar.gz"
        if number % 3 == 0:  # a member changed, SHA256SUMS matching it
            name = rng.choice(sorted(set(members) - {"SHA256SUMS"}))
            body = bytearray(members[name])
            for _ in range(rng.randrange(1, 4)):
                body[rng.randrange(len(body))] = rng.choice(b'0123456789",:{}[] \\ex')
            pack(bundle, dict(members, **{name: bytes(body)}), top="fz")
            changed = bytes(body) != members[name]
        else:
            data = bytearray(tar if rng.random() < 0.7 else reference)
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(min(len(data), 4096) if rng.random() < 0.5 else len(data))] = rng.randrange(256)
            if rng.random() < 0.3:
                data = data[: rng.randrange(len(data))]
            bundle.write_bytes(bytes(data) if data[:2] == b"\x1f\x8b" else gzip.compress(bytes(data)))
            changed, name = True, ""
        code = audit_main([*common, "--bundle-file", str(bundle)])
        out = capsys.readouterr()
        assert code in (1, 2, 4) and "Traceback" not in out.err, (number, code, out.out[-2000:], out.err[-2000:])
        assert code != 4 or not changed or name != "resources.lock.json", (number, out.out[-2000:])
        assert not list(scratch.iterdir()), number
        codes[code] = codes.get(code, 0) + 1
    assert codes.get(1, 0) > 100 and codes.get(2, 0) > 10, codes
