"""A warm interpreter for the suite's entry-script runs (issue 30, item 8).

Every `python run.py` / `audit.py` of the suite paid about 6 CPU-seconds importing torch, transformers and lm-eval
before its first line of work. This process pays them once: it imports what an entry script imports, then forks
one child per request. The child is a new process as a test sees one: its own pid, stdin from /dev/null, fds 1 and
2 on files, its own working folder, environment and argv, the script run as __main__, its own exit code. What it
shares with its siblings is only what the parent did before the first fork: imports, nothing run.

What a module reads from the environment when it is imported was read here, once: the numeric mode (the reference
lock's, which the test process runs in too) and the quiet and offline settings a run sets before its imports. A
request that changes such a variable (HF_*, TRANSFORMERS_*, the numeric mode) is run as a new process by the test
side instead (conftest.run_script).

Protocol: one JSON request per line on stdin ({"argv", "cwd", "env", "stdout", "stderr"}), one JSON answer per line
on the original stdout ({"code"}).

`warm.py --lm-eval` is the plain `lm_eval` console runs' warm interpreter (tests/support/processes.py::lm_eval_console):
it imports torch and transformers only, not datasets or lm-eval, which read HF_DATASETS_CACHE (each plain run its
own) when they are imported; each child runs the venv's `lm_eval` script, the real entry point, as __main__.
"""

import json
import os
import sys

from sst2_audit.run.job import OFFLINE_ENVIRONMENT  # noqa: E402 - imports neither torch nor transformers
from sst2_audit.util.console import QUIET_ENVIRONMENT  # noqa: E402

# What a run sets before it imports torch (run/job.py's _offline_environment), so the libraries read the same
# settings at import as in a new run process.
PRESET = {**OFFLINE_ENVIRONMENT, **QUIET_ENVIRONMENT}


def _child(request: dict) -> None:
    """In the forked child: become the requested process, run the script, exit with its code. Never returns."""
    code = 1
    try:
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                                (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
            opened = os.open(path, flags, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script.py` sets it
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
            import traceback

            traceback.print_exc()
            code = 1
        import threading

        threading._shutdown()  # as at a normal exit: wait for the script's non-daemon threads, then atexit
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream: nothing left to write
                pass
        os._exit(code)


# What a plain lm_eval run of the suite sets (tests/support/plain_runs.py) and what its warm interpreter imports.
LM_EVAL_PRESET = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
LEFT_TO_THE_CHILD = ("datasets", "lm_eval", "evaluate")


def _imports(lm_eval_runs: bool) -> None:
    if lm_eval_runs:
        os.environ.update(LM_EVAL_PRESET)
        import torch  # noqa: F401
        import transformers.modeling_utils  # noqa: F401
        import transformers.models.auto.modeling_auto  # noqa: F401
        import transformers.models.llama.modeling_llama  # noqa: F401 - the suite's tiny models are Llamas
        early = sorted({name.split(".")[0] for name in sys.modules} & set(LEFT_TO_THE_CHILD))
        assert not early, f"imported before the runs' own environment: {early}"
        return
    os.environ.update(PRESET)
    import sst2_audit.cli  # noqa: F401 - the package, and below what its runs import later
    import lm_eval.evaluator  # noqa: F401
    import lm_eval.models.huggingface  # noqa: F401
    import lm_eval.tasks  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import torch  # noqa: F401
    import transformers  # noqa: F401


def main() -> None:
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    _imports("--lm-eval" in sys.argv[1:])

    answers.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            answers.close()
            _child(request)
        _, status = os.waitpid(pid, 0)
        answers.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")


if __name__ == "__main__":
    main()
