"""A plain lm-eval run of many tasks adopted as the run it is (issue 65): the run is read first (formats/lm_eval_run),
each task it logged is matched to the reviewer's profile that pins it, every matched task goes through the one-task
levels (audit/adopt.py, the model loaded once: adopt_rescore.model_key), the run's groups are re-aggregated as the
lock's pinned group YAML and the run's release aggregate, and a task no profile pins is listed with the command
that pins it: a limit of the run's verdict (exit 4), never a silent skip."""

from dataclasses import dataclass, field

from sst2_audit.audit.adopt_rescore import rescored_summary
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats.adopted_run import AdoptedGroup
from sst2_audit.formats.lm_eval_run import nested_leaves
from sst2_audit.protocol.metrics import result_key
from sst2_audit.scoring.summaries import bootstrap_iters
from sst2_audit.task.group import group_spec, numbers
from sst2_audit.task.spec import spec_for
from sst2_audit.util.commands import command_line, lock_words
from sst2_audit.util.errors import InputError


UNPINNED = "no profile of the lock pins it"


@dataclass
class RunPlan:
    members: list  # (task, profile name), in the run's task order
    left_out: dict  # task -> why it is not adopted, in words (no profile pins it: the command that pins it)
    notes: list = field(default_factory=list)  # how a task that several profiles pin was matched


def pin_command(lock, task: str, config) -> str:
    """The command that pins a task of the run: its data source taken from the run's logged config when it names
    one (a claim: the pin hashes what it fetches)."""
    data = config.get("dataset_path") if isinstance(config, dict) else None
    # a datasets builder name (a run on local files: `parquet` with data_files) names no source to pin
    local = data in ("parquet", "json", "csv", "text", "arrow")
    data = data if isinstance(data, str) and data and len(data) < 200 and not local else "DATA"
    return command_line("prepare", *lock_words(lock.given), "--pin", "NAME", "--task", task, "--model", "MODEL",
                        "--data", data, "--new-lock", "NEW.lock.json")


def _profile_for(lock, task: str, shots, notes: list) -> str | None:
    """The profile of the lock that pins `task`: the only one, else the one whose num_fewshot is the run's n-shot."""
    pinning = sorted(name for name, profile in lock.profiles.items() if profile.task == task)
    if len(pinning) < 2:
        return pinning[0] if pinning else None
    spec = spec_for(lock, task)
    fitting = [name for name in pinning if lock.settings_for(name, spec)["num_fewshot"] == shots] or pinning
    notes.append(f"task {task}: profiles {', '.join(pinning)} pin it; {fitting[0]} is taken (" +
                 ("its num_fewshot is the run's n-shot" if fitting != pinning else "the first by name; none has the "
                  f"run's n-shot {shots!r}") + "); --profile adopts the task with another")
    return fitting[0]


def plan_run(lock, index, tasks=None) -> RunPlan:
    """Which profile adopts each task of the run (`tasks`: the --task selection, each a task the run logged)."""
    if tasks:
        absent = [task for task in tasks if task not in index.tasks]
        if absent:
            raise InputError(f"--task {', '.join(absent)}: the run at {index.results_path} logged samples of task(s) "
                             f"{', '.join(index.tasks)} only.")
    plan = RunPlan([], {})
    configs = index.results.get("configs") if isinstance(index.results.get("configs"), dict) else {}
    for task in (tasks or index.tasks):
        profile = _profile_for(lock, task, index.n_shot(task), plan.notes)
        if profile is None:
            plan.left_out[task] = f"{UNPINNED}, not adopted (pin it: {pin_command(lock, task, configs.get(task))})"
        else:
            plan.members.append((task, profile))
    plan.left_out.update({task: "not selected (--task), not adopted" for task in index.tasks
                          if tasks and task not in tasks})
    if not plan.members:
        raise InputError(f"{index.results_path}: no task of this run is pinned by a profile of {lock.given} (the run "
                         f"logged {', '.join(index.tasks)}). " + " ".join(
                             f"Task {task}: {why}." for task, why in plan.left_out.items()))
    return plan


def _reported(index, group: str) -> dict:
    """A group's numbers as the run reports them (0.4.9.2 and 0.4.13 both write `groups`; `results` also holds it)."""
    found = (index.results.get("groups") or {}).get(group) if isinstance(index.results.get("groups"), dict) else None
    found = found if isinstance(found, dict) else index.results["results"].get(group)
    return {key: value for key, value in (found or {}).items() if isinstance(value, float)}


def _pin_of(lock, group: str) -> str | None:
    names = sorted(name for name, pin in lock.groups.items() if pin.group == group)
    return names[0] if names else None


def check_groups(lock, index, adoptions: dict, level: LevelResult) -> list:
    """Each group of the run re-aggregated from its adopted subtasks' re-derived numbers (and the reviewer's own
    rescored ones) by the pinned group YAML's aggregation in the lock's release; a group the lock does not pin, or
    with a subtask not adopted, is a limit. adoptions: task -> Adoption (each passed its levels)."""
    found = []
    for group in sorted(index.groups):
        leaves, reported, pin = nested_leaves(index, group), _reported(index, group), _pin_of(lock, group)
        record = AdoptedGroup(group, leaves, pin, reported, {}, {})
        found.append(record)
        missing = [task for task in leaves if task not in adoptions]
        if pin is None or missing:
            level.unchecked.append(f"group {group}: not re-derived: " + (
                f"the lock pins no group {group}" if pin is None else
                f"its subtask(s) {', '.join(missing)} were not adopted"))
            continue
        spec = group_spec(lock, pin)
        members = [adoptions[task] for task in leaves]
        sizes = [len(adoption.questions) for adoption in members]
        record.rederived = numbers(spec, [adoption.rederived for adoption in members], sizes)
        for metric, _ in spec.aggregate:
            for name in (metric, f"{metric}_stderr"):
                level.expect(f"groups.{group}", f"{name},none (re-aggregated from the subtasks' re-derived numbers)",
                             record.rederived[name], reported.get(result_key(name)))
        rescored = [rescored_summary(a.questions.values(), a.spec.metrics, bootstrap_iters(a.settings))
                    for a in members]
        if all(summary.get("rows") == size for summary, size in zip(rescored, sizes)):
            record.rescored = numbers(spec, rescored, sizes)
    return found


def group_numbers(groups: list) -> list:
    """The reviewer's number of each group, right under the verdict as a task's is."""
    lines = []
    for group in groups:
        for key, theirs in group.reported.items():
            metric = key.split(",")[0]
            if metric.endswith("_stderr"):
                continue
            ours = group.rescored.get(metric)
            lines.append(f"{group.group} {metric} (group): reported {theirs:.3f} (their scores) / " +
                         (f"rescored {ours:.3f} (yours, re-aggregated)" if ours is not None else "not rescored here"))
    return lines
