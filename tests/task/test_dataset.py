"""The pinned split's parquet read in batches: the rows equal a whole read's, and each refusal names the file."""

import random

import pytest

from support.paths import EMBEDDED_COLUMNS
from sst2_audit.task import dataset
from sst2_audit.task.dataset import read_parquet, read_table, Row, write_parquet
from sst2_audit.util.errors import InputError


def _rows(count: int, seed: int) -> list:
    draw = random.Random(seed)
    return [Row(i, {"sentence": "".join(draw.choice("ab é\n\u2028") for _ in range(draw.randrange(0, 40))),
                    "label": draw.randrange(2), "idx": i}) for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, 7, 8, 9, 31])
def test_a_batched_read_equals_the_whole_read_at_every_batch_edge(tmp_path, monkeypatch, count):
    monkeypatch.setattr(dataset, "BATCH_ROWS", 8)  # a batch edge inside, at and past the rows
    path = tmp_path / "split.parquet"
    write_parquet(_rows(count, count), path, EMBEDDED_COLUMNS)
    read = read_parquet(path, EMBEDDED_COLUMNS, count)
    assert [(row.idx, row.doc) for row in read] == list(enumerate(read_table(path).to_pylist()))
    assert [row.doc for row in read] == [row.doc for row in _rows(count, count)]


def test_each_refusal_names_the_file_and_what_it_expected(tmp_path, monkeypatch):
    monkeypatch.setattr(dataset, "BATCH_ROWS", 4)
    path = tmp_path / "split.parquet"
    write_parquet(_rows(10, 1), path, EMBEDDED_COLUMNS)
    with pytest.raises(InputError) as wrong_count:
        read_parquet(path, EMBEDDED_COLUMNS, 11)
    assert str(wrong_count.value) == f"{path}: expected 11 rows, got 10."
    other = (("sentence", "string"), ("label", "int32"), ("idx", "int32"))
    with pytest.raises(InputError) as wrong_columns:
        read_parquet(path, other)
    assert str(wrong_columns.value) == f"{path}: expected columns {list(other)}, got {list(EMBEDDED_COLUMNS)}."
    moved = _rows(10, 1)
    moved[9] = Row(9, {**moved[9].doc, "idx": 3})  # past the first batches: the check sees every row
    write_parquet(moved, path, EMBEDDED_COLUMNS)
    with pytest.raises(InputError) as wrong_idx:
        read_parquet(path, EMBEDDED_COLUMNS)
    assert str(wrong_idx.value) == f"{path}: row 9 has idx 3; expected idx equal to the row position."
    whole = path.read_bytes()
    for cut in (len(whole) // 2, len(whole) - 9, 4):
        path.write_bytes(whole[:cut])
        with pytest.raises(InputError) as damaged:
            read_parquet(path, EMBEDDED_COLUMNS)
        assert str(damaged.value).startswith(f"{path}: not a readable parquet file (")
