"""prepare through the real huggingface_hub client against a real HTTP server on loopback."""

import hashlib
import json

import pytest

from support.paths import EMBEDDED_COLUMNS, load_lock_json
from support.processes import one_paragraph, run_script, tree_state
from support.hubserver import HubServer, Repo
from sst2_audit.task.dataset import read_demo_tsv, write_parquet
from sst2_audit.util.hashing import sha256_file
from sst2_audit.formats.manifest import read_manifest

MODEL_REV = "1" * 40
DATA_REV = "2" * 40
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
DATA_FILES = {"train": "sst2/train-00000-of-00001.parquet", "validation": "sst2/validation-00000-of-00001.parquet"}


@pytest.fixture(scope="module")
def repo_files(embedded_cache, tmp_path_factory):
    """A tiny real model (random weights, SmolLM2's tokenizer) and the demo rows as the data repo."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-repo")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=49152, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
                         tie_word_embeddings=True, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(config).save_pretrained(str(folder), safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).write_bytes((embedded_cache / "model" / name).read_bytes())
    model = {name: (folder / name).read_bytes() for name in MODEL_FILES}
    data = {}
    for split, path in DATA_FILES.items():
        target = folder / f"{split}.parquet"
        rows = read_demo_tsv(embedded_cache.parent.parent / "data" / "demo" / f"{split}.tsv", EMBEDDED_COLUMNS)
        write_parquet(rows, target, EMBEDDED_COLUMNS)
        data[path] = target.read_bytes()
    return model, data


@pytest.fixture
def hub(repo_files):
    model, data = repo_files
    server = HubServer({
        ("model", "test-org/tiny-smollm"): Repo(MODEL_REV, dict(model), lfs={"model.safetensors"}),
        ("dataset", "test-org/glue"): Repo(DATA_REV, dict(data), lfs=set(data)),
    }).start()
    yield server
    try:
        server.stop()
    except Exception:
        pass


def write_lock(tmp_path, pins: dict | None = None) -> tuple:
    raw = load_lock_json()
    pins = pins or {}
    raw["profiles"] = {"loopback": {
        "description": "tiny repo served on loopback",
        "model": {"source": "hub", "repo_id": "test-org/tiny-smollm", "repo_type": "model", "revision": MODEL_REV,
                  "files": [{"path": p, "sha256": pins.get(p)} for p in MODEL_FILES]},
        "data": {"source": "hub", "repo_id": "test-org/glue", "repo_type": "dataset", "revision": DATA_REV,
                 "files": [{"path": p, "split": s, "rows": {"train": 64, "validation": 264}[s], "sha256": pins.get(p)}
                           for s, p in DATA_FILES.items()]},
    }}
    lock = tmp_path / "loopback.lock.json"
    lock.write_text(json.dumps(raw, indent=2))
    return lock, tmp_path / "cache"


def prepare(hub_endpoint, lock, cache, *extra):
    return run_script("prepare.py", "--lock", lock, "--profile", "loopback", "--cache", cache, *extra,
                      env={"HF_ENDPOINT": hub_endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_ETAG_TIMEOUT": "5",
                           "HF_HUB_DOWNLOAD_TIMEOUT": "5"})


def test_download_verify_update_lock_and_offline_reverify(hub, tmp_path, repo_files):
    lock, cache = write_lock(tmp_path)
    done = prepare(hub.endpoint, lock, cache, "--update-lock")
    assert done.returncode == 0, done.stderr
    assert "lock fully hashed: yes" in done.stdout
    manifest = read_manifest(cache)
    model, data = repo_files
    assert manifest.file("validation").sha256 == sha256_file(cache / "data" / "validation.parquet")
    assert (cache / "model" / "model.safetensors").read_bytes() == model["model.safetensors"]
    assert manifest.file("validation").source == f"hub dataset test-org/glue@{DATA_REV[:12]}/{DATA_FILES['validation']}"
    pinned = {f["path"]: f["sha256"] for r in ("model", "data")
              for f in json.loads(lock.read_text())["profiles"]["loopback"][r]["files"]}
    assert pinned["model.safetensors"] == sha256_file(cache / "model" / "model.safetensors")
    assert all(pinned.values())
    gets = [path for method, path in hub.log if method == "GET"]
    assert f"/test-org/tiny-smollm/resolve/{MODEL_REV}/model.safetensors" in gets
    assert f"/datasets/test-org/glue/resolve/{DATA_REV}/{DATA_FILES['train']}" in gets
    hub.stop()  # the hub is gone: a complete cache re-verifies offline, and a run needs no hub
    done = run_script("run.py", "--lock", lock, "--profile", "loopback", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "loopback-smoke")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "agreement             4/4 candidate scores bit for bit (max abs diff 0.0)" in done.stdout
    assert "identity              2/2 logged samples match their rows" in done.stdout and "EMBEDDED DEMO" not in done.stdout
    before = tree_state(cache)
    done = run_script("prepare.py", "--lock", lock, "--profile", "loopback", "--cache", cache,
                      env={"HF_HUB_OFFLINE": "1", "HF_ENDPOINT": hub.endpoint})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("verified:")
    assert tree_state(cache) == before


def test_import_from_a_folder_with_a_fully_hashed_lock(hub, tmp_path, repo_files):
    model, data = repo_files
    pins = {name: __import__("hashlib").sha256(body).hexdigest() for name, body in {**model, **data}.items()}
    lock, cache = write_lock(tmp_path, pins)
    source = tmp_path / "copied"
    for repo_id, files in (("test-org/tiny-smollm", model), ("test-org/glue", data)):
        for path, body in files.items():
            (source / repo_id / path).parent.mkdir(parents=True, exist_ok=True)
            (source / repo_id / path).write_bytes(body)
    hub.stop()
    done = prepare(hub.endpoint, lock, cache, "--from", source)
    assert done.returncode == 0, done.stderr
    assert read_manifest(cache).file("train").source.startswith("imported copy of test-org/glue@")
    (source / "test-org/glue" / DATA_FILES["train"]).write_bytes(data[DATA_FILES["train"]][:-1] + b"X")
    done = prepare(hub.endpoint, lock, tmp_path / "cache2", "--from", source)
    assert done.returncode == 1
    assert f"expected {pins[DATA_FILES['train']]}" in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "cache2") == {}


def _corrupt_lfs_etag(hub):
    hub.repos[("model", "test-org/tiny-smollm")].claimed_etag["model.safetensors"] = "ab" * 32


def _corrupt_blob_etag(hub):
    hub.repos[("model", "test-org/tiny-smollm")].claimed_etag["config.json"] = "cd" * 20


def _move_revision(hub):
    hub.repos[("dataset", "test-org/glue")].revision = "3" * 40


def _answer_other_commit(hub):
    hub.repos[("dataset", "test-org/glue")].answer_commit = "4" * 40


def _truncate(hub):
    hub.truncate.add("model.safetensors")


@pytest.mark.parametrize("fault, message", [
    (_corrupt_lfs_etag, f"test-org/tiny-smollm@{MODEL_REV[:12]}/model.safetensors: hub LFS sha256 expected {'ab' * 32}, "
                        "downloaded file has "),
    (_corrupt_blob_etag, f"config.json: hub git blob sha1 expected {'cd' * 20}"),
    (_move_revision, f"revision {DATA_REV} does not exist on the hub (wrong revision pinned?)"),
    (_answer_other_commit, f"the hub resolved revision {DATA_REV} to commit {'4' * 40}"),
    (_truncate, "model.safetensors: download failed, the connection broke mid-file (truncated download"),
], ids=lambda value: value.__name__.strip("_") if callable(value) else "")
def test_a_hub_fault_fails_with_its_reason_and_leaves_no_cache(hub, tmp_path, fault, message):
    fault(hub)
    lock, cache = write_lock(tmp_path)
    done = prepare(hub.endpoint, lock, cache)
    assert done.returncode == 1, done.stderr
    assert message in one_paragraph(done.stderr)
    assert tree_state(cache) == {}


def test_lock_pin_mismatch(hub, tmp_path):
    lock, cache = write_lock(tmp_path, {"tokenizer.json": "ef" * 32})
    done = prepare(hub.endpoint, lock, cache)
    assert done.returncode == 1
    assert "model/tokenizer.json (hub model test-org/tiny-smollm@" in done.stderr
    assert f"sha256: expected {'ef' * 32}, got " in one_paragraph(done.stderr)
    assert tree_state(cache) == {}


def test_server_gone_mid_way(hub, tmp_path):
    hub.stop_after_gets = 3
    lock, cache = write_lock(tmp_path)
    done = prepare(hub.endpoint, lock, cache)
    assert done.returncode in (1, 2), done.stderr
    message = one_paragraph(done.stderr)
    assert "test-org/tiny-smollm" in message
    assert tree_state(cache) == {}


def test_hub_unreachable_names_the_ways_forward(tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed once we leave: nothing listens there
    lock, cache = write_lock(tmp_path)
    done = prepare(f"http://127.0.0.1:{port}", lock, cache)
    assert done.returncode == 2
    message = one_paragraph(done.stderr)
    assert f"The hub could not be reached for test-org/glue@{DATA_REV} (ConnectionError: connection refused)" in message
    assert "`sst2-audit prepare --profile embedded`" in message and "`--from DIR`" in message
    assert tree_state(cache) == {}


def test_no_weights_fetches_everything_but_the_weights_and_the_cache_says_so(hub, tmp_path, repo_files):
    """prepare --no-weights (a model too large for the reviewer's machine): the data, tokenizer and config come from
    the hub, the weights never do (no request for them); the manifest pins them as not fetched, run refuses the
    cache (exit 2, nothing written), a plain prepare will not fill it in, --verify passes."""
    model, _ = repo_files
    pins = {"model.safetensors": hashlib.sha256(model["model.safetensors"]).hexdigest()}
    lock, cache = write_lock(tmp_path, pins)
    done = prepare(hub.endpoint, lock, cache, "--no-weights")
    assert done.returncode == 0, done.stderr
    assert "no weights: the model's 1 weight file(s) are pinned, not fetched (--no-weights)" in done.stdout
    assert not any("model.safetensors" in path for _, path in hub.log)
    assert sorted(p.name for p in (cache / "model").iterdir()) == sorted(set(MODEL_FILES) - {"model.safetensors"})
    entry = next(f for f in read_manifest(cache).files if f.path == "model/model.safetensors")
    assert (entry.size, entry.sha256, entry.source) == (0, pins["model.safetensors"], "not fetched (prepare --no-weights)")
    done = run_script("run.py", "--lock", lock, "--profile", "loopback", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 2 and "prepared with --no-weights, so it holds no model weights" in one_paragraph(
        done.stderr), done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()
    done = prepare(hub.endpoint, lock, cache)
    assert done.returncode == 2 and "a cache is never filled in afterwards" in one_paragraph(done.stderr)
    assert run_script("prepare.py", "--lock", lock, "--profile", "loopback", "--cache", cache, "--verify",
                      env={"HF_HUB_OFFLINE": "1"}).returncode == 0
