"""How the tool names its own commands to a person: the installed console script (pyproject's
[project.scripts]), as the user can type it, so that every message, example and next step works as printed."""

import shlex
import shutil
import sys
from pathlib import Path

SCRIPT = "sst2-audit"
# the checkout's entry scripts (prepare.py, run.py, audit.py): the fallback where the package is not installed
CHECKOUT = Path(__file__).resolve().parents[2]
DEFAULT_LOCK = CHECKOUT / "resources.lock.json"  # the lock a command reads without --lock


def invocation(command: str) -> list:
    """The words that start `command` (prepare, run or audit) with this Python's lm-eval: `sst2-audit` when the
    one on PATH is this environment's, else the full path of this environment's script (a venv not activated),
    else this Python with the checkout's entry script."""
    here = Path(sys.executable).parent / SCRIPT
    if not here.is_file():
        return [sys.executable, str(CHECKOUT / f"{command}.py")]
    on_path = shutil.which(SCRIPT)
    same = on_path is not None and Path(on_path).resolve() == here.resolve()
    return [SCRIPT if same else str(here), command]


def command_line(command: str, *words) -> str:
    """The exact command, quoted for a POSIX shell."""
    return " ".join(shlex.quote(str(w)) for w in [*invocation(command), *words])


def lock_words(lock_path) -> list:
    """`--lock PATH` unless PATH is the default lock, which a command reads without it."""
    return [] if Path(lock_path).resolve() == DEFAULT_LOCK else ["--lock", lock_path]
