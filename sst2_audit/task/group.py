"""An lm-eval group (mmlu) run as its subtasks, and lm-eval's group aggregation re-derived (SOURCE_MAP 68-70).

A lock's `groups` entry names the group's YAML and one profile per subtask it runs, each on its first
`rows` dev rows (hash order: a prefix, never a choice). Every subtask is an ordinary run with both paths,
identity and records (run/job); the group adds group.json.

lm-eval aggregates a group over every leaf task below it, nested groups flattened (0.4.9.2:
evaluator_utils.consolidate_group_results; 0.4.13: api/group.py Group.aggregate), with
aggregate_subtask_metrics (the mean, weighted by each subtask's size when the group says weight_by_size; the
default differs by release) and pooled_sample_stderr (0.4.13: unweighted_mean_stderr for an unweighted mean).
The run calls those functions of the pinned lm-eval on lm-eval's per-subtask numbers (simple_evaluate runs
one subtask at a time here, so it never aggregates itself): the official group number. Our own code re-derives the same
from each path's per-subtask summaries; the run and the audit compare them bit for bit. Subtasks are
aggregated in task-name order (lm-eval's order follows its task index; the sums may round otherwise in
the last bit, which is why the order is recorded).
"""

import math
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.lock import GroupPin
from sst2_audit.formats.releases import release_of
from sst2_audit.task.evaluator_pin import installed_root, verify_pinned
from sst2_audit.task.spec import spec_for
from sst2_audit.task.yaml_file import read as read_yaml
from sst2_audit.util.errors import CheckFailed, InputError

GROUP_FILE = "group.json"
GROUP_CARD = "GROUP.md"  # card.group_card of group.json: the audit regenerates it byte for byte


@dataclass(frozen=True)
class GroupSpec:
    pin: GroupPin
    yaml_files: tuple  # the group YAMLs read: the group's own, then its subgroups'
    aggregate: tuple  # ((metric, weight_by_size), ...) from aggregate_metric_list; () when it aggregates nothing
    leaves: tuple  # every installed leaf task of the group, nested groups flattened
    members: tuple  # (task, profile) of the subtasks run, in aggregation order (task name)
    unweighted_stderr: str = "pooled"  # the stderr of an unweighted mean, the lock's release's (formats/releases)


def _tags(raw: dict) -> list:
    tag = raw.get("tag")
    return [tag] if isinstance(tag, str) else [t for t in tag or [] if isinstance(t, str)]


def _config(path: Path) -> dict:
    """A YAML as lm-eval reads it (includes merged; a subject's tag may sit in an included file), read by the
    one safe reader (task/yaml_file); {} for one it refuses."""

    root = installed_root()
    try:
        config = read_yaml(root, path.relative_to(root).as_posix(), where="group YAML").config
    except (InputError, CheckFailed, ValueError):  # a YAML the reader refuses is no member
        return {}
    return config if isinstance(config, dict) else {}


def _index(folder: Path) -> tuple:
    """({group name: (YAML path, config)}, {tag: [tasks]}, {tasks}) of the YAMLs in the group's folder."""
    groups = {}
    tags: dict = {}
    tasks = set()
    for path in sorted(folder.glob("*.yaml")):
        config = _config(path)
        if isinstance(config.get("group"), str):
            groups[config["group"]] = (path, config)
        elif isinstance(config.get("task"), str):
            tasks.add(config["task"])
            for tag in _tags(config):
                tags.setdefault(tag, []).append(config["task"])
    return groups, tags, tasks


def resolve(yaml: str, group: str, weight_by_size_default: bool = False) -> tuple:
    """(YAMLs read, aggregate, leaves) of lm-eval group (or tag) `group` defined by `yaml` (relative to the
    installed package): its YAML and its subgroups', its aggregate_metric_list (an entry without weight_by_size
    takes the release's default), every leaf task below it."""
    root = installed_root()
    groups, tags, tasks = _index((root / yaml).parent)
    read, leaves = [], []

    def walk(entry: str, depth: int) -> None:
        if depth > 8:
            raise InputError(f"group {group}: nested more than 8 deep at {entry}.")
        if entry in groups:
            path, config = groups[entry]
            read.append(str(path.relative_to(root)))
            for child in config.get("task") or []:
                if not isinstance(child, str):
                    raise InputError(f"group {entry}: an inline task config ({str(child)[:40]!r}) is not re-derived.")
                walk(child, depth + 1)
        elif entry in tags:
            leaves.extend(sorted(tags[entry]))
        elif entry in tasks:
            leaves.append(entry)
        else:
            raise InputError(f"group {group}: member {entry!r} is no task, tag or group beside {yaml}.")

    if group in groups and str(groups[group][0].relative_to(root)) == yaml:
        walk(group, 0)
        return tuple(read), _aggregate(groups[group][1], group, weight_by_size_default), tuple(leaves)
    if group not in groups and group in tags and group in _tags(_config(root / yaml)):
        # a tag (inverse_scaling_mc in 0.4.9.2): lm-eval runs its tasks and reports no group number
        return (yaml,), (), tuple(sorted(tags[group]))
    raise InputError(f"{yaml} defines no group (nor tag) {group!r}.")


def find_group_yaml(group: str, near: str) -> str:
    """The installed YAML that defines lm-eval group (or tag) `group`, looked for beside a subtask's YAML
    (`near`) and in the folders above it up to lm_eval/tasks, where lm-eval's groups sit beside their tasks."""
    root = installed_root()
    folder, top = (root / near).parent, root / "lm_eval" / "tasks"
    while folder != top and top in folder.parents:
        groups, tags, _ = _index(folder)
        if group in groups:
            return str(groups[group][0].relative_to(root))
        if group in tags:
            return _tagging_yaml(root, folder, group)
        folder = folder.parent
    raise InputError(f"--task {group}: no YAML beside {near} or above it defines that group or tag; a group is "
                     "pinned from its subtasks' folders.")


def _tagging_yaml(root: Path, folder: Path, tag: str) -> str:
    return next(str(path.relative_to(root)) for path in sorted(folder.glob("*.yaml")) if tag in _tags(_config(path)))


def group_spec(lock, name: str) -> GroupSpec:
    if name not in lock.groups:
        raise InputError(f"{lock.path}: unknown group {name!r}; this lock defines groups "
                         f"{', '.join(sorted(lock.groups)) or '(none)'}.")
    pin = lock.groups[name]
    release = release_of(lock.evaluator.version)
    try:
        read, aggregate, leaves = resolve(pin.yaml, pin.group, release.group_weight_by_size_default)
    except InputError as error:
        raise InputError(f"{lock.path}: groups.{name}: {error}") from None
    unpinned = [path for path in read if path not in lock.evaluator.files]
    if unpinned:
        raise InputError(f"{lock.path}: group {pin.group} reads {', '.join(unpinned)}, which evaluator.files does not "
                         "pin.")
    verify_pinned(lock, {path: lock.evaluator.files[path] for path in read})
    members = sorted((lock.profile(profile).task, profile) for profile in pin.profiles)
    outside = [task for task, _ in members if task not in leaves]
    if outside:
        raise InputError(f"{lock.path}: groups.{name}: {', '.join(outside)} is not a subtask of {pin.group}.")
    drawing = [task for task, _ in members if spec_for(lock, task).draws_random]
    if len(drawing) > 1:  # read in lm-eval's tasks/__init__.py (0.4.9.2) and tasks/manager.py (0.4.13), not measured
        raise InputError(f"{lock.path}: groups.{name}: the subtasks {', '.join(drawing)} each draw their docs from "
                         "random (process_docs); lm-eval's group run builds them in one process from one seeded "
                         "state, each drawing after those built before it (0.4.9.2 in the reverse of the group's "
                         "list), while the audit draws each as lm-eval draws the subtask run alone. Pin and run "
                         "each subtask on its own (sst2-audit prepare --pin).")
    return GroupSpec(pin, read, aggregate, leaves, tuple(members), release.group_unweighted_stderr)


def _aggregate(raw: dict, group: str, weight_by_size_default: bool) -> tuple:
    found = []
    for entry in raw.get("aggregate_metric_list") or []:
        if not isinstance(entry, dict) or entry.get("aggregation", "mean") != "mean" or \
                entry.get("filter_list", "none") not in ("none", ["none"]):
            raise InputError(f"group {group}: aggregate_metric_list entry {str(entry)[:60]!r} is not a mean over "
                             "unfiltered results, the one aggregation re-derived.")
        found.append((entry["metric"], bool(entry.get("weight_by_size", weight_by_size_default))))
    return tuple(found)


# --- lm-eval's group aggregation, re-derived (lm_eval/api/metrics.py) ---

def aggregate(values: list, sizes: list, weight_by_size: bool) -> float:
    """aggregate_subtask_metrics: the mean of the subtasks' numbers, weighted by size when asked."""
    weights = sizes if weight_by_size else [1] * len(sizes)
    return sum([value * size for value, size in zip(values, weights)]) / sum(weights)


def pooled_stderr(stderrs: list, sizes: list) -> float:
    """pooled_sample_stderr."""
    variance = (sum([(size - 1) * stderr ** 2 * size for size, stderr in zip(sizes, stderrs)])
                / (sum(sizes) - len(sizes)))
    return math.sqrt(variance / sum(sizes))


def unweighted_mean_stderr(stderrs: list) -> float:
    """unweighted_mean_stderr (0.4.13): the stderr of the plain mean of k independent subtask means."""
    return math.sqrt(sum(stderr ** 2 for stderr in stderrs)) / len(stderrs)


def numbers(spec: GroupSpec, per_member: list, sizes: list, functions=None) -> dict:
    """{metric: value, metric_stderr: value} of the group from each member's {metric: .., metric_stderr: ..};
    `functions` = lm-eval's own (aggregate_subtask_metrics, pooled_sample_stderr, unweighted_mean_stderr or
    None) for the official number."""
    mean, pooled, unweighted = functions or (aggregate, pooled_stderr, unweighted_mean_stderr)
    found = {}
    for metric, weight_by_size in spec.aggregate:
        found[metric] = float(mean([m[metric] for m in per_member], sizes, weight_by_size))
        stderrs = [m[f"{metric}_stderr"] for m in per_member]
        found[f"{metric}_stderr"] = float(pooled(stderrs, sizes) if weight_by_size or spec.unweighted_stderr == "pooled"
                                          else unweighted(stderrs))
    return found


def official_functions(spec: GroupSpec) -> tuple:
    """The pinned lm-eval's own aggregation functions (lm_eval/api/metrics.py) for the official number."""
    from lm_eval.api import metrics

    return (metrics.aggregate_subtask_metrics, metrics.pooled_sample_stderr,
            getattr(metrics, "unweighted_mean_stderr", None) if spec.unweighted_stderr != "pooled" else None)
