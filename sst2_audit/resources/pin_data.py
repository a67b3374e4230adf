"""The data half of a pin: a user's data folder or file read, checked against the task and written as
parquet, and its lock resource; and the rule that a pinned file is a file of its own (no symlink)."""

import csv
import json
from pathlib import Path

from sst2_audit.resources import hub_pin
from sst2_audit.task.dataset import parquet_columns, read_parquet, read_table
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_file


DATA_SUFFIXES = (".parquet", ".jsonl", ".csv")


# A data file is checked for size before it is read (a 2 GiB sparse JSONL once cost 30 s and 4 GB before its
# refusal): real benchmark splits are far smaller (MMLU's largest: tens of MB).
MAX_DATA_BYTES = 512 << 20


def own_file(path: Path, where: str) -> Path:
    """A file of the folder the user gave, never a symlink (a link could pin and publish any file)."""
    if path.is_symlink():
        raise InputError(f"{where}: {path.name} is a symbolic link; --pin reads only the folder's own files "
                         "(copy the file in).")
    return path


LEAF_TYPES = ("string", "int64", "int32", "bool", "double")


def _supported(kind) -> bool:
    """Types a document can carry through JSON (doc hashes) and lm-eval's templates: text, numbers,
    booleans, lists and structs of them (arc's `choices`, hellaswag's `endings`)."""
    import pyarrow as pa

    if pa.types.is_list(kind):
        return _supported(kind.value_type)
    if pa.types.is_struct(kind):
        return all(_supported(kind.field(i).type) for i in range(kind.num_fields))
    return str(kind) in LEAF_TYPES


def _read_docs(path: Path) -> list:
    """The documents of a parquet, JSONL or CSV file, as dicts in column order."""
    if path.suffix == ".parquet":
        return read_table(path).to_pylist()
    try:
        return _read_jsonl(path) if path.suffix == ".jsonl" else _read_csv(path)
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not UTF-8 text (byte {error.start}).") from None
    except csv.Error as error:
        raise InputError(f"{path}: not a readable CSV file ({error}).") from None


def _read_jsonl(path: Path) -> list:
    docs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not a JSON object ({error.msg}).") from None
        except RecursionError:
            raise InputError(f"{path}:{number}: not a document (nested too deeply).") from None
        if not isinstance(doc, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(doc).__name__}.")
        docs.append(doc)
    return docs


def _read_csv(path: Path) -> list:
    with path.open(encoding="utf-8", newline="") as handle:
        docs = [dict(row) for row in csv.DictReader(handle)]
    for number, doc in enumerate(docs, start=2):  # line 1 is the header
        if None in doc or None in doc.values():
            raise InputError(f"{path}:{number}: the row has {'more' if None in doc else 'fewer'} fields than the "
                             "header.")
    integer = {name for name in (docs[0] if docs else {})  # CSV has no types: a column of integers only is one
               if all(str(d.get(name, "")).lstrip("-").isdigit() for d in docs)}
    return [{k: int(v) if k in integer else v for k, v in doc.items()} for doc in docs]


def _table(path: Path):
    """The file's documents as one Arrow table with types inferred from the values (large_string,
    int32 and the like normalized): refused with the column named where a type is not supported."""
    import pyarrow as pa

    docs = _read_docs(path)
    if not docs:
        raise InputError(f"{path}: no rows.")
    names = list(docs[0])
    for number, doc in enumerate(docs, start=1):
        if list(doc) != names:
            raise InputError(f"{path}: row {number} has the fields {list(doc)}, the first row {names}.")
    try:
        table = pa.Table.from_pylist(docs)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        column = next((n for n in names if len({type(d[n]).__name__ for d in docs}) > 1), None)
        raise InputError(f"{path}: " + (f"column {column!r} mixes types" if column else "values of one column differ "
                         "in type") + f" ({str(error)[:120]}).") from None
    for field in table.schema:
        if not _supported(field.type):
            raise InputError(f"{path}: column {field.name!r} has type {field.type}; documents may hold text, "
                             f"integers, floats, booleans, and lists and structs of them.")
    return table


def _renders(spec, rows, origin: Path) -> None:
    """The task's templates must render on every row, and every gold answer index a choice (a missing field or
    an odd row fails here, naming the user's file and row, not after a model load)."""
    for number, row in enumerate(rows):
        doc = row.as_doc()
        try:
            spec.shape.renders(spec, doc)
        except Exception as error:  # Jinja2's UndefinedError, a KeyError, a bad index: the data is not the task's
            raise InputError(f"{origin}: task {spec.name}'s templates do not render on row {number + 1} of "
                             f"{len(rows)} ({type(error).__name__}: {str(error)[:160]}); the data's columns are "
                             f"{list(doc)}.") from None


def _checked_split(spec, parquet: Path, origin, columns) -> tuple:
    """A split's parquet as pinned: the columns it states (the same as the other splits'), idx equal to the
    position where there is one, and the task's templates rendering on every row. (columns, rows)."""
    found = parquet_columns(parquet)
    if columns is not None and found != columns:
        raise InputError(f"{origin}: columns {found} differ from the other split's {columns}.")
    rows = spec.processed(read_parquet(parquet, columns=found), parquet, 0)  # any seed: that every row renders
    _renders(spec, rows, origin)
    return found, len(rows)


def _split_files(data: Path, split: str) -> list:
    """The files in the folder `data` that may hold `split` (a symlink counts, to be refused by name later)."""
    return [data / f"{split}{suffix}" for suffix in DATA_SUFFIXES
            if (data / f"{split}{suffix}").is_file() or (data / f"{split}{suffix}").is_symlink()]


def _data_file(data: Path, split: str) -> Path:
    found = [data] if data.is_file() else _split_files(data, split)
    if len(found) != 1:
        raise InputError(f"--data {data}: expected exactly one of {', '.join(split + s for s in DATA_SUFFIXES)} "
                         f"for split {split!r}, found {len(found)}.")
    chosen = found[0] if data.is_file() else own_file(found[0], f"--data {data}")
    size = chosen.stat().st_size
    if chosen.suffix not in DATA_SUFFIXES:
        raise InputError(f"--data {chosen}: expected a .parquet, .jsonl or .csv file.")
    if size > MAX_DATA_BYTES:
        raise InputError(f"--data {chosen}: {size} bytes, more than the {MAX_DATA_BYTES} a split may have; refused "
                         "before reading.")
    return chosen


def data_resource(data: Path, spec, lock_raw: dict, target: Path) -> dict:
    """The data resource: each split the task names, normalized to parquet under `target`."""
    if not data.exists():
        raise InputError(f"--data {data}: no such file or folder.")
    if data.is_file() and len(spec.splits) != 1:
        raise InputError(f"--data {data}: task {spec.name} reads the splits {sorted(spec.splits)} (lm-eval 0.4.9.2 "
                         "builds every split its YAML names, even one it does not score); give a folder with a "
                         "file per split.")
    missing = [] if data.is_file() else [split for split in sorted(spec.splits) if not _split_files(data, split)]
    if missing:  # every missing split at once: arc_easy reads three
        raise InputError(f"--data {data}: task {spec.name} reads the splits {', '.join(sorted(spec.splits))}; no file "
                         f"for {', '.join(missing)} (one of {', '.join(DATA_SUFFIXES)} each, e.g. "
                         f"{missing[0]}{DATA_SUFFIXES[1]}).")
    split_rule = lock_raw["split"]
    needed = split_rule["dev_rows"] + split_rule["confirm_rows"]
    import pyarrow.parquet as pq

    columns, files, converted = None, [], {}
    for split in sorted(spec.splits):
        origin = _data_file(data, split)
        table = _table(origin)
        if split == spec.eval_split and table.num_rows < needed:
            raise InputError(f"{origin}: split {split!r} has {table.num_rows} rows; task {spec.name} scores it and "
                             f"the lock's split rule needs at least {needed} (dev_rows {split_rule['dev_rows']} + "
                             f"confirm_rows {split_rule['confirm_rows']}).")
        written = target / f"{split}.parquet"
        pq.write_table(table, str(written))
        columns, _ = _checked_split(spec, written, origin, columns)
        files.append({"path": written.name, "split": split, "rows": table.num_rows, "sha256": sha256_file(written)})
        converted[split] = {"file": origin.name, "sha256": sha256_file(origin)}
    return {"source": "local", "columns": [list(c) for c in columns or ()], "files": files, "converted_from": converted}


def _hub_files(spec, data, fetched: dict, lock_raw: dict) -> tuple:
    needed = lock_raw["split"]["dev_rows"] + lock_raw["split"]["confirm_rows"]
    files, columns = [], None
    for split, (path, local) in zip(sorted(spec.splits), fetched.items()):
        columns, rows = _checked_split(spec, local, f"--data {data}: {path}", columns)
        if split == spec.eval_split and rows < needed:
            raise InputError(f"--data {data}: {path} (split {split!r}) has {rows} rows; task {spec.name} scores "
                             f"it and the lock's split rule needs at least {needed}.")
        files.append({"path": path, "split": split, "rows": rows, "sha256": sha256_file(local)})
    return files, columns


def hub_data_resource(data, spec, lock_raw: dict) -> dict:
    """A dataset repo at a revision: its parquet file per split, pinned as the hub serves it."""
    def choose(names):
        return [hub_pin.dataset_file(names, split, data) for split in sorted(spec.splits)]

    with hub_pin.snapshot(data, "dataset", choose, "--data") as (commit, fetched):
        files, columns = _hub_files(spec, data, fetched, lock_raw)
    return {"source": "hub", "repo_id": hub_pin.parse(data, "--data")[0], "repo_type": "dataset", "revision": commit,
            "columns": [list(c) for c in columns or ()], "files": files}
