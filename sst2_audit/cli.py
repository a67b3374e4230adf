"""Argument parsing and exit codes for the three entry scripts.

0: all checks passed; 1: a check failed; 2: bad usage or unreadable input.
"""

import argparse
import sys
from pathlib import Path

from .errors import AuditError

DEFAULT_LOCK = Path(__file__).resolve().parent.parent / "resources.lock.json"


def _guarded(body, argv) -> int:
    try:
        return body(argv)
    except AuditError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was kept.", file=sys.stderr)
        return 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own exit code is already 2
        self.print_usage(sys.stderr)
        self.exit(2, f"error: {message}\n")


def _common(parser):
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK, help="lock file (default: resources.lock.json)")
    parser.add_argument("--cache", type=Path, default=Path("cache"), help="cache folder (default: ./cache)")


def _prepare(argv) -> int:
    from . import prepare
    from .lock import load_lock

    parser = _Parser(prog="prepare.py", description="Fetch, verify and cache the pinned resources.")
    _common(parser)
    parser.add_argument("--profile", default="glue-sst2", help="profile of the lock (default: glue-sst2)")
    parser.add_argument("--from", dest="import_dir", type=Path, help="import files copied from a connected machine")
    parser.add_argument("--verify", action="store_true", help="only re-hash the cache against manifest and lock")
    parser.add_argument("--update-lock", action="store_true", help="fill the lock's unknown sha256s after a verified download")
    args = parser.parse_args(argv)
    lock = load_lock(args.lock)
    profile = lock.profile(args.profile)
    if args.verify:
        manifest = prepare.verify(lock, profile, args.cache)
        print(f"verified: {len(manifest.files)} files in {args.cache} match the manifest and {args.lock.name}")
        return 0
    manifest, action = prepare.prepare(lock, profile, args.cache, args.import_dir)
    if args.update_lock:
        prepare.update_lock(lock, profile, args.cache, manifest)
        lock = load_lock(args.lock)
        manifest = prepare.verify(lock, lock.profile(args.profile), args.cache)
    label = "EMBEDDED DEMO profile (not a GLUE SST-2 measurement)" if profile.demo else f"profile {profile.name}"
    print(f"{action}: {args.cache} holds {len(manifest.files)} verified files for the {label}; "
          f"lock fully hashed: {'yes' if manifest.lock_fully_hashed else 'no'}")
    return 0


def prepare_main(argv=None) -> int:
    return _guarded(_prepare, sys.argv[1:] if argv is None else argv)


def _run(argv) -> int:
    from . import run_job
    from .lock import load_lock
    from .report import run_summary

    parser = _Parser(prog="run.py", description="Score the dev rows through lm-eval and the independent path.")
    _common(parser)
    parser.add_argument("--profile", default="glue-sst2", help="profile of the lock (default: glue-sst2)")
    parser.add_argument("--smoke", action="store_true", help=f"score only the first {run_job.SMOKE_ROWS} dev rows")
    parser.add_argument("--out", type=Path, help="public records folder (default: runs/<run-name>); must not exist")
    parser.add_argument("--private", type=Path, help="private records folder (default: private/<run-name>)")
    parser.add_argument("--run-name", help="name of the run (default: <profile>-<mode>-<UTC time>)")
    parser.add_argument("--unsorted-ids", action="store_true",
                        help="pass dev ids to lm-eval in hash order: reproduces upstream #4084, the run must fail")
    args = parser.parse_args(argv)
    lock = load_lock(args.lock)
    profile = lock.profile(args.profile)
    name = args.run_name or run_job.default_run_name(profile.name, args.smoke)
    out = args.out or Path("runs") / name
    private = args.private or Path("private") / name
    record = run_job.execute(run_job.RunOptions(lock, profile, args.cache, out, private, name,
                                                smoke=args.smoke, sort_ids=not args.unsorted_ids))
    print(run_summary(record, out, private))
    return 0


def run_main(argv=None) -> int:
    return _guarded(_run, sys.argv[1:] if argv is None else argv)
