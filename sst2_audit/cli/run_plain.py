"""`run` of a generate_until or loglikelihood_rolling profile: lm-eval's own command line on the dev rows
(run/plain.py), then `adopt` of what it logged with every row rescored on the independent path. The public folder
is an adopted folder (`audit --out` re-checks it); lm-eval's own output, with the data text, stays in the private
folder."""

import shutil
from pathlib import Path

from sst2_audit.cli import adopt
from sst2_audit.run.plain import official_run
from sst2_audit.scoring.shards import launched
from sst2_audit.task.split import SMOKE_ROWS
from sst2_audit.util.errors import InputError, InternalError
from sst2_audit.util.progress import say


def run_plain(args, lock, profile, spec, name: str, out: Path, private: Path) -> int:
    """The run's exit code: the adoption's (0 PASS, 1 a check failed, 4 within a bound only)."""
    _refuse(args, spec)
    if out.exists():
        raise InputError(f"--out {out} already exists; a finished run is never overwritten. Choose another folder "
                         "or move the old one away.")
    rows = SMOKE_ROWS if args.smoke else args.rows  # None: every dev row of the profile
    say(f"[run] profile {profile.name}: task {spec.name} is a {spec.shape.name} task: its official path is lm_eval's "
        "own command line, its independent path `adopt`'s rescore of every row (docs/cli.md)")
    fresh = not private.exists()
    try:
        output = official_run(lock, profile, spec, args.cache, private, rows)
    except InternalError:
        raise  # lm_eval failed: its log stays in the private folder, named by the error
    except BaseException:  # an error, Ctrl-C: nothing was recorded, so nothing is left to block a rerun
        if fresh:
            shutil.rmtree(private, ignore_errors=True)
        raise
    words = [str(output), "--lock", str(args.lock), "--profile", profile.name, "--cache", str(args.cache),
             "--task", spec.name, "--run-name", name, "--out", str(out), "--rescore", "all", "--format", args.format]
    code = adopt.main(words)
    if code == 1:
        print(f"lm-eval's output is kept for inspection: {private / 'lm-eval-out'}")
    return code


def _refuse(args, spec) -> None:
    """What a two-path run offers and this one does not, refused before any work."""
    if launched() > 1:
        raise InputError(f"{launched()} processes were started (WORLD_SIZE): `run` of a {spec.shape.name} task runs "
                         "lm_eval in one process; start it without a launcher.")
    given = [option for option, set_ in (("--unsorted-ids", args.unsorted_ids), ("--quiet", args.quiet),
                                         ("--json", args.json)) if set_]
    if given:
        raise InputError(f"{', '.join(given)}: task {spec.name} is a {spec.shape.name} task, whose run is lm_eval's "
                         "own command line adopted with every row rescored (no run.json, no lm-eval id order of "
                         "ours to reproduce): leave them out (--format json gives the verdict as JSON).")
