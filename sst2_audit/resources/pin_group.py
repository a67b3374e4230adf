"""`prepare.py --pin-group`: an lm-eval group (mmlu, a tag such as inverse_scaling_mc) pinned from your own
model and one data folder per subtask, as one new lock: one profile per subtask (each pinned exactly as
`--pin` pins one, the model pinned once and shared), the group's YAMLs checked against the pinned wheel,
and a `groups` entry that `prepare.py --group`, `run.py --group` and the group audit read.

Nothing is left behind by a refusal: each subtask's pin writes its data folder and an intermediate lock
beside the new lock; if any later step fails, what this command wrote is removed again.
"""

import json
import shutil
from pathlib import Path

from sst2_audit.formats.lock import lock_from_bytes, parse_lock
from sst2_audit.resources.pin import MODEL_REFERENCE, pin
from sst2_audit.resources.task_pin import find_yaml, pin_files
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.task.group import find_group_yaml, group_spec, resolve
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError
from sst2_audit.util.sanitize import RUN_NAME


def subtask_profile(name: str, task: str) -> str:
    """The profile a subtask is pinned as: the group's name and the task's, e.g. mine-mmlu_anatomy."""
    return f"{name}-{task}"


def parse_subtasks(given: list) -> list:
    """[(task, data folder)] from --subtask TASK=DATA options, each task once."""
    found = []
    for text in given:
        task, equals, data = text.partition("=")
        if not equals or not task or not data:
            raise InputError(f"--subtask {text!r}: expected TASK=DATA (an lm-eval task of the group and its data "
                             "folder), e.g. --subtask mmlu_anatomy=my-data/anatomy.")
        found.append((task, Path(data)))
    tasks = [task for task, _ in found]
    if len(found) < 2 or len(set(tasks)) != len(tasks):
        raise InputError(f"--subtask: expected at least two different tasks of the group, got {tasks}.")
    return found


def pin_group(base_lock: Path, new_lock: Path, name: str, group: str, subtasks: list, model: Path,
              notice: str | None, rows: int | None, evaluator_wheel: Path | None, settings: dict) -> tuple:
    """Write new_lock = base_lock + one profile per subtask + groups[name]; returns (the groups entry, the model
    entry they share, lines to show)."""
    if not RUN_NAME.match(name):
        raise InputError(f"--pin-group {name!r}: a group name is 1-100 letters, digits, '.', '_' or '-', starting "
                         "with a letter or digit.")
    if new_lock.exists():
        raise InputError(f"--new-lock {new_lock} already exists; a lock is never overwritten (pins never change).")
    base = lock_from_bytes(Path(base_lock).read_bytes(), base_lock)
    if name in base.groups:
        raise InputError(f"--pin-group {name}: {base_lock} already has a group of that name; choose another.")
    root = installed_root()
    yaml = find_group_yaml(group, find_yaml(subtasks[0][0], root))  # before any data is converted
    read, _, leaves = resolve(yaml, group)
    outside = [task for task, _ in subtasks if task not in leaves]
    if outside:
        raise InputError(f"--subtask {', '.join(outside)}: not a subtask of {group} ({yaml}); its subtasks include "
                         f"{', '.join(leaves[:8])}{' ...' if len(leaves) > 8 else ''} ({len(leaves)} in all).")
    steps, folders, notes, lock_in, model_entry = [], [], [], Path(base_lock), None
    try:
        for number, (task, data) in enumerate(subtasks):
            profile = subtask_profile(name, task)
            step = new_lock.parent / f".{new_lock.name}.{number}.part"
            shared = model if number == 0 else Path(f"{MODEL_REFERENCE}{subtask_profile(name, subtasks[0][0])}")
            _, entry, lines = pin(lock_in, step, profile, task, shared, data, notice, evaluator_wheel, settings,
                                  shared_folder=model)
            model_entry = model_entry or entry
            steps.append(step)  # only what this command wrote is removed
            folders.append(new_lock.parent / f"{profile}-data")
            notes += [f"{task}: {line}" for line in lines]
            lock_in = step
        raw = json.loads(lock_in.read_text(encoding="utf-8"))
        pin_files(raw, read, evaluator_wheel)
        raw.setdefault("groups", {})[name] = {
            "group": group, "yaml": yaml, "rows": rows or raw["split"]["dev_rows"],
            "profiles": [subtask_profile(name, task) for task, _ in subtasks], **({"notice": notice} if notice else {})}
        group_spec(parse_lock(raw, new_lock, ""), name)  # the lock's own reader and the group run's, before writing
        atomic.write_text(new_lock, json.dumps(raw, indent=2) + "\n")
    except BaseException:
        for folder in folders:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        for step in steps:  # the intermediate locks, whether the pin succeeded or not
            step.unlink(missing_ok=True)
    return raw["groups"][name], model_entry, notes
