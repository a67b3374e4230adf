"""`run` of a task shape the two-path run does not hold (generate_until, loglikelihood_rolling): the official path is
lm-eval's own command line, made from the profile by `prepare --lm-eval-files`'s writer (the YAML pointed at the
verified cache, the dev rows sorted by id, the lock's numeric mode, dtype, attention, batch 1, seed and shots) and run
in a process of its own into the private folder; cli/run.py then adopts what it logged with every row rescored on the
independent path, so the public folder is an adopted folder that `audit --out` re-checks."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from sst2_audit.formats.manifest import read_manifest, require_matching, verify_files
from sst2_audit.resources import lm_eval_files
from sst2_audit.run.job import OFFLINE_ENVIRONMENT
from sst2_audit.task.evaluator_pin import verify_installed
from sst2_audit.util import atomic, console
from sst2_audit.util.errors import InternalError
from sst2_audit.util.progress import phase, say

FILES, OUTPUT, LOG = "lm-eval-files", "lm-eval-out", "lm_eval.log"
_COUNTER = re.compile(r"Running (\w+) requests:\s+\d+%\|[^|]*\|\s*(\d+)/(\d+)")  # lm-eval's tqdm bar, in its log


def lm_eval_program() -> list:
    """This environment's `lm_eval` console script (what a user runs), else its module."""
    script = Path(sys.executable).with_name("lm_eval")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "lm_eval"]


def official_run(lock, profile, spec, cache: Path, private: Path, rows: int | None) -> Path:
    """The cache verified, the files and command written to private/lm-eval-files, `lm_eval` run in private/ (its
    output in private/lm-eval-out, everything it printed in private/lm_eval.log). Returns the output folder."""
    cache = Path(cache).resolve()
    manifest = require_matching(read_manifest(cache), cache, lock, profile)
    with phase("verify cache and evaluator (hash before the run)"):
        verify_files(cache, manifest)
        verify_installed(lock, spec)
    atomic.new_directory(private, "--private")
    private = private.resolve()
    command = lm_eval_files.write(lock, profile, spec, cache, cache, private / FILES, rows, str(private / OUTPUT))
    atomic.write_text(private / "lm_eval.command", command.line() + "\n")  # the line a reviewer can run again
    env = {**os.environ, **OFFLINE_ENVIRONMENT, **console.QUIET_ENVIRONMENT, **command.env,
           "HF_DATASETS_CACHE": str(private / "datasets")}
    say(f"[official path] lm_eval on the first {command.rows} dev rows (hash order) in its own process; what it "
        f"prints: {private / LOG}")
    with phase("official path: lm_eval"), open(private / LOG, "wb") as log:
        _run_child([*lm_eval_program(), *command.argv], log, env, private)
    return private / OUTPUT


def _run_child(argv: list, log, env: dict, cwd: Path) -> None:
    """lm_eval in a process of its own; Ctrl-C or SIGTERM ends it with the run. The two signals are held while it
    starts (a handler raising inside Popen would leave the started child unnamed, running on after the run), then
    raised again where the child is known. Held by handler, not by mask: any thread may take a signal."""
    held: list = []
    handlers = {number: signal.signal(number, lambda caught, _: held.append(caught))
                for number in (signal.SIGINT, signal.SIGTERM)}
    restore = lambda: [signal.signal(number, handler) for number, handler in handlers.items()]  # noqa: E731
    try:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    except BaseException:
        restore()
        raise
    try:
        restore()  # inside: a signal from here on meets the child's cleanup below
        for number in held:  # the run's own handler, as if the signal came now
            signal.raise_signal(number)
        _wait(process, Path(log.name))
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        tail = Path(log.name).read_text(errors="replace").strip().splitlines()[-5:]
        raise InternalError(f"lm_eval exited {process.returncode} on the files this run wrote ({cwd / FILES}); its "
                            f"last lines: {' | '.join(tail)} (all of it: {log.name})")


def _wait(process, log: Path, every: float = 10.0) -> None:
    """Waits for lm_eval, saying its request counter (from its progress bar in the log) every `every` seconds."""
    last = time.perf_counter()
    while process.poll() is None:
        time.sleep(0.2)
        if time.perf_counter() - last >= every:
            last = time.perf_counter()
            found = _COUNTER.findall(_tail(log))
            say(f"[official path: lm_eval] {found[-1][1]}/{found[-1][2]} {found[-1][0]} requests" if found else
                "[official path: lm_eval] loading and building requests")


def _tail(log: Path, size: int = 4000) -> str:
    """The log's last `size` bytes (its progress bar's latest state), not the whole log read again every time."""
    with open(log, "rb") as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - size))
        return handle.read().decode(errors="replace")
