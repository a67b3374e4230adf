"""audit.py: re-check a run folder or bundle, pack a bundle, or compare two runs."""

import argparse
from pathlib import Path

from sst2_audit.audit import group_level
from sst2_audit.audit.compare import compare, render_html
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.loading import load_run
from sst2_audit.audit.runner import Policy, run_levels
from sst2_audit.audit.verdict import compare_exit_code, GroupOutcome, verdict_object
from sst2_audit.bundle import confirmation as confirmation_bundle, group as group_bundle, run as bundle
from sst2_audit.bundle.group import bundle_target, is_group_bundle
from sst2_audit.cli.adopt import audit_adopted
from sst2_audit.bundle.adopted import is_adopted, is_adopted_run
from sst2_audit.cli.common import AUDIT_EXIT_CODES, common, numeric_mode, Parser, show_verdict, with_format
from sst2_audit.cli.experiments import audit_confirmation, audit_study, is_confirmation, is_study
from sst2_audit.formats import records
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.manifest import cache_for
from sst2_audit.pages.html_report import OLDEST_SCHEMA, render
from sst2_audit.protocol.rules import notice_for
from sst2_audit.scoring.model import no_model_in_this_process
from sst2_audit.scoring.shards import from_launcher, launched
from sst2_audit.task.group import GROUP_FILE, group_spec
from sst2_audit.util import atomic, console
from sst2_audit.util.errors import AuditError, CheckFailed, InputError
from sst2_audit.util.progress import set_quiet
from sst2_audit.util.sanitize import printable, terminal


def _rescore_rows(text: str):
    """--rescore N or all."""
    if text == "all":
        return "all"
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of rows or 'all', got {text!r}")
    return int(text)


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit audit",
                    description="Re-check a finished run offline; pack or check a reviewer bundle.",
                    epilog="examples:\n  sst2-audit audit --bundle-file results/embedded-full-reference.tar.gz\n"
                           "  sst2-audit audit --out runs/NAME --bundle\n"
                           "  sst2-audit audit --compare A B --report cmp.html\n\n" + AUDIT_EXIT_CODES)
    common(parser)
    with_format(parser)
    parser.add_argument("--out", "--run", dest="run", type=Path,
                        help="the run folder to audit (sst2-audit run's --out)")
    parser.add_argument("--bundle-file", type=Path, help="check a bundle's SHA256SUMS, then audit it")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"),
                        help="explain how two runs or bundles differ")
    parser.add_argument("--arithmetic-only", action="store_true",
                        help="skip the identity level and the rescore (no cache needed; exit 4: scores not verified)")
    parser.add_argument("--structural", action="store_true",
                        help="every level but the rescore: quick, and the verdict says SCORES NOT VERIFIED (exit 4)")
    parser.add_argument("--rescore", type=_rescore_rows, default=None, metavar="N|all",
                        help="rescore N dev rows drawn at random instead of all of them (default: all; "
                             "a sample gives exit 4 and the odds of missing forged rows)")
    parser.add_argument("--seed", type=int, help="seed of the rescore draw (default: drawn fresh and printed)")
    parser.add_argument("--accept-old-schema", action="store_true",
                        help="audit records older than the oldest schema accepted by default (exit 4, limits named)")
    parser.add_argument("--trust-bundle-lock", action="store_true",
                        help="audit against the lock the run or bundle carries instead of --lock (said in the report)")
    parser.add_argument("--bundle", action="store_true", help="pack results/<run-name>.tar.gz after a passing audit "
                        "(a group folder: one bundle of group.json, GROUP.md and each subtask's run bundle; one task's "
                        "adopted folder: after an audit that did not fail)")
    parser.add_argument("--results", type=Path, default=Path("results"),
                        help="where --bundle writes (default: results/)")
    parser.add_argument("--report", type=Path, metavar="PATH",
                        help="write a page: with --compare the comparison's; with one run, the page rendered here "
                             "from the checked records (never overwriting)")
    return parser


def main(argv, owns_process: bool = False) -> int:
    import tempfile

    parser = _parser()
    args = parser.parse_args(argv)
    _check_usage(parser, args)
    if owns_process and (args.structural or args.arithmetic_only):
        no_model_in_this_process()

    # the reviewer's lock, read once: every level, subtask and bundle uses these bytes (args.lock stays the path)
    args.reviewer_lock = load_lock(args.lock)
    numeric_mode(args.reviewer_lock)  # rescore runs in the reviewer's lock's numeric mode
    if launched() > 1 and not _one_run(args):
        raise InputError(f"{launched()} processes were started (WORLD_SIZE): the rescore of one run folder or bundle "
                         "is shared among processes; a group, a confirmation, a study, an adopted run and --compare "
                         "run in one process. Start this audit without the launcher.")
    adopted = _adopted(args)
    if adopted is not None:
        return adopted
    experiment = _experiment(args)
    if experiment is not None:
        return experiment
    group = not args.compare and _is_group(args.run or args.bundle_file)
    if group and args.report:
        raise InputError("--report writes one run's page (or a comparison's); audit a subtask's run folder or "
                         "bundle with --report to get its page.")
    if group and args.trust_bundle_lock:
        raise InputError("--trust-bundle-lock audits one run against the lock it carries; a group is audited "
                         "against the reviewer's lock (--lock) only: leave out --trust-bundle-lock.")
    with tempfile.TemporaryDirectory(prefix="sst2-audit-bundle-") as scratch:
        if group:
            return _audit_group(args, args.run, args.run) if args.run else _audit_group_bundle(args, Path(scratch))
        if args.compare:
            return _compare(args, Path(scratch))
        return _audit_one(args, Path(scratch))


def _one_run(args) -> bool:
    """The target is one run folder or bundle of ours (nothing else is audited in several processes)."""
    target = args.run or args.bundle_file
    adopted = is_adopted(target) or is_adopted_run(target)
    return not args.compare and not adopted and not _is_group(target) and not (
        args.run and (is_confirmation(args.run) or is_study(args.run))) and not (
        args.bundle_file and confirmation_bundle.is_confirmation_bundle(args.bundle_file))


def _adopted(args) -> int | None:
    """A plain lm-eval run adopted by `sst2-audit adopt` (folder or bundle): its audit's exit code; else None."""
    import tempfile

    target = args.run or args.bundle_file
    if target is None or not (is_adopted(target) or is_adopted_run(target)):
        return None
    if (args.bundle and (args.bundle_file or is_adopted_run(target))) or args.report or args.trust_bundle_lock \
            or args.arithmetic_only:
        raise InputError(f"{target}: an adopted lm-eval run: --report, --trust-bundle-lock, --arithmetic-only and "
                         "--bundle of a bundle or of a run of many tasks (give it to `adopt`) do not apply; audit it "
                         "with --lock and --cache (--bundle packs one task's adopted folder).")
    with tempfile.TemporaryDirectory(prefix="sst2-audit-bundle-") as scratch:
        return audit_adopted(args, target, Path(scratch))


def _check_usage(parser, args) -> None:
    chosen = [bool(args.run), bool(args.bundle_file), bool(args.compare)]
    if sum(chosen) != 1:
        parser.error("give exactly one of --out DIR, --bundle-file FILE, --compare A B")
    if args.bundle and not args.run:
        parser.error("--bundle packs a run folder (--out DIR)")
    if args.bundle and args.arithmetic_only:
        parser.error("--bundle packs only a run whose identity level was checked; leave out --arithmetic-only")
    if args.structural and args.rescore is not None:
        parser.error("--structural rescores nothing; leave out --rescore")
    if args.report and args.report.exists():
        raise InputError(f"--report {args.report} already exists; a report is never overwritten.")
    if args.report:
        atomic.require_writable_folder(args.report.parent, "--report")
    if args.bundle_file and not args.bundle_file.is_file():
        found = "a folder (audit a run folder with --out)" if args.bundle_file.is_dir() else "nothing there"
        raise InputError(f"--bundle-file {args.bundle_file}: expected a bundle file (.tar.gz), got {found}.")
    if args.run and not args.run.is_dir():
        found = ("it does not exist" if not args.run.exists() else
                 "it is a file (a bundle is audited with --bundle-file)")
        raise InputError(f"--out {args.run}: expected a run folder (sst2-audit run's --out); {found}.")


def _open_run(path: Path, args, scratch: Path):
    """(run, sums level or None). A bundle is unpacked only after its SHA256SUMS matched."""

    if path.is_file():
        folder, checks = bundle.unpack_verified(path, scratch)
        try:
            run = load_run(folder, args.reviewer_lock, args.trust_bundle_lock)
        except AuditError as error:  # name the bundle the reviewer gave, not our scratch folder
            error.args = (str(error).replace(f"{folder}/", f"{path}: ").replace(str(folder), str(path)),)
            raise
        run.shown_as = str(path)
        return run, LevelResult("bundle SHA256SUMS and members", checks=checks)
    return load_run(path, args.reviewer_lock, args.trust_bundle_lock), None


def _compare(args, scratch: Path) -> int:
    for path in args.compare:
        if _is_group(path):
            raise InputError(f"--compare {path}: a group; compare two runs (a subtask's run folder or bundle).")
    runs = [_open_run(path, args, scratch / str(number))[0] for number, path in enumerate(args.compare)]
    result = compare(*runs)
    if console.json_command():
        console.emit_verdict(verdict_object("audit", " ".join(str(path) for path in args.compare), result))
    else:
        print(terminal(result.lines()))
    if args.report:
        atomic.write_text(args.report, render_html(result))
        print(f"report: {printable(args.report)}")
    # the exit code says what the last line says: identical 0, within the drift bound only 4, different 1
    return compare_exit_code(result.verdict)


def _audit_one(args, scratch: Path) -> int:
    target = args.bundle_file or args.run
    try:
        run, sums = _open_run(target, args, scratch)
    except CheckFailed:  # the bundle level failed: no record was read; the reason follows on stderr
        print("VERDICT: FAIL (bundle SHA256SUMS and members): the bundle was refused before any record was read; "
              "exit 1")
        raise
    if args.bundle:  # refused before the audit's work, not after it
        bundle.bundle_path(run.name, args.results)
    rows = len(run.record.questions) if run.record else 0
    rescore = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    if isinstance(rescore, int) and rescore > rows:
        raise InputError(f"--rescore {rescore}: the run has {rows} scored rows; give at most {rows} or 'all'.")
    shards = from_launcher()  # one process, or the N a launcher started: they share the rescore, rank 0 reports
    try:
        set_quiet(not shards.lead)
        policy = Policy(rescore, not args.arithmetic_only, args.accept_old_schema, shards.seed(args.seed))
        if run.record is not None:  # a cache of many profiles holds the run's in <cache>/<profile>
            args.cache = cache_for(args.cache, run.record.profile)
        outcome = run_levels(run, args.cache, policy, sums, shards)
        return shards.broadcast(_reported(args, target, run, outcome) if shards.lead else None)
    finally:
        shards.close()


def _reported(args, target, run, outcome) -> int:
    """Rank 0 (or the one process): the levels printed, the page and the bundle written as asked."""
    _print_levels(target, run, outcome)
    if args.report:
        _write_page(args.report, run, outcome)
    if args.bundle:
        if outcome.failed:
            raise CheckFailed(f"the audit of {target} failed; no bundle is packed for a run that does not pass.")
        path = bundle.pack(run, args.cache, args.results)
        print(f"bundle: {path}")
    return outcome.exit_code


def _write_page(path: Path, run, outcome) -> None:
    """The run's page as this version renders it from the records the audit checked (never a page it read)."""
    claims = next((level for level in outcome.levels if level.name == "claims"), None)
    if run.record is None or claims is None or not claims.passed or outcome.failed:
        print(f"report: not written: a page is rendered only from records that passed the audit ({printable(path)})")
        return
    written = max(run.record_schema or 0, OLDEST_SCHEMA)  # an older record's page: the oldest this version renders
    atomic.write_text(path, render(run.record, run.lock, run.task_spec(), written_schema=written))
    print(f"report: {printable(path)} (rendered here from the checked records)")


def _is_group(path: Path) -> bool:
    """A group folder (it holds group.json) or a group bundle (audit/group_bundle.py); else a run."""

    return (path / GROUP_FILE).is_file() if path.is_dir() else path.is_file() and is_group_bundle(path)


def _unpacked(args, scratch: Path, unpack, what: str) -> tuple:
    """(folder, its sums level) of a group or confirmation bundle (`what`) unpacked by `unpack` after its SHA256SUMS
    and members were checked; a refused bundle prints its verdict, then the reason follows on stderr."""
    try:
        folder, checks = unpack(args.bundle_file, scratch, args.reviewer_lock)
    except CheckFailed:  # no record was read
        print(f"VERDICT: FAIL ({what} bundle SHA256SUMS and members): the bundle was refused before any record was "
              "read; exit 1")
        raise
    return folder, LevelResult(f"{what} bundle SHA256SUMS and members", checks=checks)


def _audit_group_bundle(args, scratch: Path) -> int:
    folder, sums = _unpacked(args, scratch, group_bundle.unpack_verified, "group")
    return _audit_group(args, folder, args.bundle_file, sums)


def _experiment(args) -> int | None:
    """A confirmation (folder or bundle) or a study folder: its audit's exit code; None for anything else."""
    import tempfile

    confirmation = (args.run and is_confirmation(args.run)) or (
        args.bundle_file and confirmation_bundle.is_confirmation_bundle(args.bundle_file))
    study = args.run and is_study(args.run)
    if (confirmation or study) and args.report:
        raise InputError("--report writes one run's page (or a comparison's); audit a member's run folder with "
                         "--report to get its page.")
    if (confirmation or study) and args.trust_bundle_lock:
        raise InputError("--trust-bundle-lock audits one run against the lock it carries; a confirmation or study "
                         "is audited against your lock (--lock) only: leave out --trust-bundle-lock.")
    if study:
        if args.bundle:
            raise InputError(f"--out {args.run}: a study folder is not packed as a bundle yet: leave out --bundle.")
        return audit_study(args, args.run, _level_lines)
    if not confirmation:
        return None
    if args.run:
        return audit_confirmation(args, args.run, _level_lines)
    with tempfile.TemporaryDirectory(prefix="sst2-audit-bundle-") as scratch:
        return _audit_confirmation_bundle(args, Path(scratch))


def _audit_confirmation_bundle(args, scratch: Path) -> int:
    folder, sums = _unpacked(args, scratch, confirmation_bundle.unpack_verified, "confirmation")
    return audit_confirmation(args, folder, _level_lines, args.bundle_file, sums)


def _audit_group(args, folder: Path, shown: Path, sums=None) -> int:
    """Every subtask's run audited as any run (its cache: --cache/<profile>), then the group level; one verdict
    first and last over all of them. `folder` is the group folder or a verified group bundle unpacked."""

    lock = args.reviewer_lock
    record, group_bytes = group_level.read_group(folder)
    group = group_level.check(folder, record, lock)
    if args.bundle:  # refused before the audit's work, not after it

        bundle_target(record, args.results)
    pin = lock.groups.get(record.group_name)
    if pin is not None and isinstance(args.rescore, int) and args.rescore > pin.rows:
        raise InputError(f"--rescore {args.rescore}: each subtask of group {record.group_name} scores {pin.rows} rows "
                         f"(the reviewer's lock); give at most {pin.rows} or 'all'.")
    sections, runs = [], {}
    for member, run in _group_runs(args, folder, record, lock):
        outcome = _audit_subtask(args, run, member)
        where = folder / member.task if folder == shown else f"{shown} ({member.task}.tar.gz)"
        sections += [f"--- subtask {member.task}: {outcome.verdict()}"] + _level_lines(where, run, outcome)[1:-1]
        runs[member.task] = (run, outcome)
    result = GroupOutcome({task: outcome for task, (_, outcome) in runs.items()}, group, len(record.members),
                          bool(record.official))
    verdict, failed, code = result.verdict(), result.failed, result.exit_code
    lines = [verdict, f"audit of group {record.group} ({record.group_name}) in {shown}: {len(record.members)} subtasks"]
    lines += (sums.lines() if sums else []) + group.lines() + sections + [verdict]
    show_verdict(lines, result, shown)
    if args.bundle:
        if failed:
            raise CheckFailed(f"the audit of {shown} failed; no bundle is packed for a group that does not pass.")

        path = group_bundle.pack(group_bytes, record, {t: run for t, (run, _) in runs.items()},
                                 {m.task: args.cache / m.profile for m in record.members}, args.results)
        print(f"bundle: {printable(path)}")
    return code


def _group_runs(args, folder: Path, record, lock):
    """(member, run) of each subtask the reviewer's lock names whose folder holds a record; the group level
    names the rest, and a folder the lock does not name is never opened."""

    named = [list(member) for member in group_spec(lock, record.group_name).members]
    for member in record.members:
        run_folder = folder / member.task
        if [member.task, member.profile] in named and any(
                (run_folder / name).is_file() for name in (records.RUN_FILE, records.FAILURE_FILE)):
            yield member, load_run(run_folder, args.reviewer_lock)


def _audit_subtask(args, run, member):
    rescore = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    if rescore not in ("all", 0) and run.record and rescore > len(run.record.questions):
        raise InputError(f"--rescore {rescore}: subtask {member.task} has {len(run.record.questions)} scored rows; "
                         f"give at most {len(run.record.questions)} or 'all'.")
    return run_levels(run, args.cache / member.profile,
                      Policy(rescore, not args.arithmetic_only, args.accept_old_schema, args.seed), None)


def _print_levels(target, run, outcome) -> None:
    show_verdict(_level_lines(target, run, outcome), outcome, target)


def _level_lines(target, run, outcome) -> list:
    """The verdict first and last: what a reviewer reads is what was verified (printed escaped by the caller)."""
    record = run.record
    head = [outcome.verdict(), f"{'WARNING: ' if run.trusts_claimed_lock else ''}audited against {run.lock_source}"]
    line = f"audit of {target}: run {run.name}"
    if record is not None:
        line += f", profile {record.profile}, {len(record.questions)} rows"
        profile = run.lock.profiles.get(record.profile)
        if profile is not None and profile.demo:  # the lock's profile decides, not the record's flag

            head.insert(2, f"*** {notice_for(profile)} ***")
    lines = head + [line]
    for level in outcome.levels:
        lines += level.lines()
    return lines + [outcome.verdict()]


