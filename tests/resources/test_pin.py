"""prepare.py --pin: a researcher's own model folder and data become a NEW lock, then prepare, run and audit.

The model is a tiny random Llama built here and saved as sharded safetensors with SmolLM2's tokenizer;
the data is RTE-shaped sentence pairs written here (JSONL and CSV), never a real benchmark's text.
"""

import csv
import json
import shutil

import pytest

from support.builders import prepare_cache, prepare_run_audit, tiny_model_folder
from support.paths import LOCK
from support.processes import one_paragraph, run_cli, run_script, tree_state
from sst2_audit.task.split import split_key


def _pairs(count: int) -> list:
    return [{"sentence1": f"Test premise {n}: the {['red', 'blue', 'green'][n % 3]} kite flew over hill {n}.",
             "sentence2": f"A kite flew over hill {n if n % 2 else n + 1}.", "label": n % 2, "idx": n}
            for n in range(count)]


@pytest.fixture(scope="module")
def own_model(embedded_cache, tmp_path_factory):
    folder = tmp_path_factory.mktemp("own-model")
    tiny_model_folder(folder, 7, embedded_cache, max_shard_size="4MB")
    assert len(list(folder.glob("*.safetensors"))) > 1  # sharded
    return folder


def _write_jsonl(folder, split, rows):
    (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _rte_folder(folder, rows: int = 200):
    """RTE-shaped JSONL written here: 8 train rows and `rows` validation rows."""
    folder.mkdir()
    _write_jsonl(folder, "train", _pairs(8))
    _write_jsonl(folder, "validation", _pairs(rows))
    return folder


def test_pin_prepare_run_and_audit_ones_own_model_and_data(own_model, tmp_path, monkeypatch):
    # the model sits under the (fake) home folder, outside the new lock's folder (issue 29): no record names it
    home = tmp_path / "home" / "someone"
    own_model = shutil.copytree(own_model, home / "models" / "own-model")
    monkeypatch.setenv("HOME", str(home))
    data = tmp_path / "my-data"
    data.mkdir()
    _write_jsonl(data, "train", _pairs(8))
    with (data / "validation.csv").open("w", newline="") as handle:  # CSV too: converted once, recorded
        writer = csv.DictWriter(handle, fieldnames=["sentence1", "sentence2", "label", "idx"])
        writer.writeheader()
        writer.writerows(_pairs(200))
    locks = tmp_path / "locks"
    new_lock = locks / "mine.lock.json"
    done = run_script("prepare.py", "--lock", LOCK, "--pin", "mine", "--task", "rte", "--model", own_model,
                      "--data", data, "--new-lock", new_lock)
    assert done.returncode == 0, done.stderr
    assert f"pinned: {new_lock} = resources.lock.json + profile mine (task rte" in done.stdout
    pinned_line = next(line for line in done.stdout.splitlines() if line.startswith("pinned: "))
    from sst2_audit.util.commands import command_line  # this environment's command (tests/cli/test_journeys.py)

    assert pinned_line.endswith(f"next: SST2_AUDIT_MINE_MODEL={own_model} "
                                f"{command_line('prepare', '--lock', new_lock, '--profile', 'mine')} --cache <cache>"), \
        done.stdout
    assert "input length: longest scored input " in done.stdout and "within max_length 512" in done.stdout
    monkeypatch.setenv("SST2_AUDIT_MINE_MODEL", str(own_model))
    written = json.loads(new_lock.read_text())
    base = json.loads(LOCK.read_text())
    assert {k: v for k, v in written["profiles"].items() if k != "mine"} == base["profiles"]  # no pin changed
    profile = written["profiles"]["mine"]
    assert written["schema_version"] == 4 and profile["model"] == "mine"  # an entry of the lock's models
    model_entry = written["models"]["mine"]
    assert model_entry["path"] == "${SST2_AUDIT_MINE_MODEL}"  # outside the lock's folder: never a climbing path
    assert profile["data"]["path"] == "mine-data" and "home" not in profile["description"]
    assert profile["data"]["columns"] == [["sentence1", "string"], ["sentence2", "string"], ["label", "int64"],
                                          ["idx", "int64"]]
    assert sorted(profile["data"]["converted_from"]) == ["train", "validation"]
    assert len([f for f in model_entry["files"] if f["path"].endswith(".safetensors")]) > 1
    cache = tmp_path / "cache"
    done = run_script("prepare.py", "--lock", new_lock, "--profile", "mine", "--cache", cache)
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", new_lock, "--profile", "mine", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "mine-smoke")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["max_abs_diff"] == 0.0 and record["task"] == "rte" and record["demo"] is False
    public = "".join(path.read_text() for path in (tmp_path / "out").iterdir())
    assert str(tmp_path) not in public and str(own_model) not in public  # the lock's relative folders only
    done = run_script("audit.py", "--lock", new_lock, "--out", tmp_path / "out", "--cache", cache,
                      "--bundle", "--results", tmp_path / "results")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was rescored bit for bit")
    # the bundle packed from the pinned lock passes its own audit, and no member names a machine folder
    bundle = tmp_path / "results" / "mine-smoke.tar.gz"
    done = run_script("audit.py", "--lock", new_lock, "--bundle-file", bundle, "--cache", cache)
    assert done.returncode == 0, done.stdout + done.stderr
    from support.bundles import members_of

    for name, body in members_of(bundle).items():
        for machine in (str(home), "someone", str(tmp_path), "<home>", "../"):
            assert machine not in body.decode("utf-8", errors="replace"), (name, machine)
    # a second profile shares the model entry: one pin, and one copy of each model file in the caches
    shared_lock = locks / "shared.lock.json"
    # ... and is pinned at 3 shots (from the train split) with its own max_length, through the pin command alone
    done = run_script("prepare.py", "--lock", new_lock, "--pin", "second", "--task", "rte", "--model", "model:mine",
                      "--data", data, "--new-lock", shared_lock, "--num-fewshot", "3", "--max-length", "1024")
    assert done.returncode == 0, done.stderr
    shared = json.loads(shared_lock.read_text())
    assert shared["profiles"]["second"]["model"] == "mine" and shared["models"] == written["models"]
    assert shared["profiles"]["second"]["settings"] == {"num_fewshot": 3, "max_length": 1024}
    second = prepare_run_audit(shared_lock, "second", tmp_path / "second")  # bit for bit, the default audit PASS
    assert second["settings"]["num_fewshot"] == 3 and [len(q["shots"]) for q in second["questions"]] == [3, 3]
    weights = sorted(p.name for p in (cache / "model").glob("*.safetensors"))
    cache2 = tmp_path / "second" / "cache"
    assert weights and all((cache / "model" / w).stat().st_ino == (cache2 / "model" / w).stat().st_ino
                           for w in weights)
    # pinning again never overwrites
    before = tree_state(locks)
    done = run_cli("prepare.py", "--lock", LOCK, "--pin", "mine", "--task", "rte", "--model", own_model,
                   "--data", data, "--new-lock", new_lock)
    assert done.returncode == 2 and "already exists; a lock is never overwritten" in one_paragraph(done.stderr)
    assert tree_state(locks) == before


@pytest.mark.parametrize("case, message", [
    ("small", "split 'validation' has 100 rows; task rte scores it and the lock's split rule needs at least 192"),
    ("missing", "task rte reads the splits train, validation; no file for validation (one of .parquet, .jsonl, .csv "
                "each, e.g. validation.jsonl)."),
    ("mixed", "column 'label' mixes types"),
    ("pickle", "no *.safetensors weights (found pytorch_model.bin: pickle files are never loaded"),
    ("task", "task truthfulqa_gl_mc2 (lm_eval/tasks/galician_bench/truthfulqa_gl_mc2.yaml) is not supported: it ha"
             "s its own process_results (lm_eval/tasks/galician_bench/utils.py::process_results_mc2), a metric computed by task code"),
    # a hook that fails on the data is bad input, named with the hook (rte-shaped data for hellaswag)
    ("hook", "lm_eval/tasks/hellaswag/utils.py::process_docs failed on this data (KeyError: 'ctx_a')"),
    ("fields", "task boolq's templates do not render on row 1 of "),
    ("bos", "--add-bos-token: the tokenizer of "),
    ("shots", "--pin x: the profile's settings: a profile may set attention (eager or sdpa), add_bos_token (true or "
              "false), num_fewshot (0..1024), max_length (2..1048576), shots_may_show_sealed_rows (true), "
              "bootstrap_iters (1..10000000), seed (0..4294967295), dev_rows (2..100000 or \"all\"), "
              "apply_chat_template (true), fewshot_as_multiturn (true) and system_instruction (printable text, "
              "1..16384 characters), got \"{'num_fewshot': -1}\"."),
])
def test_pin_refuses_bad_input_before_writing_anything(own_model, tmp_path, case, message):
    data = tmp_path / "d"
    data.mkdir()
    _write_jsonl(data, "train", _pairs(8))
    rows = _pairs(100 if case == "small" else 200)
    if case == "mixed":
        rows[5]["label"] = "yes"
    if case != "missing":
        _write_jsonl(data, "validation", rows)
    model = own_model
    if case == "pickle":
        model = tmp_path / "pickled"
        model.mkdir()
        for name in ("config.json", "tokenizer_config.json"):
            shutil.copyfile(own_model / name, model / name)
        (model / "pytorch_model.bin").write_bytes(b"not loaded")
    new_lock = tmp_path / "locks" / "x.lock.json"
    task = {"task": "truthfulqa_gl_mc2", "hook": "hellaswag", "fields": "boolq"}.get(case, "rte")
    extra = {"bos": ["--add-bos-token"], "shots": ["--num-fewshot", "-1"]}.get(case, [])
    done = run_cli("prepare.py", "--pin", "x", "--task", task, "--model", model, *extra,
                   "--data", data, "--new-lock", new_lock)
    assert done.returncode == 2, done.stderr
    assert message in one_paragraph(done.stderr)
    assert case != "fields" or "'passage' is undefined" in done.stderr
    assert not new_lock.exists() and not (tmp_path / "locks" / "x-data").exists()
    # a late refusal (bos: after the data was converted) leaves no staging folder either: the retry is not blocked
    assert not (tmp_path / "locks").exists() or not list((tmp_path / "locks").iterdir())


@pytest.mark.parametrize("seed", range(4))
def test_pin_names_the_one_odd_row_of_the_users_file(own_model, tmp_path, seed, capsys):
    """Generated cases: one row anywhere in the scored split has a gold answer that is no choice; the pin refuses
    it by the user's file and row number before any model work (issue 29: odd rows used to stop the run late)."""
    import random

    from sst2_audit.cli import prepare_main

    chosen = random.Random(seed)
    data = tmp_path / "d"
    data.mkdir()
    _write_jsonl(data, "train", _pairs(8))
    rows = _pairs(200)
    odd = chosen.randrange(len(rows))
    rows[odd]["label"] = chosen.choice([-1, 2, 7, 10**6])
    _write_jsonl(data, "validation", rows)
    new_lock = tmp_path / "locks" / "x.lock.json"
    code = prepare_main(["--pin", "x", "--task", "rte", "--model", str(own_model), "--data", str(data),
                         "--new-lock", str(new_lock)])
    message = one_paragraph(capsys.readouterr().err)
    assert code == 2 and message.startswith(f"error: {data / 'validation.jsonl'}: task rte's templates do not render "
                                            f"on row {odd + 1} of 200 (InputError: task rte: the gold answer "
                                            f"'{rows[odd]['label']}' is not an index into the 2 choices.)"), message
    assert not (tmp_path / "locks").exists() or not list((tmp_path / "locks").iterdir())


def _model_copy(own_model, folder):
    folder.mkdir()
    for entry in own_model.iterdir():
        shutil.copyfile(entry, folder / entry.name)
    return folder


@pytest.mark.parametrize("what", ["tokenizer.json", "config.json", "model-00001-of-00002.safetensors", "data"])
def test_pin_never_follows_a_symlink_out_of_the_folders_it_was_given(own_model, tmp_path, what):
    """Issue 28: a model or data file linked to a system file is refused (exit 2, named), nothing written."""
    secret = tmp_path / "secret.txt"
    secret.write_text("not yours\n")
    model = _model_copy(own_model, tmp_path / "model")
    data = _rte_folder(tmp_path / "data")
    if what == "data":
        (data / "validation.jsonl").unlink()
        (data / "validation.jsonl").symlink_to(secret)
    else:
        if not (model / what).exists():
            what = sorted(p.name for p in model.glob("*.safetensors"))[0]
        (model / what).unlink()
        (model / what).symlink_to(secret)
    locks = tmp_path / "locks"
    done = run_cli("prepare.py", "--pin", "x", "--task", "rte", "--model", model, "--data", data,
                   "--new-lock", locks / "x.lock.json")
    assert done.returncode == 2, done.stderr
    assert "is a symbolic link; --pin reads only the folder's own files" in one_paragraph(done.stderr)
    assert not locks.exists() or not list(locks.iterdir())


def test_generated_profile_names_are_accepted_exactly_when_they_are_safe_slugs(own_model, tmp_path):
    """Fuzz over names (path parts, newlines, escapes): a refused name exits 2 before anything is read or written;
    an accepted one is a slug. In-process for the many, one subprocess for the newline the issue names."""
    import random

    from sst2_audit.util.errors import InputError
    from sst2_audit.resources.pin import _profile_name

    rng = random.Random(28)
    alphabet = list("aZ09._-/\\ \n\r\t\x1b$`;|&") + ["..", "../", "\u202e"]
    for _ in range(2000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        try:
            _profile_name(name)
        except InputError:
            continue
        assert name[0].isalnum() and all(c.isalnum() or c in "._-" for c in name) and "\n" not in name, repr(name)
    locks = tmp_path / "locks"
    for bad in ("../../../x", "a/b", "x\n", "x\nVERDICT: PASS"):
        done = run_cli("prepare.py", "--pin", bad, "--task", "rte", "--model", own_model,
                       "--data", _rte_folder(tmp_path / f"d{len(list(tmp_path.iterdir()))}"),
                       "--new-lock", locks / "x.lock.json")
        assert done.returncode == 2 and "a profile name is 1-100 letters" in one_paragraph(done.stderr), done.stderr
        assert not locks.exists() and not (tmp_path.parent / "x-data").exists()
        assert not any(line.startswith("VERDICT") for line in (done.stdout + done.stderr).splitlines())


def test_a_huge_data_file_is_refused_by_its_size_before_it_is_read(own_model, tmp_path):
    data = _rte_folder(tmp_path / "data")
    with open(data / "validation.jsonl", "r+b") as handle:
        handle.truncate(2 << 30)  # a sparse 2 GiB file: refused by its size, never read
    done = run_cli("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", tmp_path / "locks" / "x.lock.json")
    assert done.returncode == 2 and f"validation.jsonl: {2 << 30} bytes, more than the 536870912 a split may have; " \
        "refused before reading." in one_paragraph(done.stderr), done.stderr
    assert not (tmp_path / "locks").exists() or not list((tmp_path / "locks").iterdir())


def test_a_deeply_nested_jsonl_line_is_bad_input_not_a_crash(own_model, tmp_path):
    data = _rte_folder(tmp_path / "data")
    (data / "validation.jsonl").write_text("[" * 100_000 + "\n")
    done = run_cli("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", tmp_path / "locks" / "x.lock.json")
    assert done.returncode == 2 and "validation.jsonl:1: not a document (nested too deeply)." in one_paragraph(done.stderr)


def _arc_questions(count: int) -> list:
    colours = ["red", "blue", "green", "yellow"]
    return [{"id": f"Test-{n}", "question": f"Which colour is test ball number {n}?",
             "choices": {"text": [f"It is {c}." for c in colours], "label": ["A", "B", "C", "D"]},
             "answerKey": "ABCD"[n % 4]} for n in range(count)]


def test_pin_a_task_the_lock_does_not_pin_with_a_struct_column(own_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SST2_AUDIT_ARC_MODEL", str(own_model))  # a folder outside the lock's: named by a variable
    """arc_easy: its YAML pinned from the installed lm-eval and checked against the pinned wheel; `choices`
    is a struct of lists, pinned as the parquet states it; prepare, run, audit pass bit for bit."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "arc"
    data.mkdir()
    for split, count in (("train", 8), ("validation", 8), ("test", 200)):  # pandas-like large_string text
        table = pa.Table.from_pylist(_arc_questions(count))
        table = table.cast(pa.schema([pa.field("id", pa.large_string())] + list(table.schema)[1:]))
        pq.write_table(table, str(data / f"{split}.parquet"))
    new_lock = tmp_path / "arc.lock.json"
    done = run_script("prepare.py", "--pin", "arc", "--task", "arc_easy", "--model", own_model, "--data", data,
                      "--new-lock", new_lock)
    assert done.returncode == 0, done.stderr
    written = json.loads(new_lock.read_text())
    assert written["evaluator"]["tasks"]["arc_easy"] == "lm_eval/tasks/arc/arc_easy.yaml"
    base = json.loads(LOCK.read_text())["evaluator"]["files"]
    assert {k: v for k, v in written["evaluator"]["files"].items() if k in base} == base  # no pin changed
    assert ["choices", "struct<text: list<element: string>, label: list<element: string>>"] in written["profiles"]["arc"]["data"]["columns"]
    assert ["id", "string"] in written["profiles"]["arc"]["data"]["columns"]
    record = prepare_run_audit(new_lock, "arc", tmp_path)
    assert record["task"] == "arc_easy" and record["metrics"] == ["acc", "acc_norm"] and record["max_abs_diff"] == 0.0


def test_pin_from_the_loopback_hub_at_a_branch_resolves_to_its_commit(own_model, bos_model, tmp_path):
    """A model repo (sharded safetensors) and a dataset repo (pandas-like parquet) served on loopback;
    `main` is resolved to its commit through the real huggingface_hub client, every file hashed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from support.hubserver import HubServer, Repo

    model_rev, data_rev = "a" * 40, "b" * 40
    model = {p.name: p.read_bytes() for p in own_model.iterdir() if p.is_file()}
    data = {}
    for split, count in (("train", 8), ("validation", 200)):
        table = pa.Table.from_pylist(_pairs(count))
        table = table.cast(pa.schema([pa.field("sentence1", pa.large_string()), pa.field("sentence2", pa.large_string()),
                                      pa.field("label", pa.int64()), pa.field("idx", pa.int64())]))
        sink = tmp_path / f"{split}.parquet"
        pq.write_table(table, str(sink))
        data[f"data/{split}-00000-of-00001.parquet"] = sink.read_bytes()
    server = HubServer({
        ("model", "test-org/own-llama"): Repo(model_rev, model, lfs={n for n in model if n.endswith(".safetensors")},
                                              branches={"main": model_rev}),
        ("dataset", "test-org/own-pairs"): Repo(data_rev, data, lfs=set(data), branches={"main": data_rev}),
        ("model", "test-org/own-opt"): Repo("c" * 40, {p.name: p.read_bytes() for p in bos_model.iterdir() if p.is_file()},
                                            branches={"v1": "c" * 40}),
    }).start()
    env = {"HF_ENDPOINT": server.endpoint, "HF_HUB_DISABLE_XET": "1", "HF_HUB_ETAG_TIMEOUT": "5",
           "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_HOME": str(tmp_path / "hf-home"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    try:
        new_lock = tmp_path / "hub.lock.json"
        done = run_script("prepare.py", "--pin", "hubbed", "--task", "rte", "--model", "hub:test-org/own-llama@main",
                          "--data", "hub:test-org/own-pairs@main", "--new-lock", new_lock, env=env)
        assert done.returncode == 0, done.stderr
        profile = json.loads(new_lock.read_text())["profiles"]["hubbed"]
        model_entry = json.loads(new_lock.read_text())["models"][profile["model"]]
        assert model_entry["revision"] == model_rev and profile["data"]["revision"] == data_rev
        assert ["sentence1", "large_string"] in profile["data"]["columns"]
        assert sorted(f["path"] for f in model_entry["files"]) == sorted(model)  # config, shards, index, tokenizer
        cache = tmp_path / "cache"
        done = run_script("prepare.py", "--lock", new_lock, "--profile", "hubbed", "--cache", cache, env=env)
        assert done.returncode == 0, done.stderr
        # the other architecture, which needs BOS, from the hub at a tag: pinned, prepared, run and audited with it
        done = run_script("prepare.py", "--pin", "hubopt", "--task", "rte", "--model", "hub:test-org/own-opt@v1",
                          "--data", "hub:test-org/own-pairs@main", "--new-lock", tmp_path / "opt" / "opt.lock.json",
                          "--add-bos-token", env=env)
        assert done.returncode == 0, done.stderr
        record = prepare_run_audit(tmp_path / "opt" / "opt.lock.json", "hubopt", tmp_path / "opt", env=env)
        assert record["settings"]["add_bos_token"] is True and record["max_abs_diff"] == 0.0
        done = run_script("prepare.py", "--pin", "other", "--task", "rte", "--model", "hub:test-org/own-llama@nope",
                          "--data", "hub:test-org/own-pairs@main", "--new-lock", tmp_path / "x.lock.json", env=env)
        assert done.returncode == 2 and "the hub has no revision 'nope' of test-org/own-llama" in one_paragraph(done.stderr)
        assert not list((tmp_path / "tmp").glob("sst2-audit-pin-*"))  # each pin's download is removed after it
    finally:
        server.stop()
    done = run_script("run.py", "--lock", new_lock, "--profile", "hubbed", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "hub-smoke")
    assert done.returncode == 0, done.stderr[-3000:]
    done = run_script("audit.py", "--lock", new_lock, "--out", tmp_path / "out", "--cache", cache)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prepare_refuses_a_small_scored_split_before_the_model(own_model, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from sst2_audit.util.hashing import sha256_file

    data = _rte_folder(tmp_path / "d")
    new_lock = tmp_path / "ok.lock.json"
    done = run_script("prepare.py", "--pin", "ok", "--task", "rte", "--model", own_model, "--data", data,
                      "--new-lock", new_lock)
    assert done.returncode == 0, done.stderr
    small = tmp_path / "ok-data" / "validation.parquet"  # a lock that pins a 100-row scored split
    pq.write_table(pa.Table.from_pylist(_pairs(100)), str(small))
    raw = json.loads(new_lock.read_text())
    entry = next(f for f in raw["profiles"]["ok"]["data"]["files"] if f["split"] == "validation")
    entry.update(sha256=sha256_file(small), rows=100)
    (tmp_path / "small.lock.json").write_text(json.dumps(raw))
    cache = tmp_path / "cache"
    done = run_cli("prepare.py", "--lock", tmp_path / "small.lock.json", "--profile", "ok", "--cache", cache)
    assert done.returncode == 2, done.stderr
    assert "split 'validation' has 100 rows; the task scores it and the lock's split rule needs at least 192" in \
        one_paragraph(done.stderr)
    assert "model files" not in done.stderr and not (cache / "manifest.json").exists()
    assert [p.name for p in cache.iterdir()] == []


def test_a_lock_under_sdpa_attention_is_run_and_audited_as_such(own_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SST2_AUDIT_MINE_MODEL", str(own_model))  # a folder outside the lock's: named by a variable
    """Both paths share one loaded model, so under sdpa they run the same kernels: bit for bit again
    (measured on the embedded profile: 128/128 equal between the paths, 125/128 differ from eager by <= 2.86e-05)."""
    data = _rte_folder(tmp_path / "d")
    pinned = tmp_path / "eager.lock.json"
    assert run_script("prepare.py", "--pin", "mine", "--task", "rte", "--model", own_model, "--data", data,
                      "--new-lock", pinned).returncode == 0
    raw = json.loads(pinned.read_text())
    raw["run_settings"]["attention"] = "sdpa"
    lock = tmp_path / "sdpa.lock.json"
    lock.write_text(json.dumps(raw))
    record = prepare_run_audit(lock, "mine", tmp_path)
    assert record["settings"]["attention"] == "sdpa" and record["max_abs_diff"] == 0.0
    cache = tmp_path / "cache"
    raw["run_settings"]["attention"] = "flash_attention_2"
    lock.write_text(json.dumps(raw))
    done = run_cli("prepare.py", "--lock", lock, "--profile", "mine", "--cache", cache)
    assert done.returncode == 2 and "attention one of ('eager', 'sdpa'), got 'cpu' and 'flash_attention_2'" in done.stderr


@pytest.fixture(scope="module")
def bos_model(embedded_cache, tmp_path_factory):
    """A tiny random OPT (another architecture) whose tokenizer opens every text with its BOS token, as OPT's does."""
    import torch
    from tokenizers import processors
    from transformers import AutoTokenizer, OPTConfig, OPTForCausalLM

    folder = tmp_path_factory.mktemp("bos-model")
    torch.manual_seed(3)
    config = OPTConfig(vocab_size=49152, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                       max_position_embeddings=1024, word_embed_proj_dim=16, bos_token_id=1, eos_token_id=2,
                       pad_token_id=2)
    OPTForCausalLM(config).save_pretrained(folder, safe_serialization=True, max_shard_size="4MB")
    tokenizer = AutoTokenizer.from_pretrained(str(embedded_cache / "model"))
    tokenizer.bos_token = "<|im_start|>"
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|im_start|> $A", pair="<|im_start|> $A $B", special_tokens=[("<|im_start|>", 1)])
    tokenizer.save_pretrained(folder)
    assert AutoTokenizer.from_pretrained(str(folder))("a")["input_ids"][0] == 1
    return folder


def test_a_model_that_needs_bos_is_pinned_run_and_audited_with_it(bos_model, tmp_path, monkeypatch):
    monkeypatch.setenv("SST2_AUDIT_OPT_MODEL", str(bos_model))  # a folder outside the lock's: named by a variable
    data = _rte_folder(tmp_path / "d")
    lock = tmp_path / "bos.lock.json"
    done = run_script("prepare.py", "--pin", "opt", "--task", "rte", "--model", bos_model, "--data", data,
                      "--new-lock", lock, "--add-bos-token", "--attention", "sdpa")
    assert done.returncode == 0, done.stderr
    assert json.loads(lock.read_text())["profiles"]["opt"]["settings"] == {"add_bos_token": True, "attention": "sdpa"}
    record = prepare_run_audit(lock, "opt", tmp_path)
    assert record["settings"]["add_bos_token"] is True and record["settings"]["attention"] == "sdpa"
    assert record["max_abs_diff"] == 0.0
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all(q["context_tokens"][0] == 1 for q in private["questions"])  # BOS opens every context
    raw = json.loads(lock.read_text())  # the same records under a lock without BOS: identity names the tokens
    del raw["profiles"]["opt"]["settings"]["add_bos_token"]
    (tmp_path / "nobos.lock.json").write_text(json.dumps(raw))
    done = run_script("audit.py", "--lock", tmp_path / "nobos.lock.json", "--out", tmp_path / "out", "--arithmetic-only")
    assert done.returncode == 1 and "run: settings: expected" in done.stdout


def _bad_csv(folder, body: bytes):
    _rte_folder(folder)
    (folder / "validation.jsonl").unlink()
    (folder / "validation.csv").write_bytes(body)


@pytest.mark.parametrize("case, args, message", [
    ("hub form", ["--model", "hub:nonsense"], "--model hub:nonsense: expected hub:ORG/NAME@REVISION"),
    ("unknown model entry", ["--model", "model:nope"], "has no model entry of that name (models: none)."),
    ("missing options", ["--model", "x"], "--pin needs --data, --new-lock"),
    ("not UTF-8", ["--data-body", b"sentence1,sentence2,label,idx\n\xff\xfe,b,0,0\n"], "validation.csv: not UTF-8 text"),
    ("short row", ["--data-body", b"sentence1,sentence2,label,idx\na,b,0\n"],
     "validation.csv:2: the row has fewer fields than the header."),
])
def test_pin_refuses_malformed_options_and_files_with_exit_2(own_model, tmp_path, case, args, message):
    data = tmp_path / "d"
    if args[0] == "--data-body":
        _bad_csv(data, args[1])
        args = ["--model", own_model]
    else:
        _rte_folder(data)
    extra = [] if case == "missing options" else ["--data", data, "--new-lock", tmp_path / "x.lock.json"]
    done = run_cli("prepare.py", "--pin", "x", "--task", "rte", *args, *extra)
    assert done.returncode == 2 and message in one_paragraph(done.stderr), done.stderr
    assert not (tmp_path / "x.lock.json").exists() and not (tmp_path / "x-data").exists()


def test_malformed_lock_models_and_profile_settings_exit_2(tmp_path):
    from support.paths import load_lock_json

    for change, message in (
            (lambda raw: raw.update(models=[1]), "models: expected dict, got list '[1]'."),
            (lambda raw: raw["profiles"]["embedded"].update(model="nowhere"),
             "profiles.embedded.model: 'nowhere' is not one of the lock's models (none)."),
            (lambda raw: raw["profiles"]["embedded"].update(settings={"attention": "flash"}),
             "profiles.embedded.settings: a profile may set attention (eager or sdpa), add_bos_token (true or false), "
             "num_fewshot (0..1024), max_length")):
        raw = load_lock_json()
        change(raw)
        lock = tmp_path / "lock.json"
        lock.write_text(json.dumps(raw))
        done = run_cli("prepare.py", "--lock", lock, "--profile", "embedded", "--cache", tmp_path / "c")
        assert done.returncode == 2 and message in one_paragraph(done.stderr), done.stderr
        assert not (tmp_path / "c").exists()
    done = run_cli("run.py", "--supported")
    assert done.returncode == 2 and "--supported filters --list-tasks" in done.stderr


def test_a_wheel_that_is_not_the_pinned_one_is_refused(own_model, tmp_path):
    data = _rte_folder(tmp_path / "d")
    wheel = tmp_path / "lm_eval-0.4.9.2-py3-none-any.whl"
    wheel.write_bytes(b"not the pinned wheel")
    done = run_script("prepare.py", "--pin", "arc", "--task", "arc_easy", "--model", own_model, "--data", data,
                      "--new-lock", tmp_path / "arc.lock.json", "--evaluator-wheel", wheel)
    assert done.returncode == 1 and "but the lock pins lm_eval-0.4.9.2-py3-none-any.whl as" in one_paragraph(done.stderr)
    assert not (tmp_path / "arc.lock.json").exists()


def _long_pairs(count: int, long_rows: set) -> list:
    rows = _pairs(count)
    for row in rows:
        if row["idx"] in long_rows:
            row["sentence1"] = " ".join(["a long premise about kites"] * 140)  # about 700 tokens
    return rows


def test_a_prompt_longer_than_max_length_is_found_at_pin_time_never_late(own_model, tmp_path):
    """Issue 29: the pin measures every scored row's longest input with the pinned tokenizer; it pins a
    max_length that fits (the model's context permitting), refuses an explicit --max-length that does not,
    naming the row and the option, and refuses an input longer than the model's context."""
    data = tmp_path / "data"
    data.mkdir()
    _write_jsonl(data, "train", _pairs(8))
    _write_jsonl(data, "validation", _long_pairs(200, set(range(200))))
    locks = tmp_path / "locks"
    done = run_script("prepare.py", "--pin", "long", "--task", "rte", "--model", own_model, "--data", data,
                      "--new-lock", locks / "long.lock.json")
    assert done.returncode == 0, done.stderr
    pinned = json.loads((locks / "long.lock.json").read_text())["profiles"]["long"]["settings"]["max_length"]
    line = next(line for line in done.stdout.splitlines() if line.startswith("input length: "))
    tokens = int(line.split("the longest scored input is ")[1].split(" ")[0])
    assert tokens > 512 and pinned == -(-tokens // 64) * 64 and pinned <= 2048, line
    assert line.endswith("more than the lock's 512"), line
    done = run_cli("prepare.py", "--pin", "short", "--task", "rte", "--model", own_model, "--data", data,
                   "--max-length", "512", "--new-lock", locks / "short.lock.json")
    assert done.returncode == 2, done.stderr
    message = one_paragraph(done.stderr)
    assert "--max-length 512: row idx " in message and f"is {tokens} tokens long (with its shots); the protocol " \
        f"never truncates. Give --max-length {tokens} or more (the model's context is 2048)." in message, message
    assert not (locks / "short.lock.json").exists() and not (locks / "short-data").exists()
    _write_jsonl(data, "validation", [dict(r, sentence1=r["sentence1"] * 4) for r in _long_pairs(200, set(range(200)))])
    done = run_cli("prepare.py", "--pin", "huge", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", locks / "huge.lock.json")
    assert done.returncode == 2 and "more than the model's context of 2048 (config.json max_position_embeddings)" \
        in one_paragraph(done.stderr), done.stderr
    # a run never meets it late: under the lock with the measured max_length, the run's pre-flight is silent
    done = run_script("prepare.py", "--lock", locks / "long.lock.json", "--profile", "long", "--cache",
                      tmp_path / "cache", env={"SST2_AUDIT_LONG_MODEL": str(own_model)})
    assert done.returncode == 0, done.stderr


def test_replace_swaps_ones_own_earlier_pin_and_nothing_else(own_model, tmp_path):
    """Issue 29: a re-pin under the same name needs --replace; it replaces only this command's own earlier result."""
    data = _rte_folder(tmp_path / "data")
    (data / "notes.txt").write_text("not a split\n")
    new_lock = tmp_path / "locks" / "x.lock.json"
    first = run_script("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                       "--new-lock", new_lock)
    assert first.returncode == 0, first.stderr
    assert f"ignored in {data}: notes.txt (task rte reads the splits train, validation)" in first.stdout
    before = json.loads(new_lock.read_text())
    again = run_script("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                       "--new-lock", new_lock)
    assert again.returncode == 2 and "To replace your own earlier pin of profile x, add --replace." in \
        one_paragraph(again.stderr)
    _write_jsonl(data, "validation", _pairs(210))
    again = run_script("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                       "--new-lock", new_lock, "--replace")
    assert again.returncode == 0, again.stderr
    after = json.loads(new_lock.read_text())
    assert after["profiles"]["x"]["data"]["files"][1]["rows"] == 210 != before["profiles"]["x"]["data"]["files"][1]["rows"]
    assert sorted(p.name for p in new_lock.parent.iterdir()) == ["x-data", "x.lock.json"]  # nothing left behind
    other = tmp_path / "locks" / "other.lock.json"
    other.write_text(LOCK.read_text())  # not a pin of profile x: never replaced
    done = run_cli("prepare.py", "--pin", "x", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", other, "--replace")
    assert done.returncode == 2 and "is not an earlier pin of profile x" in one_paragraph(done.stderr)
    assert other.read_text() == LOCK.read_text()


def test_a_full_split_profile_scores_every_row_that_is_not_sealed(own_model, tmp_path, monkeypatch):
    """--dev-rows all: the lock's 64 dev rows first, then every row past the sealed block in the same hash order;
    the sealed confirmation rows are the default pin's, and none of them is scored."""
    from sst2_audit.task.split import make_split

    monkeypatch.setenv("SST2_AUDIT_MINE_MODEL", str(own_model))
    data = _rte_folder(tmp_path / "d", rows=230)
    full, counted = tmp_path / "full.lock.json", tmp_path / "counted.lock.json"
    assert run_script("prepare.py", "--pin", "mine", "--task", "rte", "--model", own_model, "--data", data,
                      "--new-lock", full, "--dev-rows", "all").returncode == 0
    assert json.loads(full.read_text())["profiles"]["mine"]["settings"] == {"dev_rows": "all"}
    rule = json.loads(full.read_text())["split"]
    default = make_split(range(230), rule["salt"], rule["dev_rows"], rule["confirm_rows"])
    cache = prepare_cache(full, "mine", tmp_path)
    done = run_script("run.py", "--lock", full, "--profile", "mine", "--cache", cache, "--out", tmp_path / "out",
                      "--private", tmp_path / "private", "--run-name", "mine-full", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    scored = [q["idx"] for q in record["questions"]]
    ordered = sorted(range(230), key=lambda idx: (split_key(rule["salt"], idx), idx))
    assert len(scored) == 230 - 128 and scored[:64] == list(default.dev_ids) and scored[64:] == ordered[192:]
    assert not set(scored) & set(default.confirm_ids)
    done = run_script("audit.py", "--lock", full, "--out", tmp_path / "out", "--cache", cache)
    assert done.returncode == 0 and "rescore (all rows" in done.stdout, done.stdout + done.stderr
    assert "102 rows" in done.stdout
    # --rows reaches past the lock's 64 up to the profile's own count, and no further
    done = run_cli("run.py", "--lock", full, "--profile", "mine", "--cache", cache, "--rows", "103")
    assert done.returncode == 2 and "--rows 103: the profile has 102 dev rows." in one_paragraph(done.stderr)
    # a count: the first N of the same order; a count the split cannot give is refused at pin time, naming it
    assert run_script("prepare.py", "--pin", "counted", "--task", "rte", "--model", own_model, "--data", data,
                      "--new-lock", counted, "--dev-rows", "70").returncode == 0
    rows = make_split(range(230), rule["salt"], rule["dev_rows"], rule["confirm_rows"], profile_rows=70)
    assert list(rows.dev_ids) == scored[:70] and rows.confirm_ids == default.confirm_ids
    done = run_cli("prepare.py", "--pin", "big", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", tmp_path / "big.lock.json", "--dev-rows", "200")
    assert done.returncode == 2 and "the profile's dev_rows 200 needs 328 (200 dev + 128 sealed confirmation)" in \
        one_paragraph(done.stderr)
    done = run_cli("prepare.py", "--pin", "one", "--task", "rte", "--model", own_model, "--data", data,
                   "--new-lock", tmp_path / "one.lock.json", "--dev-rows", "1")
    assert done.returncode == 2
    assert "dev_rows (2..100000 or \"all\"), apply_chat_template (true)" in one_paragraph(done.stderr)
    assert "got \"{'dev_rows': 1}\"" in one_paragraph(done.stderr)
    assert not (tmp_path / "big.lock.json").exists() and not (tmp_path / "one.lock.json").exists()
