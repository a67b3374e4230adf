"""run.py: score the dev rows through lm-eval and the independent path; --list-tasks."""

from pathlib import Path

from sst2_audit.cli.common import (
    audit_words,
    auditable,
    EXIT_CODES,
    Parser,
    lock_and_profile,
    numeric_mode,
    show_verdict,
    spec_for_run,
    with_format,
    with_profile,
)
from sst2_audit.cli.experiments import confirm_main, preregister_main, study_main
from sst2_audit.cli.run_plain import run_plain
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.manifest import cache_for
from sst2_audit.protocol.decision import RETIRED, RULES
from sst2_audit.audit.verdict import run_numbers, run_outcome
from sst2_audit.pages.report import json_summary, quiet_line, run_summary
from sst2_audit.run import job as run_job
from sst2_audit.run.group import run_group, summary_lines
from sst2_audit.run.job import default_run_name
from sst2_audit.task.shapes import shape_of, SHAPES
from sst2_audit.task.support import list_installed
from sst2_audit.util.commands import command_line
from sst2_audit.scoring.shards import from_launcher, launched
from sst2_audit.util.errors import InputError, InternalError
from sst2_audit.util.progress import set_quiet
from sst2_audit.util.sanitize import RUN_NAME, terminal


def main(argv) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if args.list_tasks == "*" and len(extra) == 1 and not extra[0].startswith("-"):
        args.list_tasks = extra.pop()  # `--list-tasks --supported 'arc_*'`: the pattern after the flag
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    _one_process_only(args)
    _one_run_as_json(parser, args)
    if args.list_tasks is not None:
        return _list_tasks(args)
    if (args.preregister is not None or args.confirm is not None) and args.study is None:
        _alone(parser, args, "--preregister and --confirm take the profiles of their dev runs", "--group")
        if args.preregister is not None and args.confirm is not None:
            parser.error("give one of --preregister FILE and --confirm FILE")
        return preregister_main(args) if args.preregister is not None else confirm_main(args)
    if args.study is not None:
        _alone(parser, args, "--study runs its --variant profiles", "--group")
        return study_main(args)
    if args.dev_run or args.rule or args.metric or args.threshold is not None or args.variant:
        parser.error("--dev-run, --rule, --metric and --threshold belong to --preregister FILE; --variant to --study")
    if args.group is not None:
        _alone(parser, args, "--group runs the lock's profiles for the group")
        return _group(args)
    if args.supported:
        parser.error("--supported filters --list-tasks")
    lock, profile = lock_and_profile(args)
    _rows(parser, args, lock, profile)
    spec = spec_for_run(lock, profile, args.task)
    name = args.run_name or run_job.default_run_name(profile.name, args.smoke, args.rows)
    if not RUN_NAME.match(name):  # it names folders and the bundle file
        raise InputError(f"--run-name {name!r}: expected letters, digits, '.', '_' or '-' (at most 100), "
                         "starting with a letter or digit.")
    out = args.out or Path("runs") / name
    private = args.private or Path("private") / name
    public_dir, private_dir = out.resolve(), private.resolve()
    if public_dir == private_dir or public_dir in private_dir.parents or private_dir in public_dir.parents:
        raise InputError(f"--out {out} and --private {private} must be different folders, neither inside the other: "
                         "the private records (sentences, prompts) must never sit with the public ones.")
    args.cache = cache_for(args.cache, profile.name)  # a cache of many profiles holds this one in <cache>/<profile>
    if not spec.shape.runs:  # generate_until, loglikelihood_rolling: lm_eval's command line, adopted
        return run_plain(args, lock, profile, spec, name, out, private)
    set_quiet(args.quiet or args.json or args.format == "json")
    record = _shared(run_job.RunOptions(lock, profile, args.cache, out, private, name, spec, smoke=args.smoke,
                                        sort_ids=not args.unsorted_ids, rows=args.rows))
    if isinstance(record, int):  # a process other than rank 0: its exit code, rank 0's
        return record
    auditable(out, lock, args.cache)
    return _result(args, record, out, private)


# a run's own options, which --preregister, --confirm, --study and --group (runs of the lock's profiles) leave out
ONE_RUN = {"--profile": "profile", "--task": "task", "--smoke": "smoke", "--rows": "rows",
           "--unsorted-ids": "unsorted_ids"}


def _alone(parser, args, what: str, *also: str) -> None:
    """A mode that runs the lock's profiles refuses a one-run option (and the other modes in `also`)."""
    options = {**ONE_RUN, **{option: option.removeprefix("--") for option in also}}
    if any(getattr(args, name) not in (None, False) for name in options.values()):
        parser.error(f"{what}; leave out {', '.join(options)}")


def _one_run_as_json(parser, args) -> None:
    if args.format == "json" and (args.list_tasks is not None or args.group is not None or args.study is not None
                                  or args.preregister is not None or args.confirm is not None):
        parser.error("--format json gives the verdict of one run (--profile, --smoke, --rows); --list-tasks, --group, "
                     "--study, --preregister and --confirm print their words only.")


def _result(args, record, out: Path, private: Path) -> int:
    """The run's result: its JSON verdict (--format json), its summary as JSON (--json), one line, or the summary."""
    if args.format == "json":
        show_verdict([], run_outcome(record), out, run_numbers(record), run=json_summary(record, out, private))
    elif args.json:
        import json

        print(json.dumps(json_summary(record, out, private), indent=2))
    else:
        lines = (quiet_line(record) if args.quiet else run_summary(record, out, private)).split("\n")
        print(terminal(lines if args.quiet else lines + [f"  next          {audit_command(args, out)}"]))
    return 0


def _one_process_only(args) -> None:
    if launched() > 1 and (args.list_tasks is not None or args.group or args.study is not None
                           or args.preregister is not None or args.confirm is not None):
        raise InputError(f"{launched()} processes were started (WORLD_SIZE): a launcher shares the rows of one run "
                         "(--profile, --smoke, --rows); --list-tasks, --group, --study, --preregister and --confirm "
                         "run in one process.")


def _shared(options):
    """The run in one process, or shared among the N `torchrun`/`accelerate launch` started: rank 0's record, and
    in every other process rank 0's exit code (its failure or error's), once rank 0 has finished."""
    options.shards = shards = from_launcher("gloo")  # both paths score on the lock's device, the CPU
    if shards.world > 1:  # the launcher ends the others with SIGTERM when one dies: cli._guarded's handler
        set_quiet(not shards.lead)
    try:
        try:
            record = run_job.execute(options)
        except BaseException as error:
            if shards.world > 1:
                shards.broadcast(getattr(error, "exit_code", InternalError.exit_code) if shards.lead else None)
            raise
        code = shards.broadcast(0 if shards.lead else None)
        return record if shards.lead else code
    finally:
        shards.close()


def audit_command(args, out: Path) -> str:
    """The audit of this run as it must be typed: the run's own lock and cache (the defaults left out), paths as
    the user gave them, and the command of this environment (a bare `python` outside the venv has no lm-eval)."""
    return "audit (every row rescored; add --bundle to pack it): " + command_line("audit", *audit_words(args, out))


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit run", description="Score the dev rows through lm-eval and the independent path.",
                    epilog=("examples:\n  sst2-audit run --profile embedded\n  sst2-audit run --profile embedded "
                            "--smoke --quiet\n  sst2-audit run --list-tasks 'arc_*' --supported\n\n" + EXIT_CODES))
    with_profile(parser)
    with_format(parser)
    parser.add_argument("--smoke", action="store_true", help="score only the first 2 dev rows")
    parser.add_argument("--rows", type=int, metavar="N",
                        help="score only the first N dev rows in hash order (a prefix, 2 to the lock's dev_rows; "
                             "run mode first-N), e.g. to time a long few-shot task")
    parser.add_argument("--out", type=Path, help="public records folder (default: runs/<run-name>); must not exist")
    parser.add_argument("--private", type=Path, help="private records folder (default: private/<run-name>)")
    parser.add_argument("--run-name", help="name of the run (default: <profile>-<mode>-<UTC time>)")
    parser.add_argument("--unsorted-ids", action="store_true",
                        help="pass dev ids to lm-eval in hash order: reproduces upstream #4084, the run must fail")
    parser.add_argument("--task", help="the lm-eval task (default: the profile's task; the lock pins which)")
    parser.add_argument("--quiet", action="store_true", help="no progress; one result line")
    parser.add_argument("--json", action="store_true", help="no progress; the summary as JSON on stdout")
    parser.add_argument("--list-tasks", nargs="?", const="*", metavar="PATTERN",
                        help="list the installed multiple_choice tasks whose name matches PATTERN (a glob, default *): "
                             "pinned, supported or refused and why, then exit")
    parser.add_argument("--supported", action="store_true", help="with --list-tasks: only pinned and supported tasks")
    parser.add_argument("--output-type", choices=tuple(SHAPES), default="multiple_choice",
                        help="with --list-tasks: the tasks of this output_type (a generate_until or "
                             "loglikelihood_rolling profile's run is lm_eval's command line, adopted)")
    parser.add_argument("--group", metavar="NAME", help="run every subtask of the lock's group NAME (its first rows "
                        "dev rows each; --cache holds one prepared cache per profile: sst2-audit prepare --group) "
                        "and write group.json")
    confirmation = parser.add_argument_group("pre-registration and confirmation (docs/confirmation.md)")
    confirmation.add_argument("--preregister", type=Path, metavar="FILE",
                              help="write a pre-registration: the decision rule over full dev runs (--dev-run)")
    confirmation.add_argument("--dev-run", type=Path, action="append", metavar="DIR",
                              help="a full dev run the pre-registration rests on (A first, then B)")
    confirmation.add_argument("--rule", choices=sorted({*RULES, *RETIRED}), help="the decision rule: exceeds (A's "
                              "point estimate above B's), at-least (A's point estimate at least --threshold), "
                              "paired-exact (the exact McNemar test of A against B on the same questions, p < 0.05)")
    confirmation.add_argument("--metric", help="the metric the rule compares (acc, acc_norm, mc2, f1, mcc)")
    confirmation.add_argument("--threshold", type=float, help="with --rule at-least: the value to reach")
    confirmation.add_argument("--confirm", type=Path, metavar="FILE",
                              help="score the sealed confirmation rows of each profile a pre-registration names, "
                                   "once (its profiles' caches: --cache, or --cache/<profile>)")
    confirmation.add_argument("--reconfirm", action="store_true",
                              help="with --confirm: spend sealed rows this cache confirmed before under another "
                                   "pre-registration, labelled with the count (refused without it)")
    study = parser.add_argument_group("paired protocol-sensitivity study (docs/confirmation.md)")
    study.add_argument("--study", metavar="NAME", help="score the dev rows under every --variant (each a full run) "
                       "and write study.json and study.html with the paired numbers against the first")
    study.add_argument("--variant", action="append", metavar="PROFILE",
                       help="a profile of the lock: one task, the same data, other settings (the first is the base)")
    return parser


def _rows(parser, args, lock, profile) -> None:
    """--rows N: 2 to the profile's dev rows; 2 and the lock's dev_rows are the rows of --smoke and of a full run of
    a profile without dev_rows of its own, named so."""
    if args.smoke and args.rows is not None:
        parser.error("--smoke scores the first 2 dev rows; leave out --rows")
    most = lock.most_dev_rows(profile.name)
    if args.rows is not None and not 2 <= args.rows <= most:
        raise InputError(f"--rows {args.rows}: expected 2 to {most} (the profile's dev rows in {args.lock}), the "
                         "first rows in hash order.")
    if args.rows == 2 or args.rows == most == lock.split.dev_rows:
        args.smoke, args.rows = args.rows == 2, None


def _group(args) -> int:
    lock = load_lock(args.lock)

    numeric_mode(lock)
    name = args.run_name or default_run_name(f"group-{args.group}", False).replace("-full-", "-")
    if not RUN_NAME.match(name):
        raise InputError(f"--run-name {name!r}: expected letters, digits, '.', '_' or '-', starting with a letter or "
                         "digit.")
    out, private = args.out or Path("runs") / name, args.private or Path("private") / name
    set_quiet(args.quiet or args.json)
    record = run_group(lock, args.group, args.cache, out, private, name)
    for member in record.members:  # each subtask's run, as the group audit will read it
        auditable(out / member.run, lock, Path(args.cache) / member.profile)

    print(terminal(summary_lines(record) + [f"  group record  {out / 'group.json'}",
                                            f"  next          {audit_command(args, out)}"]))
    return 0


def _list_tasks(args) -> int:
    """One aligned line a task: name, pinned / supported / refused, and its YAML or the reason."""

    lock = load_lock(args.lock)
    pinned = lock.evaluator.tasks
    found = list_installed(args.list_tasks, lock.evaluator.version, args.output_type)
    supported = [entry for entry in found if entry[2] is None]
    shown = [entry for entry in sorted(found) if entry[2] is None or not args.supported]
    tasks = "task matches" if len(found) == 1 else "tasks match"
    protocol = shape_of(args.output_type).protocol_words
    print(f"{len(found)} installed {args.output_type} {tasks} {args.list_tasks!r}, {len(supported)} within the "
          f"audit's protocol ({protocol}; hooks as pinned shared code; shots re-derivable); "
          f"pinned in {args.lock.name}: {', '.join(sorted(pinned))}; "
          "a supported task is pinned with sst2-audit prepare --pin")
    width = min(max((len(name) for name, _, _ in shown), default=0), 48)
    for name, path, reason in shown:
        state = "pinned" if name in pinned else "supported" if reason is None else "refused"
        print(f"{name:<{width}}  {state:<9}  {path if reason is None else reason}")
    return 0


