"""A plain lm-eval run as a whole, read before any profile is chosen (issue 65): its one results file, the tasks
whose samples lm-eval logged beside it, and its groups. Untrusted input: only the fields the index needs are read
here, each checked for its type; every task's own fields are read (strictly) when that task is adopted."""

from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.lm_eval_output import find_results_file, logged_tasks, MAX_RESULTS_BYTES
from sst2_audit.util.errors import InputError


@dataclass(frozen=True)
class RunIndex:
    results_path: Path
    date_id: str
    results: dict  # the results file, parsed (each task's fields are checked when it is adopted)
    tasks: tuple  # the tasks lm-eval logged samples of, by file name, sorted
    groups: dict  # group -> its subtasks as lm-eval logged them (group_subtasks), groups with no samples of their own

    def samples_path(self, task: str) -> Path:
        return self.results_path.with_name(f"samples_{task}_{self.date_id}.jsonl")

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
