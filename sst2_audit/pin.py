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

from . import atomic, hub_pin
from .dataset import parquet_columns, read_parquet
from .errors import InputError
from .hashing import sha256_file

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "added_tokens.json")
PICKLES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
MODEL_REFERENCE = "model:"  # --model model:NAME shares an entry of the base lock's models
DATA_SUFFIXES = (".parquet", ".jsonl", ".csv")


def model_names(names: list, where: str) -> list:
    """The files of a Hugging Face causal LM that a run loads: config, safetensors (sharded too), tokenizer."""
    names = sorted(names)
    weights = [n for n in names if n.endswith(".safetensors") or n == "model.safetensors.index.json"]
    if not any(n.endswith(".safetensors") for n in weights):
        pickled = [n for n in names if n.endswith(PICKLES)]
        raise InputError(f"--model {where}: no *.safetensors weights" + (
            f" (found {', '.join(pickled)}: pickle files are never loaded; save with safe_serialization=True)"
            if pickled else "") + ".")
    for needed in ("config.json", "tokenizer_config.json"):
        if needed not in names:
            raise InputError(f"--model {where}: {needed} is missing; the model must come with its tokenizer.")
    return [n for n in names if n in weights or n in TOKENIZER_FILES or n in ("config.json", "generation_config.json")]


def model_files(folder: Path) -> list:
    """[{path, sha256}] of a local model folder."""
    if not folder.is_dir():
        raise InputError(f"--model {folder}: expected a model folder (config.json, *.safetensors, tokenizer files).")
    chosen = model_names([p.name for p in folder.iterdir() if p.is_file()], str(folder))
    return [{"path": name, "sha256": sha256_file(folder / name)} for name in chosen]


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
        import pyarrow.parquet as pq

        try:
            return pq.read_table(str(path)).to_pylist()
        except Exception as error:  # pyarrow raises several kinds for a damaged file
            raise InputError(f"{path}: not a readable parquet file ({error}).") from None
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
        if not isinstance(doc, dict):
            raise InputError(f"{path}:{number}: expected a JSON object, got {type(doc).__name__}.")
        docs.append(doc)
    return docs


def _read_csv(path: Path) -> list:
    with path.open(encoding="utf-8", newline="") as handle:
        docs = [dict(row) for row in csv.DictReader(handle)]
    for number, doc in enumerate(docs, start=2):  # line 1 is the header
        if None in doc or None in doc.values():
            raise InputError(f"{path}:{number}: the row has {'more' if None in doc else 'fewer'} fields than the header.")
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
                         f"in type") + f" ({str(error)[:120]}).") from None
    for field in table.schema:
        if not _supported(field.type):
            raise InputError(f"{path}: column {field.name!r} has type {field.type}; documents may hold text, "
                             f"integers, floats, booleans, and lists and structs of them.")
    return table


def _renders(spec, doc: dict, origin: Path) -> None:
    """The task's templates must render on the data (a missing field fails here, not after a model load)."""
    try:
        spec.gold(doc, spec.choices(doc))
        spec.requests(doc, spec.prefix(doc))
    except Exception as error:  # Jinja2's UndefinedError, a KeyError, a bad index: the data is not the task's
        raise InputError(f"{origin}: task {spec.name}'s templates do not render on its first row "
                         f"({type(error).__name__}: {str(error)[:160]}); the data's columns are {list(doc)}.") from None


def _checked_split(spec, parquet: Path, origin, columns) -> tuple:
    """A split's parquet as pinned: the columns it states (the same as the other splits'), idx equal to the
    position where there is one, and the task's templates rendering on its first row. (columns, rows)."""
    found = parquet_columns(parquet)
    if columns is not None and found != columns:
        raise InputError(f"{origin}: columns {found} differ from the other split's {columns}.")
    rows = spec.processed(read_parquet(parquet, columns=found), parquet)
    _renders(spec, rows[0].as_doc(), origin)
    return found, len(rows)


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
    return {"source": "local", "columns": [list(c) for c in columns], "files": files, "converted_from": converted}


def hub_data_resource(data, spec, lock_raw: dict) -> dict:
    """A dataset repo at a revision: its parquet file per split, pinned as the hub serves it."""
    commit, fetched = hub_pin.snapshot(data, "dataset", lambda names: [hub_pin.dataset_file(names, split, data)
                                                                       for split in sorted(spec.splits)], "--data")
    needed = lock_raw["split"]["dev_rows"] + lock_raw["split"]["confirm_rows"]
    files, columns = [], None
    for split, (path, local) in zip(sorted(spec.splits), fetched.items()):
        columns, rows = _checked_split(spec, local, f"--data {data}: {path}", columns)
        if split == spec.eval_split and rows < needed:
            raise InputError(f"--data {data}: {path} (split {split!r}) has {rows} rows; task {spec.name} scores "
                             f"it and the lock's split rule needs at least {needed}.")
        files.append({"path": path, "split": split, "rows": rows, "sha256": sha256_file(local)})
    return {"source": "hub", "repo_id": hub_pin.parse(data, "--data")[0], "repo_type": "dataset", "revision": commit,
            "columns": [list(c) for c in columns], "files": files}


def _check_bos(folder: Path, bos: bool, model) -> None:
    """With add_bos_token pinned, the tokenizer must open a text with its BOS token (without it, no
    special token is added at all, so there is nothing to check)."""
    if not bos:
        return
    from .model import load_tokenizer

    tokenizer = load_tokenizer(folder)  # the class run, identity and rescore load
    first = tokenizer("Question", add_special_tokens=bos)["input_ids"][:1]
    if tokenizer.bos_token_id is None or first != [tokenizer.bos_token_id]:
        raise InputError(f"--add-bos-token: the tokenizer of {model} adds no BOS token (bos_token_id "
                         f"{tokenizer.bos_token_id!r}, first token {first}); leave the option out for this model.")


def _model_entry(model, new_lock: Path, bos: bool) -> dict:
    if hub_pin.is_hub(model):
        commit, fetched = hub_pin.snapshot(model, "model", lambda names: model_names(names, str(model)), "--model")
        _check_bos(fetched["tokenizer_config.json"].parent, bos, model)  # the downloaded snapshot's folder
        return {"source": "hub", "repo_id": hub_pin.parse(model, "--model")[0], "repo_type": "model",
                "revision": commit, "files": [{"path": n, "sha256": sha256_file(f)} for n, f in fetched.items()]}
    _check_bos(model, bos, model)
    return {"source": "local", "path": relative(model, new_lock), "files": model_files(model)}


def _written(resource: dict) -> str:
    """A resource as the lock locates it: its folder relative to the lock, or hub:REPO@COMMIT."""
    if resource["source"] == "hub":
        return f"hub:{resource['repo_id']}@{resource['revision']}"
    return resource["path"]


def relative(path: Path, lock_path: Path) -> str:
    """A folder as the lock writes it: relative to the lock's own folder (records never show a machine path)."""
    return os.path.relpath(Path(path).resolve(), Path(lock_path).resolve().parent)


def _shared_model(base_lock: Path, models: dict, name: str, model: Path) -> str | None:
    """The name of the lock's model entry --model shares (model:NAME), else None; a local folder's file
    list is checked here, before any data is converted."""
    shared = str(model)[len(MODEL_REFERENCE):] if str(model).startswith(MODEL_REFERENCE) else None
    if shared is not None and shared not in models:
        raise InputError(f"--model {model}: {base_lock} has no model entry of that name (models: "
                         f"{', '.join(sorted(models)) or 'none'}).")
    if shared is None and name in models:
        raise InputError(f"--pin {name}: {base_lock} already has a model entry {name!r}; choose another profile name "
                         f"or share it with --model {MODEL_REFERENCE}{name}.")
    if shared is None and not hub_pin.is_hub(model):
        if not model.is_dir():
            raise InputError(f"--model {model}: expected a model folder (config.json, *.safetensors, tokenizer files).")
        model_names([p.name for p in model.iterdir() if p.is_file()], str(model))
    return shared


def pin(base_lock: Path, new_lock: Path, name: str, task: str, model: Path, data: Path, notice: str | None,
        evaluator_wheel: Path | None = None, settings: dict | None = None) -> dict:
    """Write new_lock = base_lock + profile `name`; returns (the profile, its model entry)."""
    from .lock import LOCK_SCHEMA_VERSION, lock_from_bytes, parse_lock, profile_settings
    from .task_spec import require_data_for, spec_for

    profile_settings(settings or {}, f"--pin {name}: the profile's settings")  # before any data is converted
    if new_lock.exists():
        raise InputError(f"--new-lock {new_lock} already exists; a lock is never overwritten (pins never change).")
    base = lock_from_bytes(Path(base_lock).read_bytes(), base_lock)
    if name in base.profiles:
        raise InputError(f"--pin {name}: {base_lock} already has a profile of that name; choose another.")
    raw = json.loads(Path(base_lock).read_text(encoding="utf-8"))  # the base as written: no pin rewritten
    if task not in base.evaluator.tasks:  # its YAML pinned from the installed lm-eval, checked against the wheel
        from .task_pin import pin_task

        pin_task(raw, task, evaluator_wheel)
        base = parse_lock(raw, Path(base_lock), "")
    spec = spec_for(base, task)
    models = base.raw.get("models", {})
    shared = _shared_model(base_lock, models, name, model)
    target = Path(new_lock).parent / f"{name}-data"
    if hub_pin.is_hub(data):
        data_entry = hub_data_resource(data, spec, base.raw)
    elif target.exists():
        raise InputError(f"{target}: already exists; the converted data of profile {name} is never overwritten.")
    else:
        target.mkdir(parents=True)
    try:
        if not hub_pin.is_hub(data):
            data_entry = dict(data_resource(data, spec, base.raw, target), path=relative(target, new_lock))
        # the expensive step (a download, hashing weights) last; a shared entry is already pinned
        model_entry = (models[shared] if shared is not None
                       else _model_entry(model, new_lock, bool((settings or {}).get("add_bos_token"))))
    except BaseException:
        if target.is_dir():
            for leftover in target.iterdir():
                leftover.unlink()
            target.rmdir()
        raise
    profile = {
        "task": task,
        # records carry the description: the folders as the lock writes them, never as given on this machine
        "description": f"{name}: task {task}, model {_written(model_entry)}, data {_written(data_entry)}, "
                       "pinned by prepare.py --pin",
        "model": shared if shared is not None else name,  # an entry of the lock's models
        "data": data_entry,
    }
    if settings:  # the profile's own run settings (attention, add_bos_token): both paths use them
        profile["settings"] = settings
    if notice:
        profile.update(demo=True, notice=notice)
    raw["profiles"][name] = profile
    raw.setdefault("models", {})[profile["model"]] = model_entry
    raw["schema_version"] = LOCK_SCHEMA_VERSION  # models: the entries profiles share (lock schema 4)
    text = json.dumps(raw, indent=2, sort_keys=True) + "\n"
    checked = parse_lock(json.loads(text), Path(new_lock), "")  # the new lock must read before it exists
    require_data_for(spec, checked.profile(name))
    atomic.write_text(new_lock, text)
    return profile, model_entry
