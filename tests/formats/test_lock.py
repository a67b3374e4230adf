import json

import pytest

from support.paths import load_lock_json, LOCK, REPO
from support.processes import one_paragraph, run_cli
from sst2_audit.util.commands import command_line
from sst2_audit.util.errors import InputError
from sst2_audit.formats.lock import load_lock


def test_our_lock_pins_the_reference_resources():
    lock = load_lock(LOCK)
    assert lock.evaluator.version == "0.4.9.2"
    assert lock.evaluator.commit == "ad3f4d0cad1cfcdb815f1e795f7947e49ed9f2e9"
    assert lock.evaluator.files["lm_eval/evaluator.py"]
    glue = lock.profile("glue-sst2")
    assert glue.model.get("revision") == "12fd25f77366fa6b3b4b768ec3050bf629380bac"
    assert glue.data.get("revision") == "bcdcba79d07bc864c1c254ccfcedcce55bcc9a8c"
    assert {f.split: f.rows for f in glue.data.files} == {"train": 67349, "validation": 872}
    assert glue.fully_hashed is False  # hub sha256s are not knowable here: said explicitly with null
    embedded = lock.profile("embedded")
    assert embedded.fully_hashed is True
    assert embedded.model.get("wheel")["sha256"] == "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
    assert embedded.model.get("member")["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert (lock.split.dev_rows, lock.split.confirm_rows) == (64, 128)
    assert {k: v for k, v in lock.run_settings.items() if not k.endswith("_note")} == {
        "dtype": "float32", "device": "cpu", "threads": 0, "attention": "eager",
        "seed": 94, "max_length": 512, "batch_size": 1, "num_fewshot": 0,
        "numeric_mode": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2,STRICT", "ONEDNN_MAX_CPU_ISA": "AVX2"},
        "numeric_probe_sha256": "c500a0487b6b90627641bb038a8c7f754f5eadde8f12e261327f8fa651a703f1"}


def test_unknown_profile_is_refused(tmp_path):
    done = run_cli("prepare.py", "--profile", "glue-sst3", "--cache", tmp_path / "c")
    assert done.returncode == 2
    assert "unknown profile 'glue-sst3' (did you mean 'glue-sst2'?); this lock defines embedded, embedded-inverse-scaling, embedded-rte, glue-sst2." in one_paragraph(done.stderr)
    assert not (tmp_path / "c").exists()


def test_a_demo_profile_without_its_lock_names_the_shipped_lock_and_a_new_cache_names_prepare(tmp_path, capsys):
    from sst2_audit.cli import run_main

    assert run_main(["--profile", "embedded-copa", "--cache", str(tmp_path / "c")]) == 2
    assert one_paragraph(capsys.readouterr().err) == (
        f"error: {LOCK}: unknown profile 'embedded-copa'; this lock defines embedded, embedded-inverse-scaling, "
        f"embedded-rte, glue-sst2. Profile 'embedded-copa' is in the shipped lock demos.lock.json: add --lock "
        f"{REPO / 'demos.lock.json'}.")
    assert run_main(["--lock", str(REPO / "demos.lock.json"), "--cache", str(tmp_path / "c")]) == 2
    message = one_paragraph(capsys.readouterr().err)
    assert message.startswith(f"error: --profile is missing: {tmp_path / 'c'} is not prepared yet, so no profile can "
                              f"be taken from it. Name one of the profiles of {REPO / 'demos.lock.json'} "
                              "(embedded-arc-challenge-25shot, ")
    assert message.endswith(f"a new cache is prepared before any run: {command_line('prepare')} --lock "
                            f"{REPO / 'demos.lock.json'} --profile NAME --cache {tmp_path / 'c'}")
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the lock file"),
    ("{not json", "not valid JSON"),
    (json.dumps({"schema": "sst2-audit/resources.lock", "schema_version": 5}),
     "expected schema 'sst2-audit/resources.lock' version 4, got 'sst2-audit/resources.lock' version 5"),
    ('{"schema": "sst2-audit/resources.lock", "schema": "other"}', "not acceptable JSON (duplicate key 'schema')"),
    (json.dumps(dict(json.loads(LOCK.read_text()), evaluator={
        k: v for k, v in json.loads(LOCK.read_text())["evaluator"].items() if k != "task"})),
     "evaluator: field(s) missing: task (it holds package, version, commit, task, task_yaml, files, tasks, note, wheel)."),
])
def test_unreadable_or_invalid_lock(tmp_path, content, message):
    lock = tmp_path / "lock.json"
    if content is not None:
        lock.write_text(content)
    done = run_cli("prepare.py", "--profile", "embedded", "--lock", lock, "--cache", tmp_path / "c")
    assert done.returncode == 2
    assert message in one_paragraph(done.stderr)
    assert str(lock) in done.stderr
    assert not (tmp_path / "c").exists()


def test_schema_invalid_lock_names_the_field(tmp_path):
    raw = load_lock_json()
    del raw["profiles"]["embedded"]["data"]["files"][1]["sha256"]
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"profiles.embedded.data.files\[1\]: field\(s\) missing: sha256 \(it holds path, sha256, split"):
        load_lock(lock)
    raw = load_lock_json()
    raw["profiles"]["glue-sst2"]["model"]["revision"] = "main"
    lock.write_text(json.dumps(raw))
    with pytest.raises(InputError, match="expected a full 40-digit commit id, got 'main'"):
        load_lock(lock)
    raw = load_lock_json()
    raw["run_settings"]["threads"] = "2"
    del raw["run_settings"]["seed"]
    lock.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"run_settings: field\(s\) missing: seed \(it holds dtype"):
        load_lock(lock)


def test_local_resource_without_sha256_is_refused(tmp_path):
    raw = load_lock_json()
    raw["profiles"]["mine"] = {
        "model": raw["profiles"]["embedded"]["model"],
        "data": {"source": "local", "path": str(tmp_path), "files": [
            {"path": "train.parquet", "split": "train", "sha256": None},
            {"path": "validation.parquet", "split": "validation", "sha256": "0" * 64}]},
    }
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    with pytest.raises(InputError, match="every file of a local resource needs its sha256"):
        load_lock(lock)


@pytest.mark.parametrize("edit, message", [
    (lambda raw: raw["profiles"]["embedded"].update(demo="yes"), "profiles.embedded.demo: expected bool, got str 'yes'"),
    (lambda raw: raw["profiles"]["embedded"].update(notice=7), "profiles.embedded.notice: expected str, got int '7'"),
    (lambda raw: raw["profiles"]["embedded"].update(descripton="typo"),
     "profiles.embedded: unexpected field(s): 'descripton' (it holds model, data, task, demo, description, notice, "
     "settings)."),
    (lambda raw: raw["evaluator"].update(comment="x"), "evaluator: unexpected field(s): 'comment'"),
    (lambda raw: raw["split"].update(dev_rows=64.0), "split.dev_rows: expected int, got float '64.0'"),
    (lambda raw: raw["run_settings"].update(threds=2), "run_settings: unexpected field(s): 'threds'"),
    (lambda raw: raw["profiles"]["embedded"]["data"]["files"][0].update(size="12"),
     "profiles.embedded.data.files[0].size: expected int, got str '12'"),
    (lambda raw: raw["profiles"]["embedded"]["model"].update(revison="x"),
     "profiles.embedded.model: unexpected field(s): 'revison'"),
    (lambda raw: raw.setdefault("groups", {}).update(g={"group": "g", "yaml": "y", "profiles": ["embedded"], "rows": True}),
     "groups.g.rows: expected int, got bool 'True'"),
    (lambda raw: raw.update(profile={}), "unknown top-level key(s) 'profile'; a lock holds schema, schema_version"),
])
def test_a_lock_is_read_strictly_nothing_coerced_nothing_ignored(tmp_path, edit, message):
    raw = load_lock_json()
    edit(raw)
    path = tmp_path / "lock.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(InputError, match=None) as caught:
        load_lock(path)
    assert message in str(caught.value)


def test_generated_profile_keys_and_types_are_refused_or_read_exactly(tmp_path):
    """Generated profiles: every key outside the profile's own, and every wrongly typed known key, is exit 2
    naming it; the lock as shipped reads."""
    import random

    rng = random.Random(2026)
    values = [None, 0, 1.5, "x", [], {}, True]
    for case in range(60):
        raw = load_lock_json()
        body = raw["profiles"]["embedded"]
        key = rng.choice(["demo", "description", "notice", "task", f"k{rng.randrange(10**6)}"])
        value = rng.choice(values)
        body[key] = value
        path = tmp_path / f"lock-{case}.json"
        path.write_text(json.dumps(raw))
        kind = {"demo": bool, "description": str, "notice": str, "task": str}.get(key)
        if kind is not None and type(value) is kind and not (key == "task" and value != "sst2"):
            assert load_lock(path).profile("embedded").name == "embedded"
            continue
        with pytest.raises(InputError) as caught:
            load_lock(path)
        assert "profiles.embedded" in str(caught.value) and "\n" not in str(caught.value)


def _objects(value, path=()):
    """Every object in a JSON value with its path (a lock's every level)."""
    if isinstance(value, dict):
        yield path, value
        for key, item in value.items():
            yield from _objects(item, path + (key,))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _objects(item, path + (number,))


def test_generated_edits_anywhere_in_a_lock_are_refused_naming_the_place_or_read(tmp_path):
    """Generated edits at every level of both shipped locks (a key added, a key removed, a value retyped):
    the strict schema reader and the semantic checks refuse each with one InputError naming the lock (exit 2),
    never another exception; an added key is never ignored."""
    import random

    rng = random.Random(302)
    values = [None, 0, -1, 1.5, float("1e300"), "x", "", [], {}, True, ["a"], {"k": 1}]
    for source in (LOCK, REPO / "demos.lock.json"):
        shipped = json.loads(source.read_text())
        for case in range(150):
            raw = json.loads(json.dumps(shipped))
            where, target = rng.choice(list(_objects(raw)))
            edit = rng.choice(["add", "remove", "retype"])
            key = rng.choice(sorted(target)) if target else "k"
            if edit == "add":
                key = f"unknown_{rng.randrange(10**6)}"
                target[key] = rng.choice(values)
            elif edit == "remove" and target:
                del target[key]
            else:
                target[key] = rng.choice(values)
            path = tmp_path / "lock.json"
            path.write_text(json.dumps(raw))
            try:
                load_lock(path)
            except InputError as error:
                assert str(path) in str(error) and "\n" not in str(error), (where, edit, key, str(error))
                continue
            # read: never an unknown key somewhere (the names under evaluator.files, .tasks, profiles, models,
            # groups, numeric_mode and converted_from are the lock's own names, so a new one there is an entry)
            named_maps = {"files", "tasks", "profiles", "models", "groups", "numeric_mode", "converted_from",
                          "settings"}
            assert edit != "add" or (where and where[-1] in named_maps), (where, edit, key)


# --- lm-eval releases (formats/releases.py, issue 32): the lock pins one, by its published wheel ---

@pytest.mark.parametrize("change, message", [
    # 0.4.13 is supported (lm-eval-0.4.13.lock.json); pinned with 0.4.9.2's wheel it is not its release
    (lambda e: e.update(version="0.4.13"), "evaluator.wheel: expected lm-eval 0.4.13's published wheel "
                                           "lm_eval-0.4.13-py3-none-any.whl (sha256 5daaa1973bf8"),
    (lambda e: e.update(version="0.4.99"), "evaluator.version '0.4.99' is not an lm-eval release sst2-audit knows; "
                                           "it supports lm-eval 0.4.9.2, lm-eval 0.4.13."),
    (lambda e: e["wheel"].update(sha256="0" * 64), "evaluator.wheel: expected lm-eval 0.4.9.2's published wheel "
                                                   "lm_eval-0.4.9.2-py3-none-any.whl (sha256 b8d12410ab9c"),
    (lambda e: e["wheel"].update(name="lm_eval-0.4.9.2-local.whl"), "evaluator.wheel: expected lm-eval 0.4.9.2's "
                                                                    "published wheel"),
])
def test_a_lock_pins_a_supported_release_by_its_published_wheel(tmp_path, change, message):
    raw = load_lock_json()
    change(raw["evaluator"])
    lock = tmp_path / "other.lock.json"
    lock.write_text(json.dumps(raw))
    for command in (["audit.py", "--lock", lock, "--out", tmp_path], ["run.py", "--lock", lock, "--smoke"],
                    ["prepare.py", "--lock", lock, "--profile", "embedded", "--cache", tmp_path / "c"]):
        done = run_cli(*command)
        assert done.returncode == 2 and message in one_paragraph(done.stderr), done.stderr
    assert not (tmp_path / "c").exists()


def test_an_environment_without_lm_eval_is_told_which_extra_installs_the_lock_s_release(monkeypatch):
    """lm-eval is the lock's choice, not the tool's dependency (pyproject's extras): with none installed, the
    refusal names the release and the extra that installs it (exit 2), never a FAIL."""
    from importlib import metadata

    from sst2_audit.formats.releases import require_installed

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", absent)
    for version, extra in (("0.4.9.2", "lm-eval-0492"), ("0.4.13", "lm-eval-0413")):
        with pytest.raises(InputError) as caught:
            require_installed(version, "lock.json")
        assert str(caught.value) == (
            f"lock.json names lm-eval {version}, but this environment holds no lm-eval: the evaluator is the lock's "
            f"choice, installed beside sst2-audit (pip install 'sst2-audit[{extra}]', or from a clone pip install -e "
            f"'.[{extra}]'; sst2-audit supports lm-eval 0.4.9.2, lm-eval 0.4.13).")
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'lm-eval-0492 = ["lm-eval==0.4.9.2"]' in pyproject and 'lm-eval-0413 = ["lm-eval==0.4.13"]' in pyproject
    assert '"lm-eval==' not in pyproject.split("[project.optional-dependencies]")[0]  # not a dependency of the tool


def test_another_release_installed_or_recorded_is_a_refusal_naming_both(tmp_path, capsys):
    """The environment holds one release, the lock or the record names another: exit 2 naming both, never a FAIL
    (a FAIL would read as tampering)."""
    from support.bundles import CURRENT, audit, edited, pack
    from sst2_audit.formats.releases import require_installed

    with pytest.raises(InputError, match=r"^lock\.json names lm-eval 0\.4\.13, but this environment holds lm-eval "
                                         r"0\.4\.9\.2; audit and run with the release the lock pins"):
        require_installed("0.4.13", "lock.json")
    made = tmp_path / "made-with-0.4.13.tar.gz"
    pack(made, edited(lambda record, members: record["versions"].update(lm_eval="0.4.13"), CURRENT))
    code, out = audit(capsys, "--bundle-file", made, "--structural")
    assert code == 2 and "VERDICT" not in out, out
    assert "the run was made with lm-eval 0.4.13, but the reviewer's lock" in out and "pins lm-eval 0.4.9.2" in out


@pytest.mark.parametrize("feature, named", [
    ({"fewshot_keys": ["sampler", "split"]}, "fewshot_config split"),
    ({"fewshot_keys": ["target_delimiter", "sampler", "fewshot_delimiter"]},
     "fewshot_config fewshot_delimiter, target_delimiter"),
    ({"includes": 2}, "a YAML including 2 files at once (merged in another order)"),
])
def test_what_a_release_is_not_supported_for_is_refused_by_name(feature, named):
    """0.4.13's scope (formats/releases.py): each feature outside it is named, with the release that audits it;
    0.4.9.2 has no scope, so nothing is refused there."""
    from sst2_audit.formats.releases import require_release_scope

    require_release_scope("0.4.9.2", "x.lock.json", task="task t", **feature)
    with pytest.raises(InputError) as caught:
        require_release_scope("0.4.13", "x.lock.json", task="task t", **feature)
    assert str(caught.value) == (f"x.lock.json: task t has {named}; under lm-eval 0.4.13 sst2-audit audits tasks "
                                 "and groups (hooks as pinned shared code; every supported metric) without "
                                 "fewshot_config keys other than its sampler and literal samples, or YAMLs that "
                                 "include several files at once: its few-shot overrides and include order are not re-derived yet "
                                 "(SOURCE_MAP-0.4.13.md). Use a lock of lm-eval 0.4.9.2 for it.")
    require_release_scope("0.4.13", "x.lock.json", task="task t", includes=1,
                          fewshot_keys=["sampler", "samples"])  # within scope (BBH's literal shots)
