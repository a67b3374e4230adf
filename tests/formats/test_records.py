"""The one record schema and the atomic writer every record goes through."""

import json
import os

import pytest

from sst2_audit.util import atomic
from sst2_audit.formats import records
from sst2_audit.util.errors import InputError


def test_atomic_write_never_overwrites_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "run.json"
    atomic.write_json(target, {"a": 1})
    with pytest.raises(InputError, match="refusing to overwrite an existing file"):
        atomic.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 1}
    assert sorted(os.listdir(tmp_path)) == ["run.json"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)


def test_an_interrupted_write_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "lock.json"
    atomic.write_json(target, {"kept": True})

    def interrupted(fd):  # the process is stopped after the bytes are written, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_json(target, {"new": True}, overwrite=True)
    assert json.loads(target.read_text()) == {"kept": True}
    assert sorted(os.listdir(tmp_path)) == ["lock.json"]


def _value(draw, depth: int = 0):
    kind = draw.random()
    if depth > 3 or kind < 0.35:
        return draw.choice([0, -1, 2.5, -0.0, 1e300, 10**40, "", "\u00e9\u2028\"\\", None, True, False, "x" * 70000,
                            float("nan"), float("inf"), -float("inf"), 5e-324, "\x00\x1f\t", "\U0001f600"])
    if kind < 0.65:
        items = [_value(draw, depth + 1) for _ in range(draw.randrange(5))]
        return tuple(items) if draw.random() < 0.2 else items
    if draw.random() < 0.15:  # keys json turns into text: one kind a dict (mixed kinds do not sort)
        keys = draw.choice([[3, -1, 10**30], [0.5, -0.0, float("inf")], [True, False], [None]])
        return {key: _value(draw, depth + 1) for key in keys}
    keys = [draw.choice(["b", "a", "\u00e9", "10", "9"]) + str(n) for n in range(draw.randrange(5))]
    return {key: _value(draw, depth + 1) for key in keys}


def test_a_record_written_in_pieces_is_byte_for_byte_json_dumps(tmp_path):
    """write_json streams the encoder's pieces (a large adopted.json is never one string): the bytes are exactly
    json.dumps(indent=2, sort_keys, no ASCII escapes) and a newline, for generated values, a 70,000-character
    string and pieces past a write's size among them; a value that cannot be encoded leaves nothing."""
    import random

    draw = random.Random(62)
    for number in range(200):
        value = _value(draw)
        target = tmp_path / f"{number}.json"
        atomic.write_json(target, value)
        assert target.read_bytes() == (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    with pytest.raises(UnicodeEncodeError):
        atomic.write_json(tmp_path / "lone.json", {"a": ["x" * 70000, "\ud800"]})
    assert not [name for name in os.listdir(tmp_path) if not name[0].isdigit()]


def test_a_record_is_written_as_asdict_writes_it(tmp_path):
    """write_json takes a record (dataclasses nested in lists, tuples and dicts) and writes what
    json.dumps(dataclasses.asdict(record)) writes, byte for byte; anything else unencodable is json's TypeError."""
    import dataclasses

    @dataclasses.dataclass
    class Inner:
        z: tuple
        a: dict

    @dataclasses.dataclass
    class Outer:
        rows: list
        first: Inner
        kind: str = "k"

    record = Outer([Inner((1, 2.5), {"b": Inner((), {})}), None], Inner(("x",), {"\u00e9": [Inner((3,), {})]}))
    atomic.write_json(tmp_path / "record.json", record)
    assert (tmp_path / "record.json").read_bytes() == (json.dumps(dataclasses.asdict(record), indent=2, sort_keys=True,
                                                                  ensure_ascii=False) + "\n").encode()
    with pytest.raises(TypeError, match="Object of type type is not JSON serializable"):
        atomic.write_json(tmp_path / "type.json", {"a": Inner})
    assert sorted(os.listdir(tmp_path)) == ["record.json"]


def test_reader_names_missing_and_unexpected_fields(tmp_path):
    record = records.FailureRecord("r", "identity", "m", [records.Mismatch(0, 3, ["label"], {"label": 1}, {"label": 0})])
    path = tmp_path / "failure.json"
    records.write(path, record)
    assert records.read(path, records.FailureRecord) == record
    raw = json.loads(path.read_text())
    del raw["mismatches"][0]["fields"]
    raw["mismatches"][0]["extra"] = 1
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"failure.json.mismatches\[0\]: field\(s\) missing: fields; unexpected field\(s\): 'extra' \(it holds "):
        records.read(path, records.FailureRecord)
    raw["kind"] = "sst2-audit/run"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match="expected kind 'sst2-audit/failure' schema_version 5, got 'sst2-audit/run' 5"):
        records.read(path, records.FailureRecord)


def test_an_int_or_text_field_takes_exactly_one_of_them():
    """lm-eval's logged `target`: an index, or a multiple-input task's continuation; nothing else."""
    from sst2_audit.util.errors import InputError
    from sst2_audit.formats.schema import typed

    assert typed(int | str, 3, "t") == 3 and typed(int | str, "was leaving town.", "t") == "was leaving town."
    for value in (1.5, True, None, [1], {"a": 1}):
        with pytest.raises(InputError, match=r"^x\.target: expected int or str, got "):
            typed(int | str, value, "x.target")


def test_a_number_that_is_not_finite_is_named_so_where_a_list_is_allowed_too():
    """A per-sample metric (a float or a list): `-1e999` reads as -inf, and the message says it is not finite
    rather than "expected float or list, got float"."""
    from sst2_audit.formats.schema import typed

    assert typed(float | list, 0.5, "t") == 0.5 and typed(float | list, [1.0], "t") == [1.0]
    for value, shown in ((float("inf"), "inf"), (float("-inf"), "-inf"), (float("nan"), "nan")):
        with pytest.raises(InputError) as refused:
            typed(float | list, value, "samples:1.acc")
        assert str(refused.value) == f"samples:1.acc: expected a finite number or list, got {shown}."


def test_a_group_record_from_a_version_that_never_existed_is_refused():
    """One schema version number serves four record kinds; a group record began at 4, so a group record of
    version 1 to 3 is not upgraded into one but refused (exit 2 naming the file and the versions)."""
    from sst2_audit.formats.records import FIRST_VERSION, from_dict, GroupRecord
    from sst2_audit.util.errors import InputError

    assert FIRST_VERSION["sst2-audit/group"] == 4
    for version in (1, 2, 3):
        with pytest.raises(InputError, match=f"group.json: sst2-audit/group records begin at schema_version 4, "
                                             f"got {version}"):
            from_dict(GroupRecord, {"kind": "sst2-audit/group", "schema_version": version}, "group.json")


def test_a_schema_5_summary_s_accuracy_is_read_as_its_value():
    """Schema 6 renamed a summary's `accuracy` to `value` (it holds mc2, f1 and mcc too): a schema-5 run record
    reads as the same record, every summary's number kept; a schema-5 summary that already says `value` is an
    unexpected field, and a schema-6 one that says `accuracy` is too."""
    import tarfile

    from support.paths import REPO

    with tarfile.open(REPO / "results" / "embedded-full-reference.tar.gz") as archive:
        raw = json.loads(archive.extractfile("embedded-full-reference/run.json").read())
    record = records.from_dict(records.RunRecord, raw, "run.json")  # schema 4, upgraded on read
    today = records.to_dict(record)
    assert today["schema_version"] == records.RECORD_SCHEMA_VERSION == 7 and today["processes"] == 1
    assert today["summaries"]["official"]["acc"]["value"] == 42 / 64 and "accuracy" not in \
        today["summaries"]["official"]["acc"]
    five = json.loads(json.dumps(today))
    five["schema_version"] = 5
    for by_metric in five["summaries"].values():
        for summary in by_metric.values():
            summary["accuracy"] = summary.pop("value")
    assert records.from_dict(records.RunRecord, five, "run.json") == record
    five["summaries"]["official"]["acc"]["value"] = 0.5
    with pytest.raises(InputError, match=r"summaries.official.acc: unexpected field\(s\): 'accuracy'"):
        records.from_dict(records.RunRecord, five, "run.json")
    today["summaries"]["independent"]["acc"]["accuracy"] = 0.5
    with pytest.raises(InputError, match=r"summaries.independent.acc: unexpected field\(s\): 'accuracy'"):
        records.from_dict(records.RunRecord, today, "run.json")


def test_each_record_kind_has_its_own_version():
    """One envelope (kind, schema_version), a version per kind: the run record is at 7 (`processes`; 6: its
    summaries' `value`), the failure, private and group records stay at 5; a kind's record at another kind's version
    is refused."""
    assert records.KIND_VERSIONS == {"sst2-audit/run": 7, "sst2-audit/failure": 5, "sst2-audit/private": 5,
                                     "sst2-audit/group": 5}
    failure = records.FailureRecord("r", "check", "message", [])
    raw = records.to_dict(failure)
    assert raw["schema_version"] == 5 and records.from_dict(records.FailureRecord, raw, "f.json") == failure
    old = dict(raw, schema_version=1)  # the shared versions before 5 upgrade to the kind's own
    assert records.from_dict(records.FailureRecord, old, "f.json") == failure
    with pytest.raises(InputError, match="f.json: expected kind 'sst2-audit/failure' schema_version 5, got "
                                         "'sst2-audit/failure' 6."):
        records.from_dict(records.FailureRecord, dict(raw, schema_version=6), "f.json")
