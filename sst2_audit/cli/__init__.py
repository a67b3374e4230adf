"""The entry points of prepare.py, run.py and audit.py, and the exit-code contract they share:

0: all checks passed; 1: a check failed; 2: bad usage or unreadable input; 3: our own bug
(a short message; the traceback only with --debug); 4 (audit.py): no problem found, not everything verified;
130: interrupted (Ctrl-C); 143: terminated (SIGTERM), cleaned up as Ctrl-C is; 141: the output's reader went away
(`| head`). Defined once in util/errors.py.
"""

import functools
from collections.abc import Callable
import json
import signal
import sys
import threading
from importlib import metadata
from typing import NoReturn

from sst2_audit.audit.verdict import verdict_object
from sst2_audit.cli import adopt, audit, corpus, prepare, run
from sst2_audit.formats.releases import installed_version
from sst2_audit.util.commands import DEFAULT_LOCK
from sst2_audit.util import console
from sst2_audit.util.errors import (EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_TERMINATED, AuditError, InternalError,
                                    Terminated)
from sst2_audit.util.sanitize import printable
from sst2_audit.util.suggest import did_you_mean


VERDICT_COMMANDS = ("run", "audit", "adopt")  # the commands that give a verdict: --format json


def _terminated(number, frame):
    raise Terminated


def _stopped_by(error: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM behind an error: a signal that lands inside an import or a class body (lm-eval's
    lazy imports) reaches us wrapped, e.g. as "RuntimeError: Error calling __set_name__", with it as the cause."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _said(message: str, code: int) -> int:
    """An error's one paragraph on stderr and, under `--format json`, as the verdict object too."""
    print(printable(f"error: {message}"), file=sys.stderr)
    command = console.json_command()
    if command:
        console.emit_verdict(verdict_object(command, None, error=printable(message), exit_code=code))
    return code


def _stop(stopped: KeyboardInterrupt) -> NoReturn:
    terminated = isinstance(stopped, Terminated)
    code = EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    _said(f"{'terminated (SIGTERM)' if terminated else 'interrupted'}; nothing half-written was kept.", code)
    sys.stdout.flush()
    sys.stderr.flush()
    import os

    # at once: a scoring thread may still be inside torch, and the interpreter's shutdown racing it can
    # abort the process after the cleanup (seen: "terminate called without an active exception", -6)
    os._exit(code)


def _as_json(argv) -> bool:
    return "--format=json" in argv or any(a == "--format" and b == "json" for a, b in zip(argv, argv[1:]))


def _guarded(body, argv, command: str | None = None) -> int:
    """The command, its errors as exit codes; under `--format json` (run, audit, adopt) stdout carries one object."""
    if command in VERDICT_COMMANDS and _as_json(argv):
        with console.verdict_as_json(command):
            return _checked(body, argv)
    return _checked(body, argv)


def _checked(body, argv) -> int:
    debug = "--debug" in argv
    if threading.current_thread() is threading.main_thread():  # a plain `kill` cleans up as Ctrl-C does
        signal.signal(signal.SIGTERM, _terminated)
    try:
        return body(argv)
    except AuditError as error:
        behind = _stopped_by(error)
        if behind is not None:
            _stop(behind)
        if debug:
            import traceback

            traceback.print_exc()

        return _said(str(error), error.exit_code)
    except KeyboardInterrupt as stopped:
        _stop(stopped)
    except BrokenPipeError:  # the reader of our output went away (`| head`): not a bug, and nowhere to say more
        import os

        for stream in (sys.stdout, sys.stderr):  # no second error at exit, whichever pipe it was
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        return EXIT_BROKEN_PIPE
    except Exception as error:  # noqa: BLE001 - anything else is our bug: exit 3, never a bare traceback
        behind = _stopped_by(error)
        if behind is not None:
            _stop(behind)
        if debug:
            import traceback

            traceback.print_exc()

        return _said(f"internal error ({type(error).__name__}: {str(error)[:300]}); this is a bug in sst2-audit, not "
                     "in your input. Re-run with --debug for the traceback.", InternalError.exit_code)


def prepare_main(argv=None) -> int:
    return _guarded(prepare.main, sys.argv[1:] if argv is None else argv)


def run_main(argv=None) -> int:
    return _guarded(run.main, sys.argv[1:] if argv is None else argv, "run")


# argv None: this process is the command (a console script, an entry script), and may set what its libraries read
# at import (a structural audit's transformers without torch); a caller's own process (argv given) is left as it is.
def audit_main(argv=None, owns_process=None) -> int:
    owns = argv is None if owns_process is None else owns_process
    return _guarded(functools.partial(audit.main, owns_process=owns), sys.argv[1:] if argv is None else argv, "audit")


def adopt_main(argv=None, owns_process=None, models: dict | None = None) -> int:
    """models: the models this process's earlier adoptions loaded, to serve this one (a corpus pass shares one)."""
    owns = argv is None if owns_process is None else owns_process
    return _guarded(functools.partial(adopt.main, owns_process=owns, models=models), sys.argv[1:] if argv is None
                    else argv, "adopt")


def corpus_main(argv=None) -> int:
    """Every run under a folder adopted in this process, each through adopt_main (one error contract per run)."""
    return _guarded(functools.partial(corpus.main, adopt=adopt_main), sys.argv[1:] if argv is None else argv)


COMMANDS: dict[str, Callable[..., int]] = {
    "prepare": prepare_main, "run": run_main, "audit": audit_main, "adopt": adopt_main, "corpus": corpus_main}


SUMMARIES = {
    "prepare": "fetch the lock's pinned model and data into a cache, every file hashed (--pin: a lock of your own)",
    "run": "score the dev rows through lm-eval and the independent path, bit for bit, and write the records",
    "audit": "re-check a run folder or bundle offline (arithmetic, identity, rescore); --bundle packs it",
    "adopt": "audit a plain `lm_eval --log_samples` run against your lock and keep it as a folder and bundle",
    "corpus": "adopt every plain lm-eval run under a folder: one line per run, corpus.json and .csv, resumable",
}


def _usage() -> str:
    lines = ["usage: sst2-audit COMMAND [options]   (sst2-audit COMMAND --help lists a command's options)", "",
             "commands:"]
    lines += [f"  {name:8s} {words}" for name, words in SUMMARIES.items()]
    return "\n".join(lines + ["", "sst2-audit --version: this tool's version and the lm-eval release of the "
                              "default lock and of this environment"])


def version() -> str:
    """The tool's version, the default lock's pinned lm-eval release and the installed one."""
    try:
        pinned = json.loads(DEFAULT_LOCK.read_text(encoding="utf-8"))["evaluator"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        pinned = "unknown (no readable default lock)"
    try:
        installed = installed_version()
    except Exception:  # noqa: BLE001 - no lm-eval installed: said, not a crash
        installed = "not installed"
    return (f"sst2-audit {metadata.version('sst2-audit')}; default lock {DEFAULT_LOCK.name} pins lm-eval {pinned}; "
            f"this environment has lm-eval {installed}")


def main(argv=None) -> int:
    """`sst2-audit prepare|run|audit|adopt ...`: the installed command (pyproject's [project.scripts]); the same as
    `python prepare.py|run.py|audit.py ...` with the Python that has lm-eval, whichever `python` is first on PATH."""
    owned = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        print(version())
        return 0
    if not argv or argv[0] not in COMMANDS:
        asked = argv[:1] in (["-h"], ["--help"])
        print(_usage() if asked else f"{_usage()}\n\nerror: " + (
            f"unknown command {argv[0]!r}{did_you_mean(argv[0], COMMANDS)}" if argv else "a command is missing"),
              file=sys.stdout if asked else sys.stderr)
        return 0 if asked else 2
    if argv[0] in ("audit", "adopt"):
        return COMMANDS[argv[0]](argv[1:], owns_process=owned)
    return COMMANDS[argv[0]](argv[1:])
