"""prepare.py --pin: write a NEW lock that pins a user's own model folder and data for a task.

Everything a reviewer needs to re-derive the pins is in the new lock: every model file's sha256,
every data file's sha256 and columns (read from the data itself), and where a JSONL or CSV file
was converted to parquet, the source file's sha256 next to the parquet's. The base lock is copied
as it is (no existing pin changes) and the new one is written once, atomically, never over a file.
Every check that can fail on the user's own files runs here, before anything is downloaded,
converted or loaded.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.lock import load_lock, lock_from_bytes, LOCK_SCHEMA_VERSION, parse_lock
from sst2_audit.formats.releases import release_of
from sst2_audit.formats.run_settings import profile_settings
from sst2_audit.resources import hub_pin
from sst2_audit.resources.task_pin import pin_task
from sst2_audit.scoring.decode import context_tokens
from sst2_audit.scoring.independent import encode_pair
from sst2_audit.scoring.model import load_tokenizer
from sst2_audit.task import fewshot
from sst2_audit.task.dataset import read_parquet
from sst2_audit.task.spec import require_data_for, spec_for
from sst2_audit.task.split import make_split
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_file, sha256_text
from sst2_audit.util.sanitize import printable, RUN_NAME
from sst2_audit.resources.pin_data import own_file, data_resource, hub_data_resource

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                   "tokenizer.model", "added_tokens.json", "chat_template.jinja")
PICKLES = (".bin", ".pt", ".pth", ".pkl", ".ckpt")
MODEL_REFERENCE = "model:"  # --model model:NAME shares an entry of the base lock's models


def _profile_name(name: str) -> str:
    """Profile names name a folder beside the new lock (<name>-data) and lines of output: a safe slug."""

    if not (isinstance(name, str) and RUN_NAME.match(name)):
        raise InputError(f"--pin {name!r}: a profile name is 1-100 letters, digits, '.', '_' or '-', starting with a "
                         "letter or digit (it names the folder <name>-data beside the new lock).")
    return name


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


def _listed(folder: Path) -> list:
    """The names of a model folder's files, refused with the name shown escaped where one is not UTF-8 text."""

    names = []
    for entry in folder.iterdir():
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"--model {folder}: a file name is not UTF-8 text ({printable(repr(entry.name))[:120]}); "
                             "rename it.") from None
        if entry.is_file() or entry.is_symlink():
            names.append(entry.name)
    return names


def model_files(folder: Path) -> list:
    """[{path, sha256}] of a local model folder (its own files: a symlink among them is refused)."""
    if not folder.is_dir():
        raise InputError(f"--model {folder}: expected a model folder (config.json, *.safetensors, tokenizer files).")
    chosen = model_names(_listed(folder), str(folder))
    return [{"path": name, "sha256": sha256_file(own_file(folder / name, f"--model {folder}"))} for name in chosen]


def _check_bos(folder: Path, bos: bool, model) -> None:
    """With add_bos_token pinned, the tokenizer must open a text with its BOS token (without it, no
    special token is added at all, so there is nothing to check)."""
    if not bos:
        return

    tokenizer = load_tokenizer(folder)  # the class run, identity and rescore load
    first = tokenizer("Question", add_special_tokens=bos)["input_ids"][:1]
    if tokenizer.bos_token_id is None or first != [tokenizer.bos_token_id]:
        raise InputError(f"--add-bos-token: the tokenizer of {model} adds no BOS token (bos_token_id "
                         f"{tokenizer.bos_token_id!r}, first token {first}); leave the option out for this model.")


def _model_entry(model, new_lock: Path, bos: bool, name: str) -> dict:
    if hub_pin.is_hub(model):
        with hub_pin.snapshot(model, "model", lambda names: model_names(names, str(model)), "--model") as (commit,
                                                                                                           fetched):
            _check_bos(fetched["tokenizer_config.json"].parent, bos, model)  # the downloaded snapshot's folder
            files = [{"path": n, "sha256": sha256_file(f)} for n, f in fetched.items()]
        return {"source": "hub", "repo_id": hub_pin.parse(model, "--model")[0], "repo_type": "model",
                "revision": commit, "files": files}
    _check_bos(model, bos, model)
    return {"source": "local", "path": relative(model, new_lock, folder_variable(name, "model")),
            "files": model_files(model)}


def _written(resource: dict) -> str:
    """A resource as records name it: hub:REPO@COMMIT, or a local folder by the sha256 of its files (never a
    path: the description is published in every run record and bundle)."""
    if resource["source"] == "hub":
        return f"hub:{resource['repo_id']}@{resource['revision']}"
    files = sorted(f"{entry['path']}:{entry['sha256']}" for entry in resource["files"])
    return f"local files (sha256 of the file list {sha256_text(chr(10).join(files))[:16]})"


def relative(path: Path, lock_path: Path, variable: str) -> str:
    """A folder as the lock writes it: relative to the lock's own folder when it is inside it; else the
    ${VARIABLE} that names it on each machine (a path climbing out of the lock's folder would publish the
    folders above it, a home folder among them, in the lock every bundle carries)."""
    written = os.path.relpath(Path(path).resolve(), Path(lock_path).resolve().parent)
    return "${" + variable + "}" if written == ".." or written.startswith("../") else written


def folder_variable(name: str, kind: str) -> str:
    """SST2_AUDIT_<PROFILE>_<KIND>: the variable a lock names an outside folder by."""
    import re

    return f"SST2_AUDIT_{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}_{kind.upper()}"


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
        model_names(_listed(model), str(model))
    return shared


def pin(base_lock: Path, new_lock: Path, name: str, task: str, model: Path, data: Path, notice: str | None,
        evaluator_wheel: Path | None = None, settings: dict | None = None, replace: bool = False,
        shared_folder: Path | None = None) -> tuple:
    """Write new_lock = base_lock + profile `name`; returns (the profile, its model entry, lines to show: files
    ignored, what the input-length measurement found). `shared_folder`: the local folder of a shared model
    (model:NAME), so that its tokenizer measures the inputs too (and shows its chat template)."""

    profile_settings(settings or {}, f"--pin {_profile_name(name)}: the profile's settings")  # before any data
    if new_lock.exists() and not replace:
        raise InputError(f"--new-lock {new_lock} already exists; a lock is never overwritten (pins never change). To "
                         f"replace your own earlier pin of profile {name}, add --replace.")
    atomic.require_writable_folder(Path(new_lock).parent, "--new-lock")
    if new_lock.exists():  # only with --replace
        _earlier_pin(new_lock, base_lock, name)
    base = lock_from_bytes(Path(base_lock).read_bytes(), base_lock)
    if name in base.profiles:
        raise InputError(f"--pin {name}: {base_lock} already has a profile of that name; choose another.")
    raw = json.loads(Path(base_lock).read_text(encoding="utf-8"))  # the base as written: no pin rewritten
    if task not in base.evaluator.tasks:  # its YAML pinned from the installed lm-eval, checked against the wheel
        pin_task(raw, task, evaluator_wheel)
        base = parse_lock(raw, Path(base_lock), "")
    spec = spec_for(base, task)
    models = base.raw.get("models", {})
    shared = _shared_model(base_lock, models, name, model)
    target = Path(new_lock).parent / f"{name}-data"
    if not hub_pin.is_hub(data) and target.exists() and not replace:
        raise InputError(f"{target}: already exists; the converted data of profile {name} is never overwritten. To "
                         "replace your own earlier pin, add --replace.")
    # Everything is written in a folder of its own and moved into place only when the whole pin succeeded:
    # a refusal at any step leaves nothing behind, so the retry is not refused as "already exists".
    if not hub_pin.is_hub(data):
        target.parent.mkdir(parents=True, exist_ok=True)
    staging = None if hub_pin.is_hub(data) else Path(tempfile.mkdtemp(prefix=f".{name}-data.", dir=target.parent))
    try:
        if staging is None:  # the data is on the hub (staging is made for a local folder only)
            data_entry = hub_data_resource(data, spec, base.raw)
        else:
            data_entry = dict(data_resource(data, spec, base.raw, staging),
                              path=relative(target, new_lock, folder_variable(name, "data")))
        # the expensive step (a download, hashing weights) last; a shared entry is already pinned
        model_entry = (models[shared] if shared is not None
                       else _model_entry(model, new_lock, bool((settings or {}).get("add_bos_token")), name))
        folder = model if shared is None else shared_folder
        _require_template(settings or {}, model_entry, folder)
        notes = _ignored_files(data, data_entry, spec)  # what the command says besides the pins
        profile, text, checked = _new_lock_text(raw, name, task, spec, shared, model_entry, data_entry, notice,
                                                settings, new_lock)
        if staging is not None and folder is not None and not hub_pin.is_hub(folder):  # with the pinned tokenizer
            fitted, note = _fitted_settings(spec, raw, checked.settings_for(name, spec), dict(settings or {}), staging,
                                            tuple((n, k) for n, k in data_entry["columns"]), folder)
            notes.append(f"input length: {note}")
            if fitted != dict(settings or {}):  # a max_length that fits: the lock is written with it
                profile, text, _ = _new_lock_text(raw, name, task, spec, shared, model_entry, data_entry, notice,
                                                  fitted, new_lock)
        _commit(staging, target, new_lock, text, replace)
        staging = None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return profile, model_entry, notes


def _require_template(settings: dict, model_entry: dict, folder) -> None:
    """--apply-chat-template needs the model's own template among its pinned files (task/chat.py reads it)."""
    names = [Path(f["path"]).name for f in model_entry.get("files", [])]
    if not settings.get("apply_chat_template") or "chat_template.jinja" in names or folder is None or \
            hub_pin.is_hub(folder):  # a hub model's tokenizer_config.json is read when the run renders
        return
    try:  # the project's strict reader (a config nested past Python's stack was exit 3 with json.loads)
        config = strict_json.read(Path(folder) / "tokenizer_config.json")
    except (OSError, InputError):
        config = {}
    if not isinstance(config, dict) or not isinstance(config.get("chat_template"), str):
        raise InputError(f"--apply-chat-template: the model {folder} has no chat template (expected a "
                         "chat_template.jinja file or a chat_template text in tokenizer_config.json); nothing was "
                         "written.")


MAX_LENGTH_STEP = 64  # a pinned max_length is the longest input rounded up to this, within the model's context


def _longest_input(spec, lock_raw: dict, settings: dict, data_folder: Path, columns, tokenizer) -> tuple:
    """(tokens, row idx) of the longest model input over the dev rows the lock's split rule scores, shots
    included: what the run's pre-flight would find, found here with the pinned tokenizer."""

    def rows_of(split: str) -> list:
        parquet = data_folder / f"{split}.parquet"
        return spec.processed(read_parquet(parquet, columns=columns), parquet, settings["seed"])

    rows = rows_of(spec.eval_split)
    by_idx = {row.idx: row for row in rows}
    rule = lock_raw["split"]
    split = make_split(list(by_idx), rule["salt"], rule["dev_rows"], rule["confirm_rows"], spec.eval_split,
                       settings.get("dev_rows"))
    plan = None
    if settings["num_fewshot"]:
        plan = fewshot.plan(spec, settings["num_fewshot"], settings["seed"],
                            fewshot.shot_docs(spec, lambda split: rows if split == spec.eval_split else rows_of(split)),
                            [by_idx[idx] for idx in split.dev_ids],
                            release_of(lock_raw["evaluator"]["version"]).fewshot_resamples)
    longest = (0, None)
    for idx in split.dev_ids:
        doc = by_idx[idx].doc
        prefix = plan.prefix(spec, idx, doc) if plan is not None else spec.prefix(doc)
        for context, candidate in spec.requests(doc, prefix):
            if spec.shape.decodes:  # the context and every token the decode may add
                tokens = (len(context_tokens(tokenizer, context, settings["add_bos_token"]))
                          + spec.generation.max_gen_toks)
            else:
                tokens = len(encode_pair(tokenizer, context, candidate, settings["add_bos_token"]).input_tokens)
            longest = max(longest, (tokens, idx))
    return longest


def _model_context(folder: Path) -> int | None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    context = config.get("max_position_embeddings") if isinstance(config, dict) else None
    return context if type(context) is int and context > 1 else None


def _fitted_settings(spec, raw: dict, base: dict, settings: dict, data_folder: Path, columns, model: Path) -> tuple:
    """The profile's settings with a max_length every scored input fits, and a note saying what was measured;
    exit 2 naming the row and the option where none can (the run would otherwise stop late). base: the settings
    the run will use (the new lock's settings_for the profile)."""

    if spec.shape.rolls:  # every window is cut to max_length (scoring/rolling.py): no text is too long
        return settings, f"rolling windows of max_length {base['max_length']} tokens (a loglikelihood_rolling task)"
    tokens, idx = _longest_input(spec, raw, base, data_folder, columns, load_tokenizer(model))
    if tokens <= base["max_length"]:
        return settings, f"longest scored input {tokens} tokens (row idx {idx}), within max_length {base['max_length']}"
    context = _model_context(model)
    if "max_length" in settings:
        raise InputError(f"--max-length {settings['max_length']}: row idx {idx} of the dev rows the lock scores is "
                         f"{tokens} tokens long (with its shots); the protocol never truncates. Give --max-length "
                         f"{tokens} or more" + (f" (the model's context is {context})." if context else "."))
    fit = -(-tokens // MAX_LENGTH_STEP) * MAX_LENGTH_STEP
    if context is not None:
        fit = min(fit, context)
    if context is not None and tokens > context:
        raise InputError(f"row idx {idx} of the dev rows the lock scores is {tokens} tokens long (with its shots), "
                         "more "
                         f"than the model's context of {context} (config.json max_position_embeddings); the protocol "
                         "never truncates. Pin fewer shots (--num-fewshot) or a model with a longer context.")
    return dict(settings, max_length=fit), (f"max_length {fit} pinned: the longest scored input is {tokens} tokens "
                                            f"(row idx {idx}), more than the lock's {base['max_length']}")


def _commit(staging: Path | None, target: Path, new_lock: Path, text: str, replace: bool) -> None:
    """Move the staged data into place and write the new lock; with --replace the earlier data folder is kept
    aside until the lock is written, and restored if that fails."""
    earlier = None
    if replace and target.exists():
        earlier = Path(tempfile.mkdtemp(prefix=f".{target.name}.replaced.", dir=target.parent))
        target.rename(earlier / "data")
    if staging is not None:
        staging.rename(target)  # the same folder: atomic; a target made meanwhile makes this fail
    try:
        atomic.write_text(new_lock, text, overwrite=replace)
    except BaseException:
        if staging is not None:
            shutil.rmtree(target, ignore_errors=True)
        if earlier is not None:
            (earlier / "data").rename(target)
            earlier.rmdir()
        raise
    if earlier is not None:
        shutil.rmtree(earlier, ignore_errors=True)


def _earlier_pin(new_lock: Path, base_lock: Path, name: str) -> None:
    """--replace replaces only this command's own earlier result: a lock that reads, holds profile `name`, and is
    the base lock plus that profile (nothing else of it differs)."""

    try:
        earlier, base = load_lock(new_lock), load_lock(base_lock)
    except InputError as error:
        raise InputError(f"--replace: {new_lock} is not a lock this command wrote ({error})") from None
    others = {key: value for key, value in earlier.raw["profiles"].items() if key != name}
    if name not in earlier.profiles or others != base.raw["profiles"]:
        raise InputError(f"--replace: {new_lock} is not an earlier pin of profile {name} on {base_lock} (its profiles "
                         f"differ); it is left as it is.")


def _ignored_files(data, data_entry: dict, spec) -> list:
    """A line naming the files of a --data folder the pin did not use (a split the task does not read)."""
    if hub_pin.is_hub(data) or not Path(data).is_dir():
        return []
    used = {entry["file"] for entry in data_entry.get("converted_from", {}).values()}
    ignored = sorted(p.name for p in Path(data).iterdir() if p.name not in used and not p.name.startswith("."))
    return [f"ignored in {data}: {', '.join(ignored)} (task {spec.name} reads the splits "
            f"{', '.join(sorted(spec.splits))})"] if ignored else []


def _new_lock_text(raw: dict, name: str, task: str, spec, shared, model_entry: dict, data_entry: dict, notice,
                   settings, new_lock: Path) -> tuple:
    """(the new profile, the new lock's text, that text read back by the lock's reader) before anything is written."""

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
    return profile, text, checked
