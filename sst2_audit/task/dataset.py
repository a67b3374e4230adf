"""Rows of a task's data: reading the demo files, writing and reading parquet.

A row is a document as lm-eval sees it (a dict in column order) and its position in the split,
which is lm-eval's doc_id. Where the data has an `idx` column it must equal the position, so a
logged doc_id also names the dataset's own id. The columns come from the lock's data resource
(`columns`, which every data resource states: lock.py's upgrade from version 3 supplies what that
version implied).
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.util.errors import InputError
from sst2_audit.formats.fields import COLUMN_TYPES

@dataclass(frozen=True)
class Row:
    idx: int  # position in the split = lm-eval's doc_id
    doc: dict

    def as_doc(self) -> dict:
        """The row as lm-eval sees it (parquet column order), for doc hashes."""
        return dict(self.doc)


def _split_fields(body: str) -> list:
    """'a: T, b: list<item: U>' -> ['a: T', 'b: list<item: U>'] (commas inside <> stay)."""
    parts, depth, start = [], 0, 0
    for position, char in enumerate(body):
        depth += {"<": 1, ">": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(body[start:position].strip())
            start = position + 1
    return parts + [body[start:].strip()]


def _arrow_type(kind: str):
    """A demo column's Arrow type from its text: the flat types, list<T> (or list<item: T>), struct<name: T, ...>."""
    import pyarrow as pa

    if kind in ("string", "int64", "int32"):
        return getattr(pa, kind)()
    match = re.fullmatch(r"(list|struct)<(.+)>", kind)
    if match and match.group(1) == "list":
        named = re.fullmatch(r"(item|element): (.+)", match.group(2))  # Arrow prints the item's field name
        return pa.list_(_arrow_type(named.group(2) if named else match.group(2)))
    if match:
        fields = [field.split(": ", 1) for field in _split_fields(match.group(2))]
        if all(len(f) == 2 and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f[0]) for f in fields):
            return pa.struct([(name, _arrow_type(inner)) for name, inner in fields])
    raise InputError(f"lock: a demo data file's columns are one of {COLUMN_TYPES}, or lists and structs of them, "
                     f"got {kind!r}.")


def _arrow_schema(columns):
    import pyarrow as pa

    return pa.schema([(name, _arrow_type(kind)) for name, kind in columns])


def _value_ok(value, arrow_type) -> bool:
    """A JSON value of exactly this Arrow type (no null, no bool for an int, exactly a struct's fields)."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type):
        return isinstance(value, str)
    if pa.types.is_integer(arrow_type):
        return type(value) is int
    if pa.types.is_list(arrow_type):
        return isinstance(value, list) and all(_value_ok(v, arrow_type.value_type) for v in value)
    fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
    return (isinstance(value, dict) and list(value) == [f.name for f in fields]
            and all(_value_ok(value[f.name], f.type) for f in fields))


def read_demo_tsv(path: Path, columns) -> list:
    """A reviewable text form: a header naming the lock's columns (any order), one row a line, tab-separated;
    text columns as written, integer columns as decimal integers."""
    kinds = dict(columns)
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t") if lines else []
    if sorted(header) != sorted(kinds) or any(kinds[name] not in ("string", "int64", "int32") for name in header):
        raise InputError(f"{path}: expected a header naming the text and integer columns {sorted(kinds)} "
                         f"(tab-separated), got {lines[:1]!r}.")
    rows: list = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        bad = len(parts) != len(header) or any(
            not value if kinds[name] == "string" else not re.fullmatch(r"-?[0-9]{1,18}", value)
            for name, value in zip(header, parts))
        if bad:
            raise InputError(f"{path}:{number}: expected {len(header)} tab-separated fields "
                             f"({', '.join(f'{n} {kinds[n]}' for n in header)}), got {line[:80]!r}.")
        values = {name: value if kinds[name] == "string" else int(value) for name, value in zip(header, parts)}
        rows.append(Row(len(rows), {name: values[name] for name, _ in columns}))
    return rows


def read_demo_jsonl(path: Path, columns) -> list:
    """Any task's reviewable text form: one JSON object a line, with exactly the lock's columns."""
    names, types = [name for name, _ in columns], {name: _arrow_type(kind) for name, kind in columns}
    rows: list = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON object ({error.msg}).") from None
        if not isinstance(doc, dict) or list(doc) != names:
            raise InputError(f"{path}:{number}: expected the fields {names} in this order, got "
                             f"{list(doc) if isinstance(doc, dict) else type(doc).__name__}.")
        for name, kind in columns:
            if not _value_ok(doc[name], types[name]):
                raise InputError(f"{path}:{number}: field {name!r} must be {kind}, got {str(doc[name])[:40]!r}.")
        rows.append(Row(len(rows), doc))
    return rows


def read_demo(path: Path, columns) -> list:
    return read_demo_tsv(path, columns) if Path(path).suffix == ".tsv" else read_demo_jsonl(path, columns)


def write_parquet(rows: list, path: Path, columns) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = {name: [row.doc[name] for row in rows] for name, _ in columns}
    pq.write_table(pa.Table.from_pydict(data, schema=_arrow_schema(columns)), str(path))


def _columns(schema) -> list:
    """(name, type) as the lock states them: Arrow's type text, a top-level list of text as 'list<string>'."""
    return [(f.name, re.sub(r"^list<\w+: string>$", "list<string>", str(f.type))) for f in schema]


def parquet_columns(path: Path) -> list:
    import pyarrow.parquet as pq

    return _columns(pq.read_schema(str(path)))


def read_table(path: Path):
    """One parquet file as an Arrow table. ParquetFile, not pq.read_table: read_table goes through
    pyarrow.dataset, which imports pandas (about 1.5 s here) for a file we read whole anyway."""
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(str(path)) as handle:
            return handle.read()
    except Exception as error:  # pyarrow raises several kinds for a damaged file
        raise InputError(f"{path}: not a readable parquet file ({error}).") from None


BATCH_ROWS = 4096  # rows converted to Python at a time: the file's Arrow copy and its rows are never both whole


def read_parquet(path: Path, columns, expected_rows: int | None = None) -> list:
    """Rows of a verified parquet file; the columns and, where there is one, idx == position enforced. Read in
    batches: a split of 70,000 long rows held once as Arrow and once as Python was about 0.5 GB of peak here."""
    import pyarrow.parquet as pq

    rows: list = []
    try:
        with pq.ParquetFile(str(path)) as handle:
            actual = _columns(handle.schema_arrow)
            if actual != list(columns):
                raise InputError(f"{path}: expected columns {list(columns)}, got {actual}.")
            if expected_rows is not None and handle.metadata.num_rows != expected_rows:
                raise InputError(f"{path}: expected {expected_rows} rows, got {handle.metadata.num_rows}.")
            for batch in handle.iter_batches(batch_size=BATCH_ROWS):
                rows += [Row(position, doc) for position, doc in enumerate(batch.to_pylist(), len(rows))]
    except InputError:
        raise
    except Exception as error:  # pyarrow raises several kinds for a damaged file
        raise InputError(f"{path}: not a readable parquet file ({error}).") from None
    for row in rows:
        if "idx" in row.doc and row.doc["idx"] != row.idx:
            raise InputError(f"{path}: row {row.idx} has idx {row.doc['idx']}; expected idx equal to the row position.")
    return rows
