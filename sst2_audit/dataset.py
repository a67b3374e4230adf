"""Rows in SST-2's schema: reading the demo TSV, writing and reading parquet."""

from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

SCHEMA_FIELDS = (("sentence", "string"), ("label", "int64"), ("idx", "int32"))
LABEL_NAMES = ("negative", "positive")


@dataclass(frozen=True)
class Row:
    idx: int
    sentence: str
    label: int

    def as_doc(self) -> dict:
        """The row as lm-eval sees it (parquet column order), for doc hashes."""
        return {"sentence": self.sentence, "label": self.label, "idx": self.idx}


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, kind)()) for name, kind in SCHEMA_FIELDS])


def read_demo_tsv(path: Path) -> list:
    """The reviewable text form: a header `idx<TAB>label<TAB>sentence`, one row a line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != "idx\tlabel\tsentence":
        raise InputError(f"{path}: expected header 'idx<TAB>label<TAB>sentence', got {lines[:1]!r}.")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in ("0", "1") or not parts[0].isdigit() or not parts[2]:
            raise InputError(f"{path}:{number}: expected 'idx<TAB>0|1<TAB>sentence', got {line!r}.")
        rows.append(Row(int(parts[0]), parts[2], int(parts[1])))
    return rows


def write_parquet(rows: list, path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {
        "sentence": [r.sentence for r in rows],
        "label": [r.label for r in rows],
        "idx": [r.idx for r in rows],
    }
    pq.write_table(pa.Table.from_pydict(columns, schema=_arrow_schema()), str(path))


def read_parquet(path: Path, expected_rows: int | None = None) -> list:
    """Rows of a verified parquet file; the schema and idx == position are enforced.

    lm-eval's `samples` are row positions while SST-2 names rows by idx; the two
    must coincide for a logged doc_id to mean a dataset idx.
    """
    import pyarrow.parquet as pq

    table = pq.read_table(str(path))
    actual = [(f.name, str(f.type)) for f in table.schema]
    if actual != list(SCHEMA_FIELDS):
        raise InputError(f"{path}: expected columns {list(SCHEMA_FIELDS)}, got {actual}.")
    if expected_rows is not None and table.num_rows != expected_rows:
        raise InputError(f"{path}: expected {expected_rows} rows, got {table.num_rows}.")
    data = table.to_pydict()
    rows = [Row(i, s, l) for s, l, i in zip(data["sentence"], data["label"], data["idx"])]
    for position, row in enumerate(rows):
        if row.idx != position:
            raise InputError(f"{path}: row {position} has idx {row.idx}; expected idx equal to the row position.")
        if row.label not in (0, 1):
            raise InputError(f"{path}: row idx {row.idx} has label {row.label}; expected 0 or 1.")
    return rows
