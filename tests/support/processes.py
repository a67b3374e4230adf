"""A command as a user runs it: an entry script in a process of its own (forked from the warm interpreter), the
installed command as typed, or a refusal in this process; and what a test reads of it."""

import json
import os
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

from support.paths import REFERENCE_MODE, REPO, VENV_BIN
from support.warm import LM_EVAL_PRESET

# Variables read when Python starts or a library is imported (PYTHONPATH: a shadowed lm_eval, tests/support/shadows.py): a
# run that sets one needs an interpreter that has not imported yet.
IMPORT_TIME_VARIABLES = ("PYTHON", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "ATEN_", "MKL_", "ONEDNN_")


def _needs_new_interpreter(args: tuple, env: dict | None, cwd: Path) -> bool:
    """A variable read at import, or a lock (--lock) in another numeric mode than the reference's, which the warm
    interpreter runs in (the mode is fixed when torch is imported)."""
    if any(name.startswith(IMPORT_TIME_VARIABLES) for name in env or {}):
        return True
    words = [str(a) for a in args]
    if "--lock" not in words[:-1]:
        return False
    try:
        lock = Path(cwd) / words[words.index("--lock") + 1]
        mode = json.loads(lock.read_text())["run_settings"]["numeric_mode"]
    except (OSError, ValueError, KeyError, TypeError):
        return False  # unreadable: the script refuses it before torch
    return mode != REFERENCE_MODE


def run_script(script: str, *args, env: dict | None = None, cwd: Path | None = None,
               fresh: bool = False) -> subprocess.CompletedProcess:
    """Run an entry script as a user would: a process of its own, real exit code. Forked from the warm interpreter
    (tests/support/warm.py: torch, transformers and lm-eval already imported), or with fresh=True, or when env sets a
    variable read at import, a new interpreter (what a test of process start-up needs)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    argv = [str(REPO / script), *map(str, args)]
    if fresh or _needs_new_interpreter(args, env, Path(cwd or REPO)):
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=full_env,
                              cwd=str(cwd or REPO))
    return _warm().run(argv, full_env, Path(cwd or REPO))


def lm_eval_console(words: list, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    """The venv's `lm_eval` console script (the real entry point) with `words`, as a user runs it: forked from the
    plain runs' warm interpreter (`warm.py --lm-eval`: torch and transformers imported, about 6 s of each run's
    start), or a new interpreter when env sets a variable read at import other than the datasets cache's."""
    argv = [str(VENV_BIN / "lm_eval"), *map(str, words)]
    warm = _warm(True)
    if any(name.startswith(IMPORT_TIME_VARIABLES) and not name.startswith("HF_DATASETS_")
           and env.get(name) != warm.env.get(name) for name in {*env, *warm.env}):
        return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(cwd))
    return warm.run(argv, env, Path(cwd))


class _Warm:
    """The test process's warm interpreter (tests/support/warm.py), started at its first use, stopped at exit;
    lm_eval_runs: the plain lm_eval runs' (warm.py --lm-eval)."""

    def __init__(self, lm_eval_runs: bool = False):
        import atexit
        import tempfile

        self.scratch = Path(tempfile.mkdtemp(prefix="sst2-audit-warm-"))
        self.env = {**os.environ, **(LM_EVAL_PRESET if lm_eval_runs else {})}
        self.process = subprocess.Popen([sys.executable, str(REPO / "tests" / "support" / "warm.py"),
                                         *(["--lm-eval"] if lm_eval_runs else [])], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=str(REPO), env=dict(os.environ))
        ready = json.loads(self.process.stdout.readline() or "{}")
        assert "ready" in ready, "the warm interpreter did not start (run tests/support/warm.py by hand to see why)"
        atexit.register(self.stop)

    def run(self, argv: list, env: dict, cwd: Path) -> subprocess.CompletedProcess:
        out, err = self.scratch / "stdout", self.scratch / "stderr"
        for path in (out, err):
            path.unlink(missing_ok=True)
        request = {"argv": argv, "env": env, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline() or "{}")
        assert "code" in answer, "the warm interpreter stopped"
        return subprocess.CompletedProcess([sys.executable, *argv], answer["code"], out.read_text(),
                                           err.read_text())

    def stop(self) -> None:
        import shutil

        self.process.stdin.close()
        self.process.wait(timeout=60)
        shutil.rmtree(self.scratch, ignore_errors=True)


@cache
def _warm(lm_eval_runs: bool = False) -> _Warm:
    return _Warm(lm_eval_runs)


def run_cli(script: str, *args) -> subprocess.CompletedProcess:
    """An entry script's main in this process, for refusals that stop before any model or lm-eval work (usage
    errors, bad input): the exit code and output run_script would give, without a new interpreter (issue 30)."""
    import contextlib
    import io

    from sst2_audit.cli import audit_main, prepare_main, run_main
    from sst2_audit.util.progress import set_quiet

    main = {"run.py": run_main, "audit.py": audit_main, "prepare.py": prepare_main}[script]
    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    os.chdir(REPO)  # where run_script runs the scripts
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as stop:  # argparse's usage errors
                code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        os.chdir(here)
        set_quiet(False)  # --quiet and --json set it for the process
    return subprocess.CompletedProcess([script, *map(str, args)], code, out.getvalue(), err.getvalue())


def tree_state(folder: Path) -> dict:
    """Every file under folder with size and mtime: 'unchanged' means this dict is equal."""
    folder = Path(folder)
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def one_paragraph(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, text
    return lines[0]


def readme_journeys() -> list:
    """The README's journeys, each a list of command lines: run, audit a bundle, audit your own model, adopt a
    plain lm-eval run, adopt a chat-template run."""
    readme = (REPO / "README.md").read_text()
    sections = [readme.split(f"## {title}", 1)[1].split("\n## ", 1)[0] for title in
                ("Three journeys", "Audit your own model and data", "Adopt a plain lm-eval run",
                 "An instruct model, as the leaderboard ran it")]
    blocks = [block for section in sections for block in section.split("```\n")[1::2]]
    return [[line for line in block.splitlines() if line.strip()] for block in blocks]


def run_installed(line: str, cwd: Path, fresh: bool = False) -> subprocess.CompletedProcess:
    """A command line as a user with the venv active types it: `sst2-audit ...`, the venv's bin first on PATH.
    The script runs forked from the warm interpreter (it is this interpreter's script: its first line says so), or
    with fresh=True as its own new process."""
    words = shlex.split(line)
    assert words[0] == "sst2-audit", line
    script = VENV_BIN / "sst2-audit"
    assert script.is_file(), f"{script}: the installed command is missing (pip install -e .)"
    assert Path(script.read_text().splitlines()[0][2:]).parent == VENV_BIN, script  # the venv's Python runs it
    env = dict(os.environ, PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if fresh:
        return subprocess.run([str(script), *words[1:]], capture_output=True, text=True, env=env, cwd=str(cwd))
    return _warm().run([str(script), *words[1:]], env, Path(cwd))


def kill_rank_one(launcher: subprocess.Popen, after: float = 0.0, within: float = 120.0) -> int | None:
    """SIGKILL the rank-1 process a `torchrun` launcher started (found by its environment and parent), `after`
    seconds once it is seen; its pid, or None when none appeared within `within` s or the launcher ended first."""
    import signal
    import time

    deadline = time.monotonic() + within
    while launcher.poll() is None and time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and b"\0RANK=1\0" in b"\0" + (proc / "environ").read_bytes() and \
                        "TORCHELASTIC_RUN_ID" in (proc / "environ").read_text(errors="replace") and \
                        int((proc / "stat").read_text().split()[3]) == launcher.pid:
                    time.sleep(after)
                    os.kill(int(proc.name), signal.SIGKILL)
                    return int(proc.name)
            except (OSError, ValueError):
                continue
        time.sleep(0.01)
    return None


def launched(*words, cwd: Path, wait: bool = True):
    """The installed command (`sst2-audit WORDS...`) under torchrun, two processes on this machine (gloo; no launcher
    variables inherited): the finished process, or with wait=False the running launcher."""
    env = {key: value for key, value in os.environ.items() if key not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    argv = [str(VENV_BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python",
            str(VENV_BIN / "sst2-audit"), *map(str, words)]
    if wait:
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=env)
