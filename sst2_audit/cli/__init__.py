"""The entry points of prepare.py, run.py and audit.py, and the exit-code contract they share:

0: all checks passed; 1: a check failed; 2: bad usage or unreadable input; 3: our own bug
(a short message; the traceback only with --debug); 4 (audit.py): no problem found, not everything verified;
130: interrupted (Ctrl-C). Defined once in util/errors.py.
"""

import functools
import sys

from sst2_audit.cli import adopt, audit, prepare, run
from sst2_audit.util.errors import EXIT_INTERRUPTED, AuditError, InternalError
from sst2_audit.util.sanitize import printable


def _guarded(body, argv) -> int:
    debug = "--debug" in argv
    try:
        return body(argv)
    except AuditError as error:
        if debug:
            import traceback

            traceback.print_exc()

        print(printable(f"error: {error}"), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("error: interrupted; nothing half-written was kept.", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        import os

        # at once: a scoring thread may still be inside torch, and the interpreter's shutdown racing it can
        # abort the process after the cleanup (seen: "terminate called without an active exception", -6)
        os._exit(EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader of our output went away (`| head`): not a bug, nothing more to say
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    except Exception as error:  # noqa: BLE001 - anything else is our bug: exit 3, never a bare traceback
        if debug:
            import traceback

            traceback.print_exc()

        print(printable(f"error: internal error ({type(error).__name__}: {str(error)[:300]}); this is a bug in "
                        f"sst2-audit, not in your input. Re-run with --debug for the traceback."), file=sys.stderr)
        return InternalError.exit_code


def prepare_main(argv=None) -> int:
    return _guarded(prepare.main, sys.argv[1:] if argv is None else argv)


def run_main(argv=None) -> int:
    return _guarded(run.main, sys.argv[1:] if argv is None else argv)


# argv None: this process is the command (a console script, an entry script), and may set what its libraries read
# at import (a structural audit's transformers without torch); a caller's own process (argv given) is left as it is.
def audit_main(argv=None, owns_process=None) -> int:
    owns = argv is None if owns_process is None else owns_process
    return _guarded(functools.partial(audit.main, owns_process=owns), sys.argv[1:] if argv is None else argv)


def adopt_main(argv=None, owns_process=None) -> int:
    owns = argv is None if owns_process is None else owns_process
    return _guarded(functools.partial(adopt.main, owns_process=owns), sys.argv[1:] if argv is None else argv)


COMMANDS = {"prepare": prepare_main, "run": run_main, "audit": audit_main, "adopt": adopt_main}


def main(argv=None) -> int:
    """`sst2-audit prepare|run|audit ...`: the installed command (pyproject's [project.scripts]); the same as
    `python prepare.py|run.py|audit.py ...` with the Python that has lm-eval, whichever `python` is first on PATH."""
    owned = argv is None
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: sst2-audit {{{','.join(COMMANDS)}}} [options]  (each command's --help lists its options)",
              file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    if argv[0] in ("audit", "adopt"):
        return COMMANDS[argv[0]](argv[1:], owns_process=owned)
    return COMMANDS[argv[0]](argv[1:])
