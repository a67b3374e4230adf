"""resources.lock.json: the pinned resources, split rule and run settings.

The lock is read once, validated field by field, and turned into frozen
objects; every later step takes its pins from here and nowhere else.
"""

import dataclasses
import hashlib
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.schema import typed
from sst2_audit.formats.fields import columns_of, safe_relative
from sst2_audit.formats.lock_document import LockDocument, ResourceEntry
from sst2_audit.formats.releases import release_for
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import canonical_json, sha256_text
from sst2_audit.util.sanitize import RUN_NAME
from sst2_audit.util.suggest import did_you_mean
from sst2_audit.formats.run_settings import (
    MAX_ROWS, NUMERIC_MODE_KEYS, RUN_SETTING_DEFAULTS, check_numbers, sha256_value, profile_settings,
)

LOCK_SCHEMA = "sst2-audit/resources.lock"
# 4: `models`, model entries that several profiles reference by name; 3: evaluator.tasks and a profile's
# task; 2: run_settings.numeric_mode (older ones upgraded on read)
LOCK_SCHEMA_VERSION = 4
SOURCES = ("hub", "wheel", "demo", "local")
EVALUATOR_FIELDS = ("package", "version", "commit", "task", "task_yaml", "files", "tasks")
SPLIT_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


@dataclass(frozen=True)
class LockedFile:
    path: str
    sha256: str | None
    split: str | None = None
    rows: int | None = None
    size: int | None = None


@dataclass(frozen=True)
class Resource:
    kind: str  # "model" or "data"
    source: str
    files: tuple
    options: dict = field(default_factory=dict)

    def get(self, key: str):
        return self.options.get(key)


@dataclass(frozen=True)
class Profile:
    name: str
    demo: bool
    description: str
    model: Resource
    data: Resource
    pins_sha256: str
    task: str  # the lm-eval task this profile's data is for (the lock's default task when not stated)
    notice: str | None = None  # a demo profile's notice (an sst2 demo profile's when not stated: IMPLIED)
    settings: dict = field(default_factory=dict)  # run settings this profile's model needs (PROFILE_SETTINGS)
    demo_is_not: str = ""  # what the card says a demo profile's run is not ("not a measurement of TASK")

    @property
    def resources(self):
        return (self.data, self.model)  # data first: the cheap checks fail before a large download

    @property
    def fully_hashed(self) -> bool:
        return all(f.sha256 for r in self.resources for f in r.files)


@dataclass(frozen=True)
class SplitRule:
    """How the evaluated split's rows become dev and sealed confirmation ids (split.py)."""
    salt: str
    rule: str  # the rule in words, recorded in every run
    dev_rows: int
    confirm_rows: int


@dataclass(frozen=True)
class Evaluator:
    """The pinned lm-eval: version, commit, the files it is verified by, the tasks the lock pins."""
    package: str
    version: str
    commit: str
    task: str  # the default task (a profile that names none)
    task_yaml: str
    files: dict  # path under site-packages -> sha256
    tasks: dict  # task -> its YAML's path (pinned in files)


@dataclass(frozen=True)
class Lock:
    path: Path
    sha256: str
    raw: dict  # the lock as read, after the upgrade chain: compared whole by the audit
    evaluator: Evaluator
    split: SplitRule
    run_settings: dict
    profiles: dict
    schema_version_read: int = 0  # the schema_version as written, before any upgrade
    groups: dict = field(default_factory=dict)  # name -> GroupPin: an lm-eval group over some profiles' tasks
    # set by lock_from_bytes (every lock a command reads); empty for a lock only parsed from text (--pin's check)
    data: bytes = field(default=b"", repr=False, compare=False)  # the bytes read and parsed (a bundle packs these)
    given: str = ""  # the path as the user gave it (messages name the file so)

    def settings_for(self, profile: str, spec) -> dict:
        """The run settings of a profile: the defaults, the lock's, the task YAML's own `num_fewshot`
        (MMLU-style YAMLs state 5, say), then the profile's own (attention, add_bos_token, num_fewshot...)."""
        from_yaml = {} if spec.num_fewshot is None else {"num_fewshot": spec.num_fewshot}
        return {**RUN_SETTING_DEFAULTS, **self.run_settings, **from_yaml, **self.profile(profile).settings}

    def most_dev_rows(self, profile: str) -> int:
        """The most dev rows a run of this profile can have: its own dev_rows (a full-split profile: MAX_ROWS),
        else the lock's."""
        own = self.profiles[profile].settings.get("dev_rows") if profile in self.profiles else None
        return MAX_ROWS if own == "all" else own or self.split.dev_rows

    def profile(self, name: str) -> Profile:
        if name not in self.profiles:
            raise InputError(f"{self.path}: unknown profile {name!r}{did_you_mean(name, self.profiles)}; this lock "
                             f"defines {', '.join(sorted(self.profiles))}.")
        return self.profiles[name]

    @property
    def folder(self) -> Path:
        return self.path.parent


@dataclass(frozen=True)
class GroupPin:
    """An lm-eval group run over the tasks of some profiles, `rows` dev rows each (group.py)."""
    name: str
    group: str  # the group's name in lm-eval
    yaml: str  # its YAML under the lm_eval package's folder, pinned in evaluator.files
    profiles: tuple  # one profile per subtask run
    rows: int  # the first `rows` dev rows of each subtask (hash order)
    notice: str | None = None  # what every output of the group says it measured (a demo group)


def _groups(raw: dict, profiles: dict, evaluator: dict, dev_rows: int, where: str) -> dict:
    found = {}
    for name, entry in raw.get("groups", {}).items():
        here = f"{where}: groups.{name}"
        members = entry["profiles"]
        unknown = [m for m in members if m not in profiles]
        if not members or unknown or len(set(members)) != len(members):
            raise InputError(f"{here}.profiles: expected distinct profiles of this lock, got {members!r}.")
        tasks = [profiles[m].task for m in members]
        if len(set(tasks)) != len(tasks):
            raise InputError(f"{here}.profiles: two profiles run the same task ({tasks}); a group runs each subtask "
                             "once.")
        if entry["yaml"] not in evaluator["files"]:
            raise InputError(f"{here}.yaml: {entry['yaml']} is not pinned in evaluator.files.")
        if not 2 <= entry["rows"] <= dev_rows:  # one row has no stderr (lm-eval: "N/A"), so no group stderr
            raise InputError(f"{here}.rows: expected 2..{dev_rows} dev rows per subtask, got {entry['rows']}.")
        notice = entry.get("notice")
        if notice is not None and not notice.strip():
            raise InputError(f"{here}.notice: expected text, got {notice!r}.")
        found[name] = GroupPin(name, entry["group"], entry["yaml"], tuple(members), entry["rows"], notice)
    return found


def _files(raw, kind, where):
    files = []
    for number, entry in enumerate(raw["files"]):
        here = f"{where}.files[{number}]"
        path = entry["path"]
        parts = path.split("/")
        if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
            raise InputError(f"{here}.path: expected a relative, normalized path inside the resource "
                             f"(no leading '/', no '.', '..' or empty parts), got {path!r}.")
        split = entry.get("split")
        if kind == "data" and not (isinstance(split, str) and SPLIT_NAME.match(split)):
            raise InputError(f"{here}: data files need a split name (lower-case letters, digits, '_'), got {split!r}.")
        rows = entry.get("rows")
        if rows is not None and rows < 1:
            raise InputError(f"{here}: rows must be a positive integer, got {rows!r}.")
        files.append(LockedFile(path, sha256_value(entry["sha256"], here), split, rows, entry.get("size")))
    if kind == "data" and len({f.split for f in files}) != len(files):
        raise InputError(f"{where}: names split {sorted(f.split for f in files)} more than once; one file per split.")
    return tuple(files)


def _resource(raw, kind, where):
    source = raw["source"]
    if source not in SOURCES:
        raise InputError(f"{where}: source must be one of {SOURCES}, got {source!r}.")
    options = {k: v for k, v in raw.items() if k not in ("source", "files")}
    required = {"hub": ("repo_id", "repo_type", "revision"), "wheel": ("package", "version", "wheel", "member"),
                "local": ("path",), "demo": ()}
    for key in required[source]:
        if key not in options:
            raise InputError(f"{where}: a {source} resource needs field {key!r}.")
    if source == "hub":
        revision = options["revision"]
        if len(revision) != 40:
            raise InputError(f"{where}.revision: expected a full 40-digit commit id, got {revision!r}.")
    for key in ("wheel", "member"):
        if key in options:
            sha256_value(options[key]["sha256"], f"{where}.{key}")
    files = _files(raw, kind, where)
    if source == "local" and not all(f.sha256 for f in files):
        raise InputError(f"{where}: every file of a local resource needs its sha256.")
    return Resource(kind, source, files, options)


def numeric_mode_change(mine: "Lock", theirs: "Lock") -> tuple | None:
    """(their mode, my mode) when two locks differ in their numeric mode and nothing else, else None."""
    def without_mode(lock):
        settings = {k: v for k, v in lock.raw["run_settings"].items() if k not in NUMERIC_MODE_KEYS}
        return dict(lock.raw, run_settings=settings, schema_version=None)

    if mine.run_settings.get("numeric_mode") == theirs.run_settings.get("numeric_mode"):
        return None
    if canonical_json(without_mode(mine)) != canonical_json(without_mode(theirs)):
        return None
    return theirs.run_settings["numeric_mode"], mine.run_settings["numeric_mode"]


def _model_of(body: dict, models: dict, here: str, where: str) -> tuple:
    """(the model resource's entry, where it is written): inline, or a name in the lock's models (`where`: the
    lock's file, which every message names)."""
    model = body["model"]
    if isinstance(model, str):
        if model not in models:
            raise InputError(f"{here}.model: {model!r} is not one of the lock's models "
                             f"({', '.join(sorted(models)) or 'none'}).")
        return models[model], f"{where}: models.{model}"
    if not isinstance(model, dict):
        raise InputError(f"{here}.model: expected a model resource or the name of one of the lock's models, got "
                         f"{type(model).__name__} {str(model)[:60]!r}.")
    typed(ResourceEntry, model, f"{here}.model")
    return model, f"{here}.model"


def _upgrade_from_1(raw: dict) -> dict:
    """Version 1 had no numeric mode: its runs ran in the CPU's native mode."""
    settings = raw.get("run_settings")
    if isinstance(settings, dict) and "numeric_mode" not in settings:
        settings = dict(settings, numeric_mode={})
    return dict(raw, schema_version=2, run_settings=settings)


def _upgrade_from_2(raw: dict) -> dict:
    """Version 2 knew one task: evaluator.task with its task_yaml."""
    evaluator = raw.get("evaluator")
    if isinstance(evaluator, dict) and "tasks" not in evaluator and isinstance(evaluator.get("task"), str):
        evaluator = dict(evaluator, tasks={evaluator["task"]: evaluator.get("task_yaml")})
    return dict(raw, schema_version=3, evaluator=evaluator)


def _upgrade_from_3(raw: dict) -> dict:
    """Version 3 had each profile's model inline; inline entries stay valid in version 4."""
    return dict(raw, schema_version=4)


# The reference task's rules, the only task-specific ones in the tool, and data of the lock format: what a
# profile of task sst2 may leave unstated (sst2 was the only task of lock versions 1-2, and the shipped locks'
# SST-2 profiles are written so; their bytes are pinned by every record made with them). Its data's columns,
# and a demo profile's notice. Every other task's profile states its columns; a demo profile of another task
# without a notice gets protocol.rules.notice_for's words, the same for every task.
IMPLIED = {"sst2": {"columns": [["sentence", "string"], ["label", "int64"], ["idx", "int32"]],
                    "notice": "EMBEDDED DEMO: sentences written for sst2-audit and a de-quantized Q4_1 model; "
                              "not a GLUE SST-2 measurement.",
                    "demo_is_not": "not a GLUE SST-2 measurement"}}  # the card's words with that notice


def _data_body(data: dict, task: str) -> dict:
    implied = IMPLIED.get(task, {}).get("columns")
    return dict(data, columns=implied) if "columns" not in data and implied else data


def _notice(body: dict, task: str) -> tuple:
    """(the profile's notice, what the card says a demo is not): stated, else implied, else the same for all."""
    implied = IMPLIED.get(task, {}) if body.get("demo") and not body.get("notice") else {}
    return body.get("notice") or implied.get("notice"), implied.get("demo_is_not", f"not a measurement of {task}")


UPGRADES = {1: _upgrade_from_1, 2: _upgrade_from_2, 3: _upgrade_from_3}


def _evaluator(evaluator: dict, where: str) -> dict:
    release_for(evaluator, where)  # one supported release, by its published wheel

    # A lock can come from someone else: every evaluator path must name a file inside the installed lm_eval
    # package (the files hashed and parsed are the reviewer's own install, never a path the lock chose).
    for name, digest_value in evaluator["files"].items():
        safe_relative(name, f"{where}: evaluator.files key")
        sha256_value(digest_value, f"{where}: evaluator.files[{name}]")
    safe_relative(evaluator["task_yaml"], f"{where}: evaluator.task_yaml")
    tasks = evaluator["tasks"]
    if evaluator["task"] not in tasks or tasks[evaluator["task"]] != evaluator["task_yaml"]:
        raise InputError(f"{where}: evaluator.tasks must map the default task {evaluator['task']!r} to "
                         f"{evaluator['task_yaml']!r}, got {tasks.get(evaluator['task'])!r}.")
    for name, yaml_path in tasks.items():
        if yaml_path not in evaluator["files"]:
            raise InputError(f"{where}: evaluator.tasks.{name}: its YAML {yaml_path!r} must be pinned in "
                             "evaluator.files.")
    return evaluator


def _profiles(raw: dict, evaluator: dict, where: str) -> dict:
    tasks, models, profiles = evaluator["tasks"], raw.get("models", {}), {}
    for name, body in raw["profiles"].items():
        here = f"{where}: profiles.{name}"
        if not RUN_NAME.match(name):  # it names cache folders and lines of output
            raise InputError(f"{where}: profile name {name[:80]!r}: expected 1-100 letters, digits, '.', '_' or '-', "
                             "starting with a letter or digit.")
        model_body, model_where = _model_of(body, models, here, where)
        task = body.get("task", evaluator["task"])
        notice, demo_is_not = _notice(body, task)
        profiles[name] = Profile(
            name=name,
            demo=body.get("demo", False),
            description=body.get("description", ""),
            model=_resource(model_body, "model", model_where),
            data=_resource(_data_body(body["data"], task), "data", f"{here}.data"),
            pins_sha256=sha256_text(canonical_json(dict(body, model=model_body) if body["model"] != model_body
                                                    else body)),  # a named model's pins bind the cache too
            task=task,
            notice=notice,
            demo_is_not=demo_is_not,
            settings=profile_settings(body.get("settings", {}), f"{here}.settings"),
        )
        if profiles[name].data.get("columns") is not None:  # validated here; missing ones refused where used
            columns_of(profiles[name].data)
        if profiles[name].task not in tasks:
            raise InputError(f"{here}.task: {profiles[name].task!r} is not one of evaluator.tasks {sorted(tasks)}.")
    return profiles


def _document(raw: dict, where: str) -> dict:
    """The lock's shape, checked by the one strict schema reader: each top-level entry as `where: key`."""
    hints = typing.get_type_hints(LockDocument)
    missing = sorted(LockDocument.__required_keys__ - set(raw))
    unknown = sorted(set(raw) - set(hints))
    if unknown:
        raise InputError(f"{where}: unknown top-level key(s) {', '.join(repr(k[:40]) for k in unknown[:5])}; a lock "
                         f"holds {', '.join(hints)}.")
    if missing:
        raise InputError(f"{where}: top-level field(s) {', '.join(missing)} missing.")
    for key, value in raw.items():  # checked, not rebuilt: the lock keeps its own key order when written back
        typed(hints[key], value, f"{where}: {key}")
    return raw


def parse_lock(raw, path: Path, digest: str) -> Lock:
    where = str(path)
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object at the top level.")
    written = raw.get("schema_version")
    while (raw.get("schema") == LOCK_SCHEMA and type(raw.get("schema_version")) is int
           and raw["schema_version"] in UPGRADES):
        raw = UPGRADES[raw["schema_version"]](raw)
    if raw.get("schema") != LOCK_SCHEMA or raw.get("schema_version") != LOCK_SCHEMA_VERSION:
        raise InputError(
            f"{where}: expected schema {LOCK_SCHEMA!r} version {LOCK_SCHEMA_VERSION}, "
            f"got {raw.get('schema')!r} version {raw.get('schema_version')!r}."
        )
    raw = _document(raw, where)
    evaluator, split, settings = _evaluator(raw["evaluator"], where), raw["split"], raw["run_settings"]
    check_numbers(split, settings, where)
    profiles = _profiles(raw, evaluator, where)
    if not profiles:
        raise InputError(f"{where}: no profiles defined.")
    return Lock(Path(path), digest, raw, Evaluator(**{k: evaluator[k] for k in EVALUATOR_FIELDS}),
                SplitRule(**{k: split[k] for k in ("salt", "rule", "dev_rows", "confirm_rows")}), settings, profiles,
                written if type(written) is int else LOCK_SCHEMA_VERSION,  # the check above: an int was read
                _groups(raw, profiles, evaluator, split["dev_rows"], where))


def lock_from_bytes(data: bytes, path) -> Lock:
    """A lock from the bytes read once: its sha256 is of exactly the bytes parsed."""
    lock = parse_lock(strict_json.loads(data, str(path)), Path(path).resolve(), hashlib.sha256(data).hexdigest())
    return dataclasses.replace(lock, data=data, given=str(path))


def load_lock(path) -> Lock:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise InputError(f"{path}: cannot read the lock file ({error.strerror}).") from None
    return lock_from_bytes(data, path)
