"""Argument parsing and exit codes for the three entry scripts.

0: all checks passed; 1: a check failed; 2: bad usage or unreadable input; 3: our own bug
(a short message; the traceback only with --debug).
"""

import argparse
import sys
from pathlib import Path

from .errors import AuditError, CheckFailed, InputError, InternalError

DEFAULT_LOCK = Path(__file__).resolve().parent.parent / "resources.lock.json"


def _guarded(body, argv) -> int:
    debug = "--debug" in argv
    try:
        return body(argv)
    except AuditError as error:
        if debug:
            import traceback

            traceback.print_exc()
        from .sanitize import printable

        print(printable(f"error: {error}"), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was kept.", file=sys.stderr)
        return 2
    except Exception as error:  # noqa: BLE001 - anything else is our bug: exit 3, never a bare traceback
        if debug:
            import traceback

            traceback.print_exc()
        print(f"error: internal error ({type(error).__name__}: {str(error)[:300]}); this is a bug in "
              f"sst2-audit, not in your input. Re-run with --debug for the traceback.", file=sys.stderr)
        return InternalError.exit_code


EXIT_CODES = ("exit codes: 0 all checks passed; 1 a check failed; 2 bad usage or input (one paragraph naming the "
              "file or option); 3 a bug in sst2-audit (--debug shows the traceback)")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # no prefixes: `--smok` is an error, not --smoke
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def error(self, message):  # bad usage: exit 2 through the same path as every input error
        self.print_usage(sys.stderr)
        raise InputError(f"{self.prog}: {message}")


def _common(parser):
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK, help="lock file (default: resources.lock.json)")
    parser.add_argument("--cache", type=Path, default=Path("cache"), help="cache folder (default: ./cache)")


def _with_profile(parser):
    """prepare and run name a profile of the lock; audit takes it from the run record."""
    _common(parser)
    parser.add_argument("--profile", help="profile of the lock (default: the one the cache was prepared for; "
                                           "glue-sst2 for a new cache)")


def _lock_and_profile(args) -> tuple:
    """The profile named, else the one the cache's manifest names, else glue-sst2 (a new cache)."""
    from .lock import load_lock
    from .manifest import read_manifest

    lock = load_lock(args.lock)
    _numeric_mode(lock)
    name = args.profile
    if name is None:
        manifest = read_manifest(args.cache)
        name = manifest.profile if manifest is not None else "glue-sst2"
    return lock, lock.profile(name)


def _numeric_mode(lock) -> None:
    """The lock's CPU numeric mode, set before anything imports torch (sst2_audit/numeric.py)."""
    from .numeric import activate

    activate(lock.run_settings["numeric_mode"])


def _prepare(argv) -> int:
    from . import prepare
    from .manifest import read_manifest

    parser = _Parser(prog="prepare.py", description="Fetch, verify and cache the pinned resources.", epilog=(
        "profiles of the shipped lock: embedded (offline demo, SST-2-shaped), embedded-rte, embedded-inverse-scaling, "
        "glue-sst2 (needs the hub)\n\nexamples:\n  python prepare.py --profile embedded\n"
        "  python prepare.py --pin mine --task rte --model my-model/ --data my-data/ --new-lock locks/mine.lock.json\n"
        "  python prepare.py --lock locks/mine.lock.json --profile mine --cache cache-mine\n\n" + EXIT_CODES))
    _with_profile(parser)
    parser.add_argument("--from", dest="import_dir", type=Path, help="import files copied from a connected machine")
    parser.add_argument("--verify", action="store_true", help="only re-hash the cache against manifest and lock")
    parser.add_argument("--update-lock", action="store_true", help="fill the lock's unknown sha256s after a verified download")
    parser.add_argument("--pin", metavar="PROFILE", help="write a NEW lock (--new-lock) = --lock + this profile, pinning "
                                                         "--model DIR and --data DIR|FILE for --task")
    parser.add_argument("--model", type=Path, help="with --pin: a local Hugging Face causal LM folder (safetensors), "
                                                   "hub:ORG/NAME@REV, or model:NAME to share an entry of the lock's models")
    parser.add_argument("--data", type=Path, help="with --pin: a folder of <split>.parquet|.jsonl|.csv, or one file")
    parser.add_argument("--task", help="with --pin: the lm-eval task the data is for (pinned in --lock)")
    parser.add_argument("--new-lock", type=Path, help="with --pin: where the new lock is written (never overwritten)")
    parser.add_argument("--notice", help="with --pin: mark the profile as a demo with this notice on every output")
    parser.add_argument("--attention", choices=("eager", "sdpa"), help="with --pin: the profile's attention "
                                                                      "implementation (default: the lock's)")
    parser.add_argument("--add-bos-token", action="store_true", help="with --pin: the tokenizer adds its BOS token "
                                                                     "(lm-eval's add_bos_token=True), in both paths")
    parser.add_argument("--evaluator-wheel", type=Path, help="with --pin of a task the lock does not pin: the pinned "
                                                             "lm-eval wheel (default: downloaded with pip)")
    args = parser.parse_args(argv)
    if args.pin is not None:
        return _pin(args, parser)
    lock, profile = _lock_and_profile(args)
    spec = _spec_for_run(lock, profile, None)  # the lock's data must fit the task before anything is fetched
    if args.verify:
        manifest = prepare.verify(lock, profile, args.cache)
        print(f"verified: {len(manifest.files)} files in {args.cache} match the manifest and {args.lock.name}")
        return 0
    manifest, action = prepare.prepare(lock, profile, args.cache, args.import_dir, spec.eval_split)
    if args.update_lock:
        prepare.update_lock(lock, profile, args.cache, manifest)
        manifest = read_manifest(args.cache)  # rewritten by update_lock; its files were just verified
    from .protocol import notice_for

    label = f"profile {profile.name}" + (f" ({notice_for(profile)})" if profile.demo else "")
    print(f"{action}: {args.cache} holds {len(manifest.files)} verified files for the {label}; "
          f"lock fully hashed: {'yes' if manifest.lock_fully_hashed else 'no'}")
    return 0


def _pin(args, parser) -> int:
    from .pin import pin

    missing = [option for option, value in (("--model", args.model), ("--data", args.data), ("--task", args.task),
                                            ("--new-lock", args.new_lock)) if value is None]
    if missing:
        parser.error(f"--pin needs {', '.join(missing)}")
    settings = {**({"attention": args.attention} if args.attention else {}),
                **({"add_bos_token": True} if args.add_bos_token else {})}
    profile, model = pin(args.lock, args.new_lock, args.pin, args.task, args.model, args.data, args.notice,
                         args.evaluator_wheel, settings)
    print(f"pinned: {args.new_lock} = {args.lock.name} + profile {args.pin} (task {args.task}, model entry "
          f"{profile['model']!r} with {len(model['files'])} files, splits "
          f"{', '.join(f['split'] + ' ' + str(f['rows']) + ' rows' for f in profile['data']['files'])}); next: "
          f"python prepare.py --lock {args.new_lock} --profile {args.pin} --cache <cache>")
    return 0


def prepare_main(argv=None) -> int:
    return _guarded(_prepare, sys.argv[1:] if argv is None else argv)


def _run(argv) -> int:
    from . import run_job
    from .report import json_summary, quiet_line, run_summary

    parser = _Parser(prog="run.py", description="Score the dev rows through lm-eval and the independent path.", epilog=(
        "examples:\n  python run.py --profile embedded\n  python run.py --profile embedded --smoke --quiet\n"
        "  python run.py --list-tasks 'arc_*' --supported\n\n" + EXIT_CODES))
    _with_profile(parser)
    parser.add_argument("--smoke", action="store_true", help="score only the first 2 dev rows")
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
    args = parser.parse_args(argv)
    if args.list_tasks is not None:
        return _list_tasks(args)
    if args.supported:
        parser.error("--supported filters --list-tasks")
    lock, profile = _lock_and_profile(args)
    spec = _spec_for_run(lock, profile, args.task)
    name = args.run_name or run_job.default_run_name(profile.name, args.smoke)
    from .sanitize import RUN_NAME

    if not RUN_NAME.match(name):  # it names folders and the bundle file
        raise InputError(f"--run-name {name!r}: expected letters, digits, '.', '_' or '-' (at most 100), "
                         "starting with a letter or digit.")
    out = args.out or Path("runs") / name
    private = args.private or Path("private") / name
    public_dir, private_dir = out.resolve(), private.resolve()
    if public_dir == private_dir or public_dir in private_dir.parents or private_dir in public_dir.parents:
        raise InputError(f"--out {out} and --private {private} must be different folders, neither inside the other: "
                         "the private records (sentences, prompts) must never sit with the public ones.")
    from .progress import set_quiet

    set_quiet(args.quiet or args.json)
    record = run_job.execute(run_job.RunOptions(lock, profile, args.cache, out, private, name, spec,
                                                smoke=args.smoke, sort_ids=not args.unsorted_ids))
    if args.json:
        import json

        print(json.dumps(json_summary(record, out, private), indent=2))
    else:
        print(quiet_line(record) if args.quiet else run_summary(record, out, private))
    return 0


def _spec_for_run(lock, profile, task: str | None):
    """The profile's data is for one task; --task must name it (and say which profile would fit otherwise)."""
    from .task_spec import require_data_for, spec_for

    if task is not None and task != profile.task:
        fitting = sorted(name for name, p in lock.profiles.items() if p.task == task)
        hint = (f"profiles with data for {task}: {', '.join(fitting)}" if fitting
                else f"no profile of {lock.path.name} has data for {task}")
        raise InputError(f"--task {task}: profile {profile.name} holds data for task {profile.task}; {hint}.")
    spec = spec_for(lock, profile.task)
    require_data_for(spec, profile)
    return spec


def _list_tasks(args) -> int:
    """One aligned line a task: name, pinned / supported / refused, and its YAML or the reason."""
    from .lock import load_lock
    from .task_spec import list_installed

    pinned = load_lock(args.lock).evaluator.get("tasks", {})
    found = list_installed(args.list_tasks)
    supported = [entry for entry in found if entry[2] is None]
    shown = [entry for entry in sorted(found) if entry[2] is None or not args.supported]
    print(f"{len(found)} installed multiple_choice tasks match {args.list_tasks!r}, {len(supported)} within the audit's "
          f"protocol (zero-shot, acc / acc_norm, no code hooks); pinned in {args.lock.name}: {', '.join(sorted(pinned))}; "
          "a supported task is pinned with prepare.py --pin")
    width = min(max((len(name) for name, _, _ in shown), default=0), 48)
    for name, path, reason in shown:
        state = "pinned" if name in pinned else "supported" if reason is None else "refused"
        print(f"{name:<{width}}  {state:<9}  {path if reason is None else reason}")
    return 0


def run_main(argv=None) -> int:
    return _guarded(_run, sys.argv[1:] if argv is None else argv)


def _rescore_rows(text: str):
    """--rescore N or all."""
    if text == "all":
        return "all"
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of rows or 'all', got {text!r}")
    return int(text)


def _audit(argv) -> int:
    import tempfile

    parser = _Parser(prog="audit.py", description="Re-check a finished run offline; pack or check a reviewer bundle.",
                     epilog="examples:\n  python audit.py --bundle-file results/embedded-full-reference.tar.gz\n"
                            "  python audit.py --out runs/NAME --bundle\n  python audit.py --compare A B --report cmp.html"
                            "\n\nexit codes: 0 PASS (every level passed, every scored row rescored bit for bit); "
                            "1 a check failed; 2 bad usage or input; 3 a bug in sst2-audit; 4 no problem found "
                            "but not everything verified (--structural, --rescore N, --arithmetic-only, drift "
                            "only, --accept-old-schema, --trust-bundle-lock): the verdict line names what.")
    _common(parser)
    parser.add_argument("--out", "--run", dest="run", type=Path, help="the run folder to audit (run.py's --out)")
    parser.add_argument("--bundle-file", type=Path, help="check a bundle's SHA256SUMS, then audit it")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="explain how two runs or bundles differ")
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
    parser.add_argument("--bundle", action="store_true", help="pack results/<run-name>.tar.gz after a passing audit")
    parser.add_argument("--results", type=Path, default=Path("results"), help="where --bundle writes (default: results/)")
    parser.add_argument("--report", type=Path, metavar="PATH", help="with --compare: also write the comparison as an HTML page")
    args = parser.parse_args(argv)
    chosen = [bool(args.run), bool(args.bundle_file), bool(args.compare)]
    if sum(chosen) != 1:
        parser.error("give exactly one of --out DIR, --bundle-file FILE, --compare A B")
    if args.bundle and not args.run:
        parser.error("--bundle packs a run folder (--out DIR)")
    if args.bundle and args.arithmetic_only:
        parser.error("--bundle packs only a run whose identity level was checked; leave out --arithmetic-only")
    if args.structural and args.rescore is not None:
        parser.error("--structural rescores nothing; leave out --rescore")
    if args.report and not args.compare:
        parser.error("--report writes the page of a comparison (--compare A B); a run's page is its report.html")
    if args.report and args.report.exists():
        raise InputError(f"--report {args.report} already exists; a report is never overwritten.")
    if args.bundle_file and not args.bundle_file.is_file():
        raise InputError(f"--bundle-file {args.bundle_file}: expected a bundle file (.tar.gz), got "
                         f"{'a folder (audit a run folder with --out)' if args.bundle_file.is_dir() else 'nothing there'}.")
    if args.run and not args.run.is_dir():
        raise InputError(f"--out {args.run}: expected a run folder (run.py's --out); a bundle file is audited "
                         "with --bundle-file.")
    from .lock import load_lock

    _numeric_mode(load_lock(args.lock))  # rescore runs in the reviewer's lock's numeric mode
    with tempfile.TemporaryDirectory(prefix="sst2-audit-bundle-") as scratch:
        if args.compare:
            return _compare(args, Path(scratch))
        return _audit_one(args, Path(scratch))


def _open_run(path: Path, args, scratch: Path):
    """(run, sums level or None). A bundle is unpacked only after its SHA256SUMS matched."""
    from .audit import bundle
    from .audit.findings import LevelResult
    from .audit.loading import load_run

    if path.is_file():
        folder, checks = bundle.unpack_verified(path, scratch)
        try:
            run = load_run(folder, args.lock, args.trust_bundle_lock)
        except AuditError as error:  # name the bundle the reviewer gave, not our scratch folder
            error.args = (str(error).replace(f"{folder}/", f"{path}: "),)
            raise
        run.shown_as = str(path)
        return run, LevelResult("bundle SHA256SUMS and members", checks=checks)
    return load_run(path, args.lock, args.trust_bundle_lock), None


def _compare(args, scratch: Path) -> int:
    from .audit.compare import compare, render_html
    from .sanitize import printable

    runs = [_open_run(path, args, scratch / str(number))[0] for number, path in enumerate(args.compare)]
    result = compare(*runs)
    print(printable("\n".join(result.lines()), keep_newlines=True))
    if args.report:
        from . import atomic

        atomic.write_text(args.report, render_html(result))
        print(f"report: {printable(args.report)}")
    return 0


def _audit_one(args, scratch: Path) -> int:
    from .audit import bundle
    from .audit.runner import Policy, run_levels

    target = args.bundle_file or args.run
    run, sums = _open_run(target, args, scratch)
    if args.bundle:  # refused before the audit's work, not after it
        bundle.bundle_path(run.name, args.results)
    rows = len(run.record.questions) if run.record else 0
    rescore = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    if rescore not in ("all", 0) and rescore > rows:
        raise InputError(f"--rescore {rescore}: the run has {rows} scored rows; give at most {rows} or 'all'.")
    outcome = run_levels(run, args.cache, Policy(rescore, not args.arithmetic_only, args.accept_old_schema, args.seed),
                         sums)
    _print_levels(target, run, outcome)
    if args.bundle:
        if outcome.failed:
            raise CheckFailed(f"the audit of {target} failed; no bundle is packed for a run that does not pass.")
        path = bundle.pack(run, args.cache, args.results)
        print(f"bundle: {path}")
    return outcome.exit_code


def _print_levels(target, run, outcome) -> None:
    """The verdict first and last: what a reviewer reads is what was verified."""
    from .sanitize import printable

    record = run.record
    head = [outcome.verdict(), f"{'WARNING: ' if run.trusts_claimed_lock else ''}audited against {run.lock_source}"]
    line = f"audit of {target}: run {run.name}"
    if record is not None:
        line += f", profile {record.profile}, {len(record.questions)} rows"
        profile = run.lock.profiles.get(record.profile)
        if profile is not None and profile.demo:  # the lock's profile decides, not the record's flag
            from .protocol import notice_for

            head.insert(2, f"*** {notice_for(profile)} ***")
    lines = head + [line]
    for level in outcome.levels:
        lines += level.lines()
    print(printable("\n".join(lines + [outcome.verdict()]), keep_newlines=True))


def audit_main(argv=None) -> int:
    return _guarded(_audit, sys.argv[1:] if argv is None else argv)
