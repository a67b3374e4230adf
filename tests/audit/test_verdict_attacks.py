"""A reviewer's PASS that cannot be bought: each attack class of the reviewer-verdict issue, rebuilt.

The reviewer runs the README's audit with the repository's lock and a prepared cache; the
submitter re-packs the reference bundle with a matching SHA256SUMS (test_attacks.pack).
"""

import hashlib
import json
import random
import shutil
import subprocess
import sys
import tarfile

import pytest

from support.paths import LOCK, REPO
from support.bundles import CURRENT, forge_every_row, REFERENCE, TOP, audit, edited, members_of, pack, regenerate_card
from support.json_paths import set_at, string_paths


def _ustar_header(name: bytes, size: int, kind: bytes = b"0", magic: bytes = b"ustar\x0000") -> bytes:
    header = bytearray(512)
    header[0:len(name)] = name
    header[100:108] = b"0000644\0"
    header[108:116] = header[116:124] = b"0000000\0"
    header[124:136] = b"%011o\0" % size
    header[136:148] = b"00000000000\0"
    header[156:157] = kind
    header[257:265] = magic
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def _entry(name: bytes, body: bytes, kind: bytes = b"0", magic: bytes = b"ustar\x0000") -> bytes:
    return _ustar_header(name, len(body), kind, magic) + body + bytes(-len(body) % 512)


def _gnu_long_name_over_pax_path(forged_card: bytes) -> bytes:
    """[L top/zz-card.md][x path=top/CARD.md][file]: Python's tarfile sees zz-card.md, GNU tar a second CARD.md."""
    import gzip

    members = members_of(REFERENCE)
    members["zz-card.md"] = forged_card
    sums = "".join(f"{hashlib.sha256(body).hexdigest()}  {name}\n" for name, body in sorted(members.items())
                   if name != "SHA256SUMS").encode()
    members["SHA256SUMS"] = sums
    raw = b""
    for name, body in sorted(members.items()):
        if name == "zz-card.md":
            long_name = f"{TOP}/zz-card.md".encode() + b"\0"
            record = f"path={TOP}/CARD.md\n".encode()
            record = b"%d " % (len(record) + 3) + record
            raw += _entry(b"././@LongLink", long_name, b"L", b"ustar  \0")
            raw += _entry(b"PaxHeader", record, b"x")
        raw += _entry(f"{TOP}/{name}".encode(), body)
    return gzip.compress(raw + bytes(1024))


def test_a_gnu_long_name_over_a_pax_path_is_refused(tmp_path, capsys):
    bundle = tmp_path / "shadow.tar.gz"
    bundle.write_bytes(_gnu_long_name_over_pax_path(b"# Reproducibility card\naccuracy 63/64 = 0.9844\n"))
    with tarfile.open(bundle) as archive:  # what Python's reader alone would have seen: an extra, listed member
        assert f"{TOP}/zz-card.md" in archive.getnames()
    code, out = audit(capsys, "--bundle-file", bundle, "--arithmetic-only")
    assert code == 1, out
    assert "refusing member '././@LongLink': a GNU long-name header in a bundle (a bundle is plain ustar" in out


@pytest.mark.parametrize("magic, kind, message", [
    (b"ustar  \0", b"0", "not a POSIX ustar header"),
    (b"ustar\x0000", b"x", "a pax extended header in a bundle"),
    (b"ustar\x0000", b"g", "a pax global header in a bundle"),
    (b"ustar\x0000", b"K", "a GNU long-link header in a bundle"),
])
def test_every_extension_header_is_refused(tmp_path, capsys, magic, kind, message):
    import gzip

    bundle = tmp_path / "b.tar.gz"
    bundle.write_bytes(gzip.compress(_entry(f"{TOP}/run.json".encode(), b"{}", kind, magic) + bytes(1024)))
    code, out = audit(capsys, "--bundle-file", bundle, "--arithmetic-only")
    assert code == 1 and message in out, out


def test_what_the_audit_read_is_what_gnu_tar_unpacks(embedded_cache, full_run, tmp_path, capsys):
    """Every accepted bundle, unpacked by the system's tar, gives exactly the bytes the audit checked."""
    from sst2_audit.bundle.reading import read_members

    run = tmp_path / "run"
    shutil.copytree(full_run / "out", run)
    code, out = audit(capsys, "--out", run, "--cache", embedded_cache, "--structural", "--bundle", "--results", tmp_path)
    assert code == 4, out
    for bundle in (REFERENCE, tmp_path / "my-run.tar.gz"):
        top, members = read_members(bundle)
        target = tmp_path / f"x-{bundle.stem}"
        target.mkdir()
        subprocess.run(["tar", "-xzf", str(bundle), "-C", str(target)], check=True)
        unpacked = {p.name: p.read_bytes() for p in (target / top).iterdir()}
        assert [p.name for p in target.iterdir()] == [top]
        assert unpacked == members


def test_a_platform_claim_does_not_loosen_the_bound(embedded_cache, tmp_path, capsys):
    def claim(platform):
        platform["mode_in_effect"] = False
        platform["threads"] = 2
        platform["torch_cpu_capability"] = "AVX512"

    members = edited(forge_every_row(9e-5, claim), CURRENT)
    regenerate_card(members)
    pack(tmp_path / "claim.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "claim.tar.gz", "--cache", embedded_cache)
    assert code == 1, out
    assert "verdict: different (this machine runs the lock's numeric mode (its probe gives the pinned digest " \
           "c500a0487b6b): bit for bit required)" in out
    assert "run's platform (claimed):" in out  # printed as evidence, never believed


def test_another_cpu_claimed_and_scores_moved_by_2e_5_is_fail_where_the_probe_matches(embedded_cache, tmp_path, capsys):
    """Issue 27: the record claims an Intel CPU (and its own probe); every score moved by 2e-5, within the drift
    bound. This machine's probe gives the lock's pinned digest, so bits are required: FAIL, never drift."""
    def intel(platform):
        platform.update(cpu_vendor="GenuineIntel", cpu_model_name="Intel(R) Xeon(R) Processor", cpu_family="6",
                        cpu_model="167", probe_sha256="0721296c" + "0" * 56)

    members = edited(forge_every_row(2e-5, intel), CURRENT)
    regenerate_card(members)
    pack(tmp_path / "intel.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "intel.tar.gz", "--cache", embedded_cache)
    assert code == 1, out
    assert "scores: 128 of 128 differ" in out and "verdict: different (this machine runs the lock's numeric mode" in out
    assert out.splitlines()[0] == "VERDICT: FAIL (rescore (all rows, seed " + out.split("seed ", 1)[1].split(")", 1)[0] + ")); exit 1"


def test_a_schema_3_bundle_cannot_drop_what_its_schema_requires(tmp_path, capsys):
    def no_notes(record, members):
        record["lm_eval_notes"] = None

    members = edited(no_notes)
    regenerate_card(members)
    pack(tmp_path / "notes.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "notes.tar.gz", "--arithmetic-only")
    assert code == 1 and "run: lm_eval_notes (required by record schema 3): expected True, got False" in out, out
    for dropped in ("report.html", "CARD.md"):
        members = members_of(REFERENCE)
        del members[dropped]
        pack(tmp_path / "dropped.tar.gz", members)
        code, out = audit(capsys, "--bundle-file", tmp_path / "dropped.tar.gz", "--arithmetic-only")
        assert code == 1 and "refused: a bundle of record schema 3 holds exactly " in out and \
            f"missing {dropped}" in out, out


def test_a_schema_3_run_relabelled_as_schema_2_needs_the_explicit_option(tmp_path, capsys):
    members = members_of(REPO / "tests" / "data" / "v2-embedded-full-reference.tar.gz")
    record = json.loads(members["run.json"])
    for question in record["questions"]:  # forged 64/64, as far as the structure goes
        question["label"] = question["official_prediction"]
    members["run.json"] = json.dumps(record).encode()
    pack(tmp_path / "v2.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "v2.tar.gz", "--arithmetic-only")
    assert code == 1 and "record schema 2 is older than 3, the oldest this audit accepts by default" in out


@pytest.mark.parametrize("extra, message", [
    ({"README.md": b"all checks passed\n"}, "unexpected 'README.md'"),
    ({"index.html": b"<h1>PASS</h1>"}, "unexpected 'index.html'"),
    ({"failure.json": b"{}"}, "unexpected 'failure.json'"),
    ({"card.md": b"# forged"}, "members 'CARD.md' and 'card.md' differ only in case"),
])
def test_a_bundle_holds_exactly_its_schema_members(tmp_path, capsys, extra, message):
    members = members_of(REFERENCE)
    members.update(extra)
    pack(tmp_path / "extra.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "extra.tar.gz", "--arithmetic-only")
    assert code == 1 and message in out, out


def _json_member(name, change):
    def edit(record, members):
        value = json.loads(members[name])
        change(value)
        members[name] = json.dumps(value).encode()
    return edit


@pytest.mark.parametrize("edit, message", [
    (_json_member("environment.json", lambda e: e.update(note="verified by the reviewer")), "environment.json: fields"),
    (lambda r, m: r["versions"].update(sst2_audit="9.9"), "versions: packages (those sst2-audit records)"),
    (_json_member("manifest.json", lambda e: e.update(verdict="PASS")), "bundled manifest: fields"),
    (_json_member("lm_eval_results.json", lambda e: e["results"].update(rte={"acc,none": 1.0})),
     "lm-eval results: results (tasks): expected ['sst2'], got ['rte', 'sst2']"),
    (_json_member("lm_eval_results.json", lambda e: e.update({"n-samples": [1, 2]})),
     "b.tar.gz: lm_eval_results.json: field n-samples.sst2 is missing."),
    (lambda r, m: r["third_party_log"].update({"lm-eval: an already-initialized model was passed": -3}),
     "third_party_log: 'lm-eval: an already-initialized model was passed' (a known message, counted at least once)"),
    (lambda r, m: r["third_party_log"].update({"<script>alert(1)</script>": 1}), "third_party_log: '<script>"),
])
def test_every_field_is_checked_or_refused(tmp_path, capsys, edit, message):
    members = edited(edit)
    regenerate_card(members)
    pack(tmp_path / "b.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == (2 if message.endswith(".") else 1) and message in out, out


def _forged_lock(change) -> dict:
    members = members_of(REFERENCE)
    lock = json.loads(members["resources.lock.json"])
    change(lock)
    members["resources.lock.json"] = json.dumps(lock, indent=2).encode()
    record = json.loads(members["run.json"])
    record["lock_sha256"] = hashlib.sha256(members["resources.lock.json"]).hexdigest()
    members["run.json"] = json.dumps(record, indent=2).encode()
    regenerate_card(members)
    return members


@pytest.mark.parametrize("change, path", [
    (lambda lock: lock.update(groups={}), "bundled lock: groups: expected '<absent>'"),
    (lambda lock: lock["profiles"]["embedded-rte"].update(description="x"), "bundled lock: profiles.embedded-rte.description"),
    (lambda lock: lock["evaluator"].update(note="x"), "bundled lock: evaluator.note"),
    (lambda lock: lock["evaluator"].update(task="rte", task_yaml=lock["evaluator"]["tasks"]["rte"]),
     "bundled lock: evaluator.task: expected 'sst2', got 'rte'"),
])
def test_the_whole_bundled_lock_must_be_the_reviewers(tmp_path, capsys, change, path):
    pack(tmp_path / "lock.tar.gz", _forged_lock(change))
    code, out = audit(capsys, "--bundle-file", tmp_path / "lock.tar.gz", "--arithmetic-only")
    assert code == 1 and "lock: FAIL" in out and path in out, out


def test_a_bundled_lock_with_a_key_no_lock_has_is_not_a_lock(tmp_path, capsys):
    """A key outside the lock's own (a top-level `notice` a person might read as a claim) makes the carried file
    no lock at all: bad input, exit 2 naming the key, as any carried lock that does not parse."""
    pack(tmp_path / "lock.tar.gz", _forged_lock(lambda lock: lock.update(notice="independently verified")))
    code, out = audit(capsys, "--bundle-file", tmp_path / "lock.tar.gz", "--arithmetic-only")
    assert code == 2 and "resources.lock.json: unknown top-level key(s) 'notice'" in out, out


CONTROL = ["\x1b[2J", "\x1b]0;PASS\x07", "\r", "\x00", "\u202e", "|", "<b>x</b>", "[a](javascript:x)", "`", "\n# PASS"]


def test_fuzz_control_characters_and_markup_never_reach_terminal_card_or_page(tmp_path, capsys):
    """Every string field of run.json and lm-eval's results, one at a time, gets control characters
    and markup; whatever the verdict, the terminal sees no raw control character, and the card and page
    regenerated from records that pass carry none either."""
    from sst2_audit.formats import records
    from sst2_audit.pages import card
    from sst2_audit.pages.html_report import render
    from sst2_audit.util.errors import InputError
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.spec import spec_for

    base = members_of(REFERENCE)
    rng = random.Random(15)
    lock = load_lock(LOCK)
    targets = [("run.json", p) for p in string_paths(json.loads(base["run.json"]))]
    targets += [("lm_eval_results.json", p) for p in string_paths(json.loads(base["lm_eval_results.json"]))]
    rng.shuffle(targets)
    for member, path in targets[:150]:
        members = dict(base)
        value = json.loads(members[member])
        set_at(value, path, rng.choice(CONTROL) + "x" + rng.choice(CONTROL))
        members[member] = json.dumps(value).encode()
        try:
            record = records.from_dict(records.RunRecord, json.loads(members["run.json"]), "run.json")
            pages = [render(record, lock, spec_for(lock, "sst2"), written_schema=schema) for schema in (4, 5)]
            text = "".join(card.render(record, lock, schema) for schema in (4, 5))
        except (InputError, ArithmeticError, LookupError, TypeError, ValueError):
            pages, text = [], ""  # a record today's code cannot render is refused by the audit; checked below
        for page in pages:  # the pages of schema-4 runs and today's
            for raw in ("\x1b", "\x00", "\x07", "\r", "\u202e"):
                assert raw not in text and raw not in page, (member, path)
            assert "<b>x</b>" not in page and "<b>x</b>" not in text
        pack(tmp_path / "f.tar.gz", members)
        code, out = audit(capsys, "--bundle-file", tmp_path / "f.tar.gz", "--arithmetic-only")
        assert code in (1, 2, 4) and "Traceback" not in out, (member, path, out[-500:])
        assert not any(c in out for c in ("\x1b", "\x00", "\x07", "\r", "\u202e")), (member, path)


def test_a_member_name_with_control_characters_is_shown_escaped(tmp_path, capsys):
    members = members_of(REFERENCE)
    members["\x1b[31mrun.json"] = b"{}"
    pack(tmp_path / "n.tar.gz", members, sums=False)
    code, out = audit(capsys, "--bundle-file", tmp_path / "n.tar.gz", "--arithmetic-only")
    assert code == 1 and "\x1b" not in out and "\\x1b[31mrun.json" in out, out


def test_id_lists_are_bounded_by_the_lock_before_any_per_id_work(tmp_path, capsys):
    def repeat(record, members):
        record["split"]["scored_ids"] = [record["split"]["dev_ids"][0]] * 1_000_000

    pack(tmp_path / "ids.tar.gz", edited(repeat))
    code, out = audit(capsys, "--bundle-file", tmp_path / "ids.tar.gz", "--arithmetic-only")
    assert code == 2 and "split.scored_ids: 1000000 entries, far more than the 64 of the reviewer's lock" in out


def test_oversized_and_mistyped_inputs_exit_2_or_1_never_3(tmp_path, capsys):
    members = members_of(REFERENCE)
    members["SHA256SUMS"] = members["SHA256SUMS"] + b"x" * (1 << 20)
    pack(tmp_path / "sums.tar.gz", members, sums=False)
    code, out = audit(capsys, "--bundle-file", tmp_path / "sums.tar.gz", "--arithmetic-only")
    assert code == 1 and "SHA256SUMS: 1049234 bytes, more than the" in out, out
    for manifest in (b'"a string"', b"[1, 2]"):
        members = members_of(REFERENCE)
        members["manifest.json"] = manifest
        pack(tmp_path / "m.tar.gz", members)
        code, out = audit(capsys, "--bundle-file", tmp_path / "m.tar.gz", "--arithmetic-only")
        assert code == 2 and "manifest.json: expected a JSON object" in out, out

    def huge(record, members):
        record["settings"]["note"] = "x" * (15 << 20)

    pack(tmp_path / "huge.tar.gz", edited(huge))
    code, out = audit(capsys, "--bundle-file", tmp_path / "huge.tar.gz", "--arithmetic-only")
    assert code in (1, 2) and len(out) < 20_000, len(out)
    members = members_of(REFERENCE)
    lock = json.loads(members["resources.lock.json"])
    lock["run_settings"]["threads"] = 2 ** 31
    members["resources.lock.json"] = json.dumps(lock).encode()
    pack(tmp_path / "t.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "t.tar.gz", "--trust-bundle-lock", "--arithmetic-only")
    assert code == 2 and "run_settings.threads must be an integer within 0..1024, got '2147483648'" in out, out


def test_two_bundle_writers_of_one_name_cannot_both_succeed(full_run, embedded_cache, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(full_run / "out", run)
    results = tmp_path / "results"
    processes = [subprocess.Popen(
        [sys.executable, str(REPO / "audit.py"),
         "--out", str(run), "--cache", str(embedded_cache), "--structural", "--bundle", "--results", str(results)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO) for _ in range(2)]
    codes = sorted(p.wait() for p in processes)
    assert codes == [2, 4], codes
    assert [p.name for p in results.iterdir()] == ["my-run.tar.gz"]


def test_compare_is_bounded_like_the_audit(tmp_path, capsys):
    def huge_choice(record, members):
        record["questions"][0]["official_prediction"] = 10 ** 9

    pack(tmp_path / "c.tar.gz", edited(huge_choice))
    code, out = audit(capsys, "--compare", REFERENCE, tmp_path / "c.tar.gz")
    assert code == 0 and "prediction" in out and "choice 1000000000" in out, out[-2000:]
