"""The group level: group.json against the reviewer's lock, each subtask's run.json by sha256, and the
group's numbers re-derived from the subtask records (group.py); every subtask's run is audited as any run."""

from pathlib import Path

from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats import records, strict_json
from sst2_audit.pages.card import group_card
from sst2_audit.protocol.rules import notice_for
from sst2_audit.run.group import member_numbers
from sst2_audit.task.group import GROUP_CARD, GROUP_FILE, group_spec, numbers
from sst2_audit.task.split import mode_for
from sst2_audit.util.hashing import sha256_file


def read_group(folder: Path) -> tuple:
    """(the group record, group.json's bytes as read: what a group bundle packs)."""
    path = Path(folder) / GROUP_FILE
    data = strict_json.read_bytes(path)
    return records.from_dict(records.GroupRecord, strict_json.loads(data, str(path)), str(path)), data


def check(folder: Path, record: records.GroupRecord, lock) -> LevelResult:
    result = LevelResult("group")
    spec = group_spec(lock, record.group_name)  # the reviewer's lock decides what the group is
    profile = lock.profile(spec.pin.profiles[0])

    card = Path(folder) / GROUP_CARD
    result.expect("group", f"{GROUP_CARD} (regenerated from group.json)", group_card(record),
                  card.read_text(encoding="utf-8") if card.is_file() else None)
    result.expect("group", "group (the lock's)", spec.pin.group, record.group)
    result.expect("group", "lock_sha256 (the reviewer's lock)", lock.sha256, record.lock_sha256)
    result.expect("group", "rows_per_subtask (the lock's)", spec.pin.rows, record.rows_per_subtask)
    result.expect("group", "group_yaml_files (the lock's pins)", {p: lock.evaluator.files[p] for p in spec.yaml_files},
                  record.group_yaml_files)
    result.expect("group", "aggregate (the group YAML's)",
                  [{"metric": m, "weight_by_size": w} for m, w in spec.aggregate], record.aggregate)
    result.expect("group", "leaves_installed", len(spec.leaves), record.leaves_installed)
    result.expect("group", "demo and notice (the lock's)", [profile.demo, spec.pin.notice or notice_for(profile)],
                  [record.demo, record.notice])
    result.expect("group", "members (task, profile), in order", [list(m) for m in spec.members],
                  [[m.task, m.profile] for m in record.members])
    metrics = [metric for metric, _ in spec.aggregate]
    allowed = [list(m) for m in spec.members]
    for member in record.members:
        where = f"subtask {member.task}"
        if [member.task, member.profile] not in allowed:  # named above; never a path the lock does not name
            continue
        run_file = Path(folder) / member.run / records.RUN_FILE
        if not result.expect(where, "run folder (the task's name, inside the group folder)", member.task, member.run) \
                or not run_file.is_file():
            result.fail(f"{where}: {run_file} is missing")
            continue
        result.expect(where, "run.json sha256", sha256_file(run_file), member.run_sha256)
        run = records.read(run_file, records.RunRecord)
        result.expect(where, "run's task and profile", [member.task, member.profile], [run.task, run.profile])
        result.expect(where, "mode (the first rows_per_subtask dev rows)",
                      mode_for(run.split.dev_ids[:spec.pin.rows], run.split.dev_ids), run.mode)
        result.expect(where, "rows", len(run.questions), member.rows)
        official, independent = member_numbers(run, metrics)
        result.expect(where, "official (lm-eval's reported numbers)", official, member.official)
        result.expect(where, "independent (our summaries)", independent, member.independent)
    sizes = [m.rows for m in record.members]
    result.expect("group numbers", "official (lm-eval's aggregation of its numbers, re-derived)",
                  numbers(spec, [m.official for m in record.members], sizes), record.official)
    result.expect("group numbers", "independent (the same of our independent path's numbers)",
                  numbers(spec, [m.independent for m in record.members], sizes), record.independent)
    return result
