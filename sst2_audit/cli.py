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
        print(f"error: {error}", file=sys.stderr)
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


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # no prefixes: `--smok` is an error, not --smoke
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

    parser = _Parser(prog="prepare.py", description="Fetch, verify and cache the pinned resources.")
    _with_profile(parser)
    parser.add_argument("--from", dest="import_dir", type=Path, help="import files copied from a connected machine")
    parser.add_argument("--verify", action="store_true", help="only re-hash the cache against manifest and lock")
    parser.add_argument("--update-lock", action="store_true", help="fill the lock's unknown sha256s after a verified download")
    args = parser.parse_args(argv)
    lock, profile = _lock_and_profile(args)
    _spec_for_run(lock, profile, None)  # the lock's data must fit the task before anything is fetched
    if args.verify:
        manifest = prepare.verify(lock, profile, args.cache)
        print(f"verified: {len(manifest.files)} files in {args.cache} match the manifest and {args.lock.name}")
        return 0
    manifest, action = prepare.prepare(lock, profile, args.cache, args.import_dir)
    if args.update_lock:
        prepare.update_lock(lock, profile, args.cache, manifest)
        manifest = read_manifest(args.cache)  # rewritten by update_lock; its files were just verified
    from .protocol import notice_for

    label = f"profile {profile.name}" + (f" ({notice_for(profile)})" if profile.demo else "")
    print(f"{action}: {args.cache} holds {len(manifest.files)} verified files for the {label}; "
          f"lock fully hashed: {'yes' if manifest.lock_fully_hashed else 'no'}")
    return 0


def prepare_main(argv=None) -> int:
    return _guarded(_prepare, sys.argv[1:] if argv is None else argv)


def _run(argv) -> int:
    from . import run_job
    from .report import json_summary, quiet_line, run_summary

    parser = _Parser(prog="run.py", description="Score the dev rows through lm-eval and the independent path.")
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
    parser.add_argument("--list-tasks", action="store_true",
                        help="list the installed multiple_choice tasks, supported or not and why, then exit")
    args = parser.parse_args(argv)
    if args.list_tasks:
        return _list_tasks(args)
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
    from .lock import load_lock
    from .task_spec import list_installed

    pinned = load_lock(args.lock).evaluator.get("tasks", {})
    found = list_installed()
    supported = [entry for entry in found if entry[2] is None]
    print(f"{len(found)} installed multiple_choice tasks, {len(supported)} within the audit's protocol "
          f"(zero-shot, acc / acc_norm, no code hooks); pinned in {args.lock}: {', '.join(sorted(pinned))}")
    for name, path, reason in sorted(found):
        state = "pinned" if name in pinned else "supported" if reason is None else f"unsupported: {reason}"
        print(f"{name}\t{path}\t{state}")
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

    parser = _Parser(prog="audit.py", description="Re-check a finished run offline; pack or check a reviewer bundle.")
    _common(parser)
    parser.add_argument("--out", "--run", dest="run", type=Path, help="the run folder to audit (run.py's --out)")
    parser.add_argument("--bundle-file", type=Path, help="check a bundle's SHA256SUMS, then audit it")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"), help="explain how two runs or bundles differ")
    parser.add_argument("--arithmetic-only", action="store_true", help="skip the identity level (no cache needed)")
    parser.add_argument("--rescore", type=_rescore_rows, default=0, metavar="N|all",
                        help="re-run the independent forward pass for N dev rows drawn at random, or all")
    parser.add_argument("--seed", type=int, help="seed of the rescore draw (default: drawn fresh and printed)")
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
    if args.report and not args.compare:
        parser.error("--report writes the page of a comparison (--compare A B); a run's page is its report.html")
    if args.report and args.report.exists():
        raise InputError(f"--report {args.report} already exists; a report is never overwritten.")
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

    if path.is_file() or (path.exists() and not path.is_dir()):
        folder = bundle.unpack_verified(path, scratch)
        run = load_run(folder, args.lock, args.trust_bundle_lock)
        return run, LevelResult("bundle SHA256SUMS", checks=1)
    return load_run(path, args.lock, args.trust_bundle_lock), None


def _compare(args, scratch: Path) -> int:
    from .audit.compare import compare, render_html

    runs = [_open_run(path, args, scratch / str(number))[0] for number, path in enumerate(args.compare)]
    result = compare(*runs)
    print("\n".join(result.lines()))
    if args.report:
        from . import atomic

        atomic.write_text(args.report, render_html(result))
        print(f"report: {args.report}")
    return 0


def _audit_one(args, scratch: Path) -> int:
    from .audit import arithmetic, bundle, claims, identity_level, rescore
    from .audit.findings import LevelResult

    target = args.bundle_file or args.run
    run, sums = _open_run(target, args, scratch)
    rows = len(run.record.questions) if run.record else 0
    if args.rescore != "all" and args.rescore > rows:
        raise InputError(f"--rescore {args.rescore}: the run has {rows} scored rows; give at most {rows} or 'all'.")
    levels = [sums] if sums else []
    levels += [claims.check_lock(run), claims.check_claims(run), arithmetic.check(run)]
    if args.arithmetic_only:
        levels.append(LevelResult("identity", skipped="--arithmetic-only"))
    else:
        levels.append(identity_level.check(run, args.cache))
    if args.rescore:
        vouched = all(level.passed for level in levels)
        if not vouched:  # the model sees only ids the earlier levels vouched for
            levels.append(LevelResult("rescore", skipped="an earlier level did not pass; no row reaches the model"))
        else:
            levels.append(rescore.check(run, args.cache, args.rescore, args.seed))
    _print_levels(target, run, levels)
    passed = all(level.passed or level.skipped for level in levels) and all(
        level.passed for level in levels if level.name in ("lock", "claims", "arithmetic"))
    if args.bundle:
        if not passed:
            raise CheckFailed(f"the audit of {target} failed; no bundle is packed for a run that does not pass.")
        path = bundle.pack(run, args.cache, args.results)
        print(f"bundle: {path}")
    return 0 if passed else 1


def _print_levels(target, run, levels) -> None:
    from .sanitize import printable

    record = run.record
    head = [f"{'WARNING: ' if run.trusts_claimed_lock else ''}audited against {run.lock_source}"]
    line = f"audit of {target}: run {printable(run.name)}"
    if record is not None:
        line += f", profile {printable(record.profile)}, {len(record.questions)} rows"
        profile = run.lock.profiles.get(record.profile)
        if profile is not None and profile.demo:  # the lock's profile decides, not the record's flag
            from .protocol import notice_for

            head.insert(1, f"*** {notice_for(profile)} ***")
    print("\n".join(head + [line]))
    for level in levels:
        print(printable("\n".join(level.lines()), keep_newlines=True))


def audit_main(argv=None) -> int:
    return _guarded(_audit, sys.argv[1:] if argv is None else argv)
