"""A plain lm-eval run as a whole, read before any profile is chosen (issue 65): where lm-eval wrote its files, its
one results file, the tasks whose samples lm-eval logged beside it, and its groups. Untrusted input: only the fields
the index needs are read here, each checked for its type; every task's own fields are read (strictly) when that task
is adopted (formats/lm_eval_output.py)."""

import os
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.lm_eval_output import MAX_RESULTS_BYTES, PlainOutput, read_plain_files
from sst2_audit.util.errors import InputError


# --- where lm-eval writes a run (loggers/evaluation_tracker.py): OUT/<model>/results_<date>.json, samples beside it
def _results_files(path: Path) -> list:
    """results_*.json in `path` or one folder below it (lm-eval's OUT/<model>/), or `path` itself."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"{path}: neither an lm-eval output folder (--output_path) nor a results file.")
    return sorted([*path.glob("results_*.json"), *path.glob("*/results_*.json")])


def find_results_file(path) -> tuple:
    """(results file, its date id): the one results_<date>.json in `path` (or one folder below), or `path` itself."""
    path = Path(path)
    found = _results_files(path)
    if len(found) != 1:
        listed = ", ".join(str(p) for p in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        raise InputError(f"{path}: expected exactly one lm-eval results file (results_<date>.json, as "
                         f"`lm_eval --output_path` writes it), found {len(found)}{': ' + listed if found else ''}; "
                         "name the results file itself.")
    results = found[0]
    if not (results.name.startswith("results_") and results.name.endswith(".json")):
        raise InputError(f"{results}: expected lm-eval's results_<date>.json.")
    if not results.name.isascii():  # lm-eval's date id is digits, '-', 'T', '.'; the name is recorded and bundled
        raise InputError(f"{results}: expected lm-eval's results_<date>.json, whose date lm-eval writes in ASCII; "
                         "this name holds other characters (a renamed file?).")
    return results, results.name[len("results_"):-len(".json")]


def find_plain_output(path, task: str) -> tuple[Path, Path]:
    """(results file, samples file of `task`): lm-eval names both with one date id."""
    results, date_id = find_results_file(path)
    samples = samples_file(results, task, date_id)
    if samples is None:
        logged = logged_tasks(results.parent, date_id)
        if not logged:
            raise InputError(f"{results}: no samples file beside it (samples_<task>_{date_id}.jsonl); adopt needs "
                             "the per-sample log: re-run lm_eval with --log_samples.")
        raise TaskNotInRun(f"{results}: the run logged samples of task(s) {', '.join(logged)}, not of task {task} "
                           f"(expected samples_{task}_{date_id}.jsonl)", logged)
    return results, samples


# lm-eval names a task's samples file .jsonl; the Open LLM Leaderboard v2's earliest details name the same JSON Lines
# .json (their writer, a fork of about 0.4.2). Both are read as JSON Lines.
SAMPLES_SUFFIXES = (".jsonl", ".json")


def samples_file(results: Path, task: str, date_id: str) -> Path | None:
    """The samples file of `task` beside a results file, under either name; both at once is ambiguous (exit 2)."""
    found = [results.with_name(f"samples_{task}_{date_id}{suffix}") for suffix in SAMPLES_SUFFIXES]
    found = [path for path in found if os.path.lexists(path) and strict_json.require_regular(path)]
    if len(found) > 1:
        raise InputError(f"{results.parent}: both {found[0].name} and {found[1].name} are there; keep the one the run "
                         "wrote.")
    return found[0] if found else None


def _utf8_name(path: Path) -> bool:
    """lm-eval names a samples file by its task, text of its YAML: a name with a byte that is not UTF-8 was not
    written by it, and its task name could be neither recorded nor bundled (refused, exit 2, naming the file)."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{path}: a samples file whose name is not UTF-8; lm-eval names it samples_<task>_<date> "
                         "after the task's name (a file renamed on another system?).") from None
    return True


class TaskNotInRun(InputError):
    """The run holds other tasks than the one asked for: the message names them (the command adds which profile or
    pin takes each)."""

    def __init__(self, message: str, tasks: list):
        super().__init__(message)
        self.tasks = tasks


def logged_tasks(folder: Path, date_id: str) -> list:
    """The tasks whose samples lm-eval wrote beside a results file (samples_<task>_<date id>.jsonl, or .json), by
    file name; anything else under such a name (a link, a folder, a pipe) is refused naming it, not passed over as
    if the run had logged no samples."""
    found = set()
    for suffix in (f"_{date_id}{ending}" for ending in SAMPLES_SUFFIXES):
        found |= {item.name[len("samples_"):-len(suffix)] for item in folder.glob(f"samples_*{suffix}")
                  if len(item.name) > len("samples_") + len(suffix) and strict_json.require_regular(item)
                  and _utf8_name(item)}
    return sorted(found)


def read_plain_output(path, task: str, metrics, keep_text: bool = False, max_samples: int | None = None,
                      **layout) -> PlainOutput:
    """A plain lm-eval run's results and samples of `task`, found as lm-eval names them, read once, strictly.
    layout: how a row of the task's shape is read (task/shapes.py::samples_args); keep_text: keep each sample's text
    (an export), not only its digests."""
    return read_plain_files(*find_plain_output(path, task), task, metrics, public=False, keep_text=keep_text,
                            max_samples=max_samples, **layout)


@dataclass(frozen=True)
class RunIndex:
    results_path: Path
    date_id: str
    results: dict  # the results file, parsed (each task's fields are checked when it is adopted)
    tasks: tuple  # the tasks lm-eval logged samples of, by file name, sorted
    groups: dict  # group -> its subtasks as lm-eval logged them (group_subtasks), groups with no samples of their own

    def samples_path(self, task: str) -> Path:
        found = samples_file(self.results_path, task, self.date_id)
        return found or self.results_path.with_name(f"samples_{task}_{self.date_id}.jsonl")

    def n_shot(self, task: str):
        shots = self.results.get("n-shot")
        return shots.get(task) if isinstance(shots, dict) else None


def _groups(results: dict, where: str, tasks: tuple) -> dict:
    """group_subtasks: {name: [subtask, ...]}, a leaf task's entry empty (both releases log it so)."""
    raw = results.get("group_subtasks", {})
    if not isinstance(raw, dict):
        raise InputError(f"{where}: group_subtasks: expected an object of lists of task names, got "
                         f"{type(raw).__name__}.")
    groups = {}
    for name, members in raw.items():
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise InputError(f"{where}: group_subtasks.{str(name)[:60]}: expected a list of task names.")
        if members and name not in tasks:
            groups[name] = tuple(members)
    return groups


def _results(results_path: Path) -> dict:
    raw = strict_json.loads(strict_json.read_bytes(results_path, MAX_RESULTS_BYTES), str(results_path))
    if not isinstance(raw, dict) or not isinstance(raw.get("results"), dict):
        raise InputError(f"{results_path}: expected an lm-eval results file (an object with a `results` object).")
    return raw


def read_run_index(path) -> RunIndex:
    """The run at `path` (lm-eval's --output_path folder or its results file): what it ran, before any profile."""
    results_path, date_id = find_results_file(path)
    raw = _results(results_path)
    tasks = tuple(logged_tasks(results_path.parent, date_id))
    if not tasks:
        raise InputError(f"{results_path}: no samples file beside it (samples_<task>_{date_id}.jsonl); adopt needs "
                         "the per-sample log: re-run lm_eval with --log_samples.")
    return RunIndex(results_path, date_id, raw, tasks, _groups(raw, str(results_path), tasks))


def index_of(results_path: Path, tasks: tuple) -> RunIndex:
    """The index of a run's public results copy (an adopted run's folder): the tasks are the record's."""
    raw = _results(results_path)
    return RunIndex(results_path, "", raw, tasks, _groups(raw, str(results_path), tasks))


def nested_leaves(index: RunIndex, group: str, above: tuple = ()) -> list:
    """Every leaf task below a group of the run, nested groups flattened (lm-eval aggregates over these)."""
    if group in above:
        raise InputError(f"{index.results_path}: group_subtasks: group {group[:60]} contains itself.")
    found = []
    for member in index.groups.get(group, ()):
        found += nested_leaves(index, member, (*above, group)) if member in index.groups else [member]
    return found
