"""The lock's shape as the strict schema reader checks it (formats/schema.py, as for every record).

Every object holds exactly these keys (a NotRequired one may be absent), every value its exact JSON type;
nothing is coerced and no unknown key is ignored. What a value means (paths inside the lm_eval package, a
source's required keys, bounds of the run settings, which profiles a group names) is checked after, by
formats/lock.py. Upgrades from older lock versions run before this shape is checked.
"""

from typing import Any, NotRequired, TypedDict


class FileEntry(TypedDict):
    path: str
    sha256: str | None  # null: not knowable before the first download (a hub file); said explicitly
    split: NotRequired[str]  # a data file's split
    rows: NotRequired[int]
    size: NotRequired[int]


class WheelPin(TypedDict):
    name: str
    sha256: str
    size: NotRequired[int]


class MemberPin(TypedDict):
    path: str
    sha256: str
    size: NotRequired[int]


class Converted(TypedDict):
    file: str
    sha256: str


class ResourceEntry(TypedDict):
    """A model or data resource; which keys a source needs is a semantic check (lock._resource)."""
    source: str
    files: list[FileEntry]
    columns: NotRequired[list]  # [name, type] pairs, checked by fields.columns_of
    repo_id: NotRequired[str]
    repo_type: NotRequired[str]
    revision: NotRequired[str]
    package: NotRequired[str]
    version: NotRequired[str]
    wheel: NotRequired[WheelPin]
    member: NotRequired[MemberPin]
    path: NotRequired[str]
    sha256_note: NotRequired[str]
    converted_from: NotRequired[dict[str, Converted]]  # --pin's JSONL/CSV sources, split -> the file converted


class ProfileEntry(TypedDict):
    model: Any  # a ResourceEntry inline, or the name of one of the lock's models (lock._model_of)
    data: ResourceEntry
    task: NotRequired[str]
    demo: NotRequired[bool]
    description: NotRequired[str]
    notice: NotRequired[str]
    settings: NotRequired[dict]  # what a profile may set: run_settings.profile_settings


class GroupEntry(TypedDict):
    group: str
    yaml: str
    profiles: list[str]
    rows: int
    notice: NotRequired[str]


class EvaluatorEntry(TypedDict):
    package: str
    version: str
    commit: str
    task: str
    task_yaml: str
    files: dict[str, str]
    tasks: dict[str, str]
    note: NotRequired[str]
    wheel: NotRequired[WheelPin]


class SplitEntry(TypedDict):
    salt: str
    rule: str
    dev_rows: int
    confirm_rows: int


class RunSettingsEntry(TypedDict):
    dtype: str
    device: str
    threads: int
    attention: str
    seed: int
    max_length: int
    batch_size: int
    num_fewshot: int
    numeric_mode: dict[str, str]
    numeric_mode_note: NotRequired[str]
    numeric_probe_sha256: NotRequired[str | None]
    threads_note: NotRequired[str]
    add_bos_token: NotRequired[bool]


class LockDocument(TypedDict):
    schema: str
    schema_version: int
    evaluator: EvaluatorEntry
    split: SplitEntry
    run_settings: RunSettingsEntry
    profiles: dict[str, ProfileEntry]
    models: NotRequired[dict[str, ResourceEntry]]
    groups: NotRequired[dict[str, GroupEntry]]
