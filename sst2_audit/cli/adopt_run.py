"""sst2-audit adopt OUT (no --profile) on a run of many tasks: every task the lock pins adopted in one command, the
model loaded once, one folder (adopted-run.json and one adopted folder per task) and one bundle; and `audit` of such
a folder or bundle. The run's verdict is the worst of its tasks', its groups' and the tasks it leaves out."""

import json
import shutil
import time
from dataclasses import asdict
from pathlib import Path

from sst2_audit.audit import leaderboard
from sst2_audit.audit.adopt import Adoption
from sst2_audit.audit.adopt_rescore import (record, reviewer_json, reviewer_numbers, reviewer_pairs, run_levels,
                                            shown_number)
from sst2_audit.audit.adopt_shapes import shape_for
from sst2_audit.audit.adopt_run import check_groups, group_numbers, UNPINNED
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.verdict import GroupOutcome
from sst2_audit.bundle import adopted as adopted_bundle
from sst2_audit.cli.adopt_shared import (adopted_target, audit_task, export_eee, export_ready, most_samples,
                                         refuse_unexported, write_task)
from sst2_audit.cli.common import audit_words, show_verdict, spec_for_run
from sst2_audit.formats import adopted_run, lm_eval_output, records, strict_json
from sst2_audit.formats.adopted import ADOPTED_FILE
from sst2_audit.formats.lm_eval_run import index_of
from sst2_audit.formats.manifest import cache_for
from sst2_audit.scoring.shards import from_launcher
from sst2_audit.util import atomic
from sst2_audit.util.commands import command_line
from sst2_audit.protocol.rules import notice_for
from sst2_audit.util.errors import CheckFailed, EXIT_PASS
from sst2_audit.util.progress import say, set_quiet
from sst2_audit.util.sanitize import printable


def _adoptions(args, lock, index, plan, shards, seed: int, models: dict) -> tuple:
    """({task: Adoption}, {task: Outcome}, {task: timings}): each task's levels in the run's order, one model."""
    adoptions = {}
    outcomes = {}
    timings: dict = {}
    for _, profile_name in plan.members:  # before any work
        refuse_unexported(args, spec_for_run(lock, lock.profile(profile_name), None))
    for number, (task, profile_name) in enumerate(plan.members, start=1):
        profile = lock.profile(profile_name)
        spec = spec_for_run(lock, profile, None)
        output = lm_eval_output.read_plain_files(
            index.results_path, index.samples_path(task), task, spec.metrics, public=False,
            **spec.shape.samples_args(spec), keep_text=getattr(args, "export_eee", None) is not None,
            max_samples=most_samples(profile, spec))
        say(f"[task {number}/{len(plan.members)}] {task} (profile {profile_name})")
        adoptions[task] = Adoption(lock, profile, spec, cache_for(args.cache, profile_name), output,
                                   0 if args.structural else args.rescore, args.seed, args.bound, shards=shards,
                                   models=models, shape=shape_for(spec))
        timings[task], start = {}, time.perf_counter()
        outcomes[task] = run_levels(adoptions[task], timings[task], seed)
        timings[task]["total"] = round(time.perf_counter() - start, 3)
    return adoptions, outcomes, timings


def adopt_run(args, lock, index, plan, models: dict) -> int:
    name, out = adopted_target(args, "adopted-run")
    shards = from_launcher()  # the same tasks in the same order on every process; rank 0 reports
    try:
        set_quiet(not shards.lead)
        seed = shards.seed(args.seed)
        adoptions, outcomes, timings = _adoptions(args, lock, index, plan, shards, seed, models)
        level = LevelResult("groups")
        passed = {task: adoptions[task] for task, outcome in outcomes.items() if not outcome.failed}
        groups = check_groups(lock, index, passed, level)
        run = GroupOutcome(outcomes, level, len(plan.members), bool(index.groups), kind="run",
                           limits=_limits(plan.left_out, level))
        code = _report(args, (name, out, seed), (index, plan, adoptions, timings), run, groups) if shards.lead \
            else None
        return shards.broadcast(code)
    finally:
        shards.close()


def _limits(left_out: dict, level: LevelResult) -> list:
    return [f"task {task}: {why}" for task, why in left_out.items()] + level.unchecked


def _table(rows: list) -> list:
    """The per-task verdict table: task, profile, rows, reported, rescored (yours), exit, reason."""
    head = ("task", "profile", "rows", "reported", "rescored (yours)", "exit", "reason")
    widths = [max(len(str(row[i])) for row in [head, *rows]) for i in range(len(head) - 1)]
    return ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)) + "  " + str(row[-1])
            for row in [head, *rows]]


def _row(task: str, adoption, outcome, pairs: list) -> tuple:
    """One task's table row: its first metric's reported number and the reviewer's, from reviewer_pairs."""
    _, theirs, ours, _ = pairs[0] if pairs else (None, None, None, 0)
    reason = (f"failed: {', '.join(outcome.failed)}" if outcome.failed else
              "" if outcome.exit_code == EXIT_PASS else (outcome.rows + outcome.scores_unverified + outcome.limits
                                                         + ["not everything verified"])[0][:80])
    rows = len(adoption.questions) or len({s.doc_id for s in adoption.output.samples})
    return (task, adoption.profile.name, rows, shown_number(theirs),
            "not rescored here" if ours is None else shown_number(ours), outcome.exit_code, reason)


def _sections(outcomes: dict, adoptions: dict) -> tuple[list, list, list, tuple]:
    """(each task's section, each task's table row, the --format json numbers, the leaderboard benchmarks' lines
    and numbers): the reviewer's numbers computed once per task."""
    found = {task: reviewer_pairs(adoptions[task]) for task in outcomes}
    return ([(task, outcomes[task], adoptions[task].profile, reviewer_numbers(adoptions[task], found[task]))
             for task in outcomes],
            [_row(task, adoptions[task], outcomes[task], found[task][1]) for task in outcomes],
            [number for task in outcomes for number in reviewer_json(adoptions[task], found[task])],
            leaderboard.run_numbers({task: (adoptions[task], found[task][1]) for task in outcomes}))


def _print_run(run, subject, head: list, found: tuple, groups: list, level: LevelResult) -> None:
    sections, rows, json_numbers, benchmarks = found
    numbers = [line for _, _, _, numbers in sections for line in numbers] + group_numbers(groups) + benchmarks[0]
    lines = [run.verdict(), *numbers, *head, *_table(rows)]
    for task, outcome, profile, task_numbers in sections:
        lines += ["", f"--- task {task} (profile {profile.name}) ---"]
        lines += [outcome.verdict()] + ([f"*** {notice_for(profile)} ***"] if profile.demo else [])
        for task_level in outcome.levels:
            lines += task_level.lines()
    lines += ["", *level.lines(), run.verdict()]
    show_verdict(lines, run, subject, json_numbers + benchmarks[1])


def _report(args, target: tuple, found: tuple, run, groups: list) -> int:
    (name, out, seed), (index, plan, adoptions, timings) = target, found
    outcomes, lock = run.members, next(iter(adoptions.values())).lock
    head = [f"adoption of the run {index.results_path}: {len(index.tasks)} task(s) logged ({', '.join(index.tasks)})"
            + (f", group(s) {', '.join(sorted(index.groups))}" if index.groups else "")
            + f", against the reviewer's lock {lock.given}", *plan.notes]
    ready = {task: export_ready(args, adoptions[task], outcomes[task]) for task in adoptions} \
        if not run.failed else {}  # built before the verdict is printed
    _print_run(run, index.results_path, head, _sections(outcomes, adoptions), groups, run.group)
    if run.failed:
        print(f"nothing written: an adoption that fails is not kept ({printable(out)})")
        return run.exit_code
    record_bytes, files = _write(out, name, seed, (index, plan, adoptions, timings), run, groups)
    print(f"adopted: {printable(out)} (audit it: {printable(command_line('audit', *audit_words(args, out)))})")
    for task, adoption in adoptions.items():
        export_eee(args, ready[task], adoption, files[task])
    if args.bundle:
        tasks = {task: (files[task], adoptions[task].cache) for task in outcomes}
        print(f"bundle: {printable(adopted_bundle.pack_run(record_bytes, tasks, name, lock, args.results))}")
    return run.exit_code


def _write(out: Path, name: str, seed: int, found: tuple, run, groups: list) -> tuple:
    """Each task's adopted folder, then adopted-run.json last: its presence means complete. Nothing half-written:
    the folder is new, and removed whole when a write fails."""
    index, plan, adoptions, timings = found
    atomic.new_directory(out, "--out")
    files = {}
    try:
        tasks = []
        for task, adoption in adoptions.items():
            task_record = record(adoption, name, seed, timings[task])
            files[task] = write_task(out / task, adoption, task_record)
            tasks.append(adopted_run.AdoptedTask(task, adoption.profile.name, run.members[task].exit_code,
                                                 task_record.reported, task_record.rescored_summary))
        first = next(iter(adoptions.values()))
        adopted_run.write(out / adopted_run.ADOPTED_RUN_FILE, adopted_run.AdoptedRun(
            name, first.lock.sha256, {"results_file": index.results_path.name,
                                      "results_sha256": first.output.results_sha256},
            tasks, dict(plan.left_out), groups, list(run.limits)))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return (out / adopted_run.ADOPTED_RUN_FILE).read_bytes(), files


def _tasks_of(body: bytes, where: str) -> list:
    return [member.task for member in adopted_run.from_dict(strict_json.loads(body, where), where).tasks]


def audit_adopted_run(args, path: Path, scratch: Path) -> int:
    """audit --out RUN or --bundle-file RUN.tar.gz: each task's adopted folder audited as a one-task adoption
    (one model for all), then the run's record: its tasks, the tasks it left out and its groups re-derived."""
    sums = None
    if path.is_file():
        try:
            folder, checks = adopted_bundle.unpack_run_verified(path, scratch, _tasks_of)
        except CheckFailed:
            print("VERDICT: FAIL (bundle SHA256SUMS and members): the bundle was refused before any record was "
                  "read; exit 1")
            raise
        sums = f"bundle SHA256SUMS and members: PASS ({checks} checks)"
    else:
        folder = path
    claimed = adopted_run.read(folder / adopted_run.ADOPTED_RUN_FILE)
    level = LevelResult("run record and groups")
    models: dict = {}
    adoptions = {}
    outcomes = {}
    present = sorted(item.name for item in folder.iterdir() if item.is_dir())
    level.expect(str(path), "task folders (one per task of adopted-run.json)",
                 sorted(member.task for member in claimed.tasks), present)
    for member in claimed.tasks:
        if not (folder / member.task / ADOPTED_FILE).is_file():
            level.fail(f"{member.task}: no adopted.json in its folder")
            continue
        if (folder / member.task / records.LIGHTEVAL_DETAILS_FILE).exists():
            level.fail(f"{member.task}: its folder holds a lighteval run's copy; the tasks of an adopted run are one "
                       "lm-eval run's")
            continue
        say(f"[task] {member.task}")
        outcomes[member.task], adoptions[member.task], task_record = audit_task(
            args, folder / member.task, models, claimed.source.get("results_sha256"))
        level.expect(f"tasks.{member.task}", "profile", task_record.profile, member.profile)
        # the run record's numbers of a task are its adopted.json's, which the task's audit held to what it found
        level.expect(f"tasks.{member.task}", "reported (its adopted.json's)", task_record.reported, member.reported)
        level.expect(f"tasks.{member.task}", "rescored (its adopted.json's rescored_summary)",
                     task_record.rescored_summary, member.rescored)
    level.expect("adopted-run.json", "lock_sha256 (your lock's)", args.reviewer_lock.sha256, claimed.lock_sha256)
    note = adopted_bundle.unread_note(folder, {adopted_run.ADOPTED_RUN_FILE, *present})  # folders: held above
    if note:
        level.notes.append(note)
    _check_run(args.reviewer_lock, folder, claimed, level)
    passed = {task: adoptions[task] for task, outcome in outcomes.items() if not outcome.failed}
    groups = check_groups(args.reviewer_lock, _index(folder, claimed, passed), passed, level) if passed else []
    if outcomes and not any(outcome.failed for outcome in outcomes.values()):
        level.expect("adopted-run.json", "groups (re-derived here)", [asdict(g) for g in groups],
                     [asdict(g) for g in claimed.groups])
    run = GroupOutcome(outcomes, level, len(claimed.tasks), bool(claimed.groups), kind="run",
                       limits=_limits(claimed.left_out, level))
    head = [f"audit of the adopted run {claimed.run_name} in {path}: {len(claimed.tasks)} task(s), against the "
            f"reviewer's lock {args.reviewer_lock.given}"] + ([sums] if sums else [])
    _print_run(run, path, head, _sections(outcomes, adoptions), groups, level)
    return run.exit_code


def _index(folder: Path, claimed, passed: dict):
    """The run's index from the public copy of its results file (every task folder holds the same bytes: the
    first task that passed its levels, whose copy was read)."""
    first = folder / next(iter(passed)) / records.LM_EVAL_RESULTS_FILE
    return index_of(first, tuple(member.task for member in claimed.tasks))


def _check_run(lock, folder: Path, claimed, level: LevelResult) -> None:
    """The run record against what the audit found: one results file for every task, and every task of the run's
    results either adopted or listed as left out (as unpinned only where the reviewer's lock pins none of it)."""
    copies = {(folder / m.task / records.LM_EVAL_RESULTS_FILE).read_bytes() for m in claimed.tasks
              if (folder / m.task / records.LM_EVAL_RESULTS_FILE).is_file()}
    if len(copies) > 1:
        level.fail("the task folders hold different results files: the tasks are not of one run")
    # each task's recorded exit code is the adopting machine's verdict at its policy: this audit's own verdict (its
    # --structural, --rescore, numeric mode) is what counts, and the record's is not held to it
    results = json.loads(next(iter(copies))) if copies else {}
    logged = set(results.get("n-samples") or {}) if isinstance(results.get("n-samples"), dict) else set()
    for task in sorted(logged - {m.task for m in claimed.tasks}):
        if task not in claimed.left_out:
            level.fail(f"task {task}: in the run's results (n-samples) but neither adopted nor listed as left out")
        elif claimed.left_out[task].startswith(UNPINNED) and any(p.task == task for p in lock.profiles.values()):
            level.fail(f"task {task}: listed as pinned by no profile, but your lock pins it: adopt the run again")
