"""prepare.py --pin: write a NEW lock that pins a user's own model folder and data for a task.

Everything a reviewer needs to re-derive the pins is in the new lock: every model file's sha256,
every data file's sha256 and columns (read from the data itself), and where a JSONL or CSV file
was converted to parquet, the source file's sha256 next to the parquet's. The base lock is copied
as it is (no existing pin changes) and the new one is written once, atomically, never over a file.
Every check that can fail on the user's own files runs here, before anything is downloaded,
converted or loaded.
"""

import csv
import json
import os
from pathlib import Path

from . import atomic
from .dataset import COLUMN_TYPES, Row, read_parquet, write_parquet
from .errors import InputError
from .hashing import sha256_file

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "added_tokens.json")
PICKLES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
DATA_SUFFIXES = (".parquet", ".jsonl", ".csv")


def model_files(folder: Path) -> list:
    """[{path, sha256}] of a Hugging Face causal LM folder: config, safetensors (sharded too), tokenizer."""
    if not folder.is_dir():
        raise InputError(f"--model {folder}: expected a model folder (config.json, *.safetensors, tokenizer files).")
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    weights = [n for n in names if n.endswith(".safetensors") or n == "model.safetensors.index.json"]
    if not any(n.endswith(".safetensors") for n in weights):
        pickled = [n for n in names if n.endswith(PICKLES)]
        raise InputError(f"--model {folder}: no *.safetensors weights" + (
            f" (found {', '.join(pickled)}: pickle files are never loaded; save with safe_serialization=True)"
            if pickled else "") + ".")
    for needed in ("config.json", "tokenizer_config.json"):
        if needed not in names:
            raise InputError(f"--model {folder}: {needed} is missing; the folder must hold the model and its tokenizer.")
    chosen = [n for n in names if n in weights or n in TOKENIZER_FILES or n in ("config.json", "generation_config.json")]
    return [{"path": name, "sha256": sha256_file(folder / name)} for name in chosen]


def _arrow_kind(field) -> str | None:
    import pyarrow as pa

    kind = field.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "string"
    if pa.types.is_int64(kind) or pa.types.is_int32(kind):
        return str(kind)
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)):
        return "list<string>"
    return None


def _value_kind(value) -> str | None:
    if isinstance(value, str):
        return "string"
    if type(value) is int:
        return "int64"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "list<string>"
    return None


def _read_table(path: Path) -> tuple:
    """(columns, docs) of a parquet, JSONL or CSV file; unsupported types name the column."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(str(path))
        except Exception as error:  # pyarrow raises several kinds for a damaged file
            raise InputError(f"{path}: not a readable parquet file ({error}).") from None
        columns = []
        for field in table.schema:
            kind = _arrow_kind(field)
            if kind is None:
                raise InputError(f"{path}: column {field.name!r} has type {field.type}; the lock's columns are "
                                 f"one of {COLUMN_TYPES} (nested types such as structs are not supported yet).")
            columns.append((field.name, kind))
        return columns, table.to_pylist()
    if path.suffix == ".jsonl":
        docs = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"{path}:{number}: not a JSON object ({error.msg}).") from None
            if not isinstance(doc, dict):
                raise InputError(f"{path}:{number}: expected a JSON object, got {type(doc).__name__}.")
            docs.append(doc)
    else:
        with path.open(encoding="utf-8", newline="") as handle:
            docs = [dict(row) for row in csv.DictReader(handle)]
        for doc in docs:  # CSV has no types: a column of integers only is an integer column
            for name, value in doc.items():
                if isinstance(value, str) and value.lstrip("-").isdigit() and all(
                        str(d.get(name, "")).lstrip("-").isdigit() for d in docs):
                    doc[name] = int(value)
    if not docs:
        raise InputError(f"{path}: no rows.")
    names = list(docs[0])
    columns = []
    for name in names:
        kinds = {_value_kind(doc.get(name)) for doc in docs}
        if len(kinds) != 1 or None in kinds:
            raise InputError(f"{path}: column {name!r} mixes types or holds a value that is not text, an integer "
                             f"or a list of texts ({sorted(map(str, kinds))}).")
        columns.append((name, kinds.pop()))
    for number, doc in enumerate(docs, start=1):
        if list(doc) != names:
            raise InputError(f"{path}: row {number} has the fields {list(doc)}, the first row {names}.")
    return columns, docs


def _data_file(data: Path, split: str) -> Path:
    if data.is_file():
        return data
    found = [data / f"{split}{suffix}" for suffix in DATA_SUFFIXES if (data / f"{split}{suffix}").is_file()]
    if len(found) != 1:
        raise InputError(f"--data {data}: expected exactly one of {', '.join(split + s for s in DATA_SUFFIXES)} "
                         f"for split {split!r}, found {len(found)}.")
    return found[0]


def data_resource(data: Path, spec, lock_raw: dict, target: Path) -> dict:
    """The data resource: each split the task names, normalized to parquet under `target`."""
    if not data.exists():
        raise InputError(f"--data {data}: no such file or folder.")
    if data.is_file() and len(spec.splits) != 1:
        raise InputError(f"--data {data}: task {spec.name} reads the splits {sorted(spec.splits)} (lm-eval 0.4.9.2 "
                         "builds every split its YAML names, even one it does not score); give a folder with a "
                         "file per split.")
    split_rule = lock_raw["split"]
    needed = split_rule["dev_rows"] + split_rule["confirm_rows"]
    columns, files, converted = None, [], {}
    for split in sorted(spec.splits):
        origin = _data_file(data, split)
        found, docs = _read_table(origin)
        if columns is not None and found != columns:
            raise InputError(f"{origin}: columns {found} differ from the other split's {columns}.")
        columns = found
        if split == spec.eval_split and len(docs) < needed:
            raise InputError(f"{origin}: split {split!r} has {len(docs)} rows; task {spec.name} scores it and the "
                             f"lock's split rule needs at least {needed} (dev_rows {split_rule['dev_rows']} + "
                             f"confirm_rows {split_rule['confirm_rows']}).")
        written = target / f"{split}.parquet"
        write_parquet([Row(position, doc) for position, doc in enumerate(docs)], written, columns)
        read_parquet(written, columns=columns)  # idx, where there is one, must equal the position
        files.append({"path": written.name, "split": split, "rows": len(docs), "sha256": sha256_file(written)})
        converted[split] = {"file": origin.name, "sha256": sha256_file(origin)}
    return {"source": "local", "columns": [list(c) for c in columns], "files": files, "converted_from": converted}


def relative(path: Path, lock_path: Path) -> str:
    """A folder as the lock writes it: relative to the lock's own folder (records never show a machine path)."""
    return os.path.relpath(Path(path).resolve(), Path(lock_path).resolve().parent)


def pin(base_lock: Path, new_lock: Path, name: str, task: str, model: Path, data: Path, notice: str | None) -> dict:
    """Write new_lock = base_lock + profile `name`; returns the profile written."""
    from .lock import lock_from_bytes, parse_lock
    from .task_spec import require_data_for, spec_for

    if new_lock.exists():
        raise InputError(f"--new-lock {new_lock} already exists; a lock is never overwritten (pins never change).")
    base = lock_from_bytes(Path(base_lock).read_bytes(), base_lock)
    if name in base.profiles:
        raise InputError(f"--pin {name}: {base_lock} already has a profile of that name; choose another.")
    if task not in base.evaluator["tasks"]:
        raise InputError(f"--task {task}: {base_lock} does not pin this task's YAML (evaluator.tasks: "
                         f"{', '.join(sorted(base.evaluator['tasks']))}); pinning a new task's YAML is not built yet.")
    spec = spec_for(base, task)
    files = model_files(model)  # cheap checks first: nothing is written before these pass
    target = Path(new_lock).parent / f"{name}-data"
    if target.exists():
        raise InputError(f"{target}: already exists; the converted data of profile {name} is never overwritten.")
    target.mkdir(parents=True)
    try:
        data_entry = data_resource(data, spec, base.raw, target)
    except BaseException:
        for leftover in target.iterdir():
            leftover.unlink()
        target.rmdir()
        raise
    data_entry["path"] = relative(target, new_lock)
    profile = {
        "task": task,
        "description": f"{name}: the model in {model.name} on the data in {data.name}, pinned by prepare.py --pin",
        "model": {"source": "local", "path": relative(model, new_lock), "files": files},
        "data": data_entry,
    }
    if notice:
        profile.update(demo=True, notice=notice)
    raw = json.loads(Path(base_lock).read_text(encoding="utf-8"))  # the base as written: no pin rewritten
    raw["profiles"][name] = profile
    text = json.dumps(raw, indent=2, sort_keys=True) + "\n"
    checked = parse_lock(json.loads(text), Path(new_lock), "")  # the new lock must read before it exists
    require_data_for(spec, checked.profile(name))
    atomic.write_text(new_lock, text)
    return profile
