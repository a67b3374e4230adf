"""run.py --group: every subtask of a lock's group as an ordinary run (both paths, identity, records), then
group.json with the group's numbers computed by lm-eval's own aggregation functions and by ours (group.py)."""

from pathlib import Path

from sst2_audit.formats import records
from sst2_audit.pages.card import group_card
from sst2_audit.protocol.rules import notice_for
from sst2_audit.run import job as run_job
from sst2_audit.task.group import GROUP_CARD, GROUP_FILE, group_spec, numbers, official_functions
from sst2_audit.task.spec import require_data_for, spec_for
from sst2_audit.util import atomic
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file
from sst2_audit.util.progress import say


def member_numbers(record, metrics: list) -> tuple:
    """({metric, metric_stderr} as lm-eval reported the subtask, the same from our independent path): the metrics
    the group aggregates, or every metric of the subtask when it aggregates none (a tag)."""
    metrics = metrics or list(record.metrics)
    missing = [m for m in metrics if m not in record.metrics]
    if missing:
        raise InputError(f"task {record.task} reports {record.metrics}; its group aggregates {missing} too.")
    official = {key: record.lm_eval_reported[key] for m in metrics for key in (m, f"{m}_stderr")}
    independent = {key: value for m in metrics for key, value in (
        (m, record.summaries["independent"][m].value), (f"{m}_stderr", record.summaries["independent"][m].stderr))}
    return official, independent


def group_record(lock, spec, run_name: str, out: Path, runs: list, official_functions=None) -> records.GroupRecord:
    """runs: (task, profile, run folder name) in spec.members' order, each holding its run.json."""
    metrics = [metric for metric, _ in spec.aggregate]
    members = []
    for task, profile, folder in runs:
        record = records.read(out / folder / records.RUN_FILE, records.RunRecord)
        official, independent = member_numbers(record, metrics)
        members.append(records.GroupMember(task, profile, folder, sha256_file(out / folder / records.RUN_FILE),
                                           len(record.questions), official, independent))
    sizes = [member.rows for member in members]
    official = numbers(spec, [m.official for m in members], sizes, official_functions)
    profile = lock.profile(spec.pin.profiles[0])
    return records.GroupRecord(
        run_name=run_name, group_name=spec.pin.name, group=spec.pin.group, demo=profile.demo,
        notice=spec.pin.notice or notice_for(profile), lock_sha256=lock.sha256,
        group_yaml_files={path: lock.evaluator.files[path] for path in spec.yaml_files},
        aggregate=[{"metric": metric, "weight_by_size": weight} for metric, weight in spec.aggregate],
        leaves_installed=len(spec.leaves), rows_per_subtask=spec.pin.rows, members=members, official=official,
        independent=numbers(spec, [m.independent for m in members], sizes))


def run_group(lock, name: str, cache: Path, out: Path, private: Path, run_name: str) -> records.GroupRecord:
    spec = group_spec(lock, name)
    if Path(out).exists():
        raise InputError(f"--out {out} already exists; a group's folder is never overwritten.")
    runs = []
    for number, (task, profile_name) in enumerate(spec.members, start=1):
        say(f"[group {spec.pin.group}: subtask {number}/{len(spec.members)}, {task}, first {spec.pin.rows} dev rows]")
        profile = lock.profile(profile_name)
        task_spec = spec_for(lock, task)
        require_data_for(task_spec, profile)
        run_job.execute(run_job.RunOptions(lock, profile, Path(cache) / profile_name, Path(out) / task,
                                           Path(private) / task, f"{run_name}-{task}", task_spec, rows=spec.pin.rows))
        runs.append((task, profile_name, task))
    record = group_record(lock, spec, run_name, Path(out), runs, official_functions(spec))
    ours = numbers(spec, [m.official for m in record.members], [m.rows for m in record.members])
    if ours != record.official:  # our aggregation of lm-eval's numbers must be lm-eval's, bit for bit
        raise CheckFailed(f"group {spec.pin.group}: lm-eval's aggregation gives {record.official}, ours {ours}.")

    atomic.write_text(Path(out) / GROUP_CARD, group_card(record))
    atomic.write_json(Path(out) / GROUP_FILE, records.to_dict(record))  # last: its presence means complete
    return record


def summary_lines(record: records.GroupRecord) -> list:
    lines = [f"*** {record.notice} ***"] if record.demo else []
    lines.append(f"group {record.group} ({record.group_name}): {len(record.members)} of its {record.leaves_installed} "
                 f"installed subtasks, the first {record.rows_per_subtask} dev rows of each")
    for member in record.members:
        shown = ", ".join(f"{k} {v:.4f}" for k, v in member.official.items() if not k.endswith("_stderr"))
        lines.append(f"  {member.task:<40} {member.rows} rows  {shown}")
    for key, value in record.official.items():
        lines.append(f"  group {key:<34} official {value!r}  independent {record.independent[key]!r}")
    if not record.official:
        lines.append(f"  no group number: lm-eval reports none for {record.group} (a tag, or no aggregate_metric_list)")
    return lines
