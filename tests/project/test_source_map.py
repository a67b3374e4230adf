"""SOURCE_MAP.md stays true to the installed, pinned lm-eval and to our code."""


import pytest

from support.paths import DEMOS, LOCK, REPO
from sst2_audit.task import source_map
from sst2_audit.task.evaluator_pin import files_for, installed_root, verify_installed
from sst2_audit.formats.lock import load_lock
from sst2_audit.task.spec import spec_for

MAP = (REPO / "SOURCE_MAP.md").read_text()
FACTS = REPO.parent / "shared" / "facts" / "lm-eval-v0.4.9.2.sha256"


def test_every_row_is_verified_against_the_installed_evaluator():
    rows, problems = source_map.check(MAP, installed_root())
    assert problems == []
    assert len(rows) == 96
    functions = {row.function for row in rows}
    for step in ("doc_to_text", "doc_to_choice", "doc_to_target", "TaskConfig", "ConfigurableTask.__init__",
                 "ConfigurableTask.construct_requests", "Instance", "TemplateLM._encode_pair", "HFLM.tok_encode",
                 "HFLM._loglikelihood_tokens", "HFLM._select_cont_toks", "ConfigurableTask.process_results",
                 "acc_fn", "mean", "mean_stderr", "TaskOutput.calculate_aggregate_metric", "simple_evaluate",
                 "evaluate", "Task.doc_iterator", "get_task_dict.pretty_print_task", "load_yaml_config",
                 "apply_template", "Task.eval_docs"):
        assert step in functions, step
    doc_id_row = next(row for row in rows if row.step == "38 logged doc_id")
    lines = (installed_root() / doc_id_row.file).read_text().splitlines()
    assert "doc_id_true = indices[doc_id]" in lines[doc_id_row.first]  # the line after the anchor


@pytest.mark.parametrize("old, new, problem", [
    ("| 626-629 | `if indices:`", "| 627-629 | `if indices:`",
     "line 627 of lm_eval/evaluator.py should contain 'if indices:', it reads 'doc_id_true = indices[doc_id]'"),
    ("`TemplateLM._encode_pair` | 387-399", "`TemplateLM.encode_pair` | 387-399",
     "TemplateLM.encode_pair is not defined in lm_eval/api/model.py"),
    ("| `mean` | 35-36 |", "| `mean` | 35-40 |", "lines 35-40 are not inside mean, which spans 35-36 of lm_eval/api/metrics.py"),
    ("`sst2_audit/protocol/rules.py::predict`", "`sst2_audit/protocol/rules.py::argmax`", "counterpart argmax is not defined in sst2_audit/protocol/rules.py"),
    ("`sst2_audit/scoring/identity.py::check_logged_samples` | H1 |", "`sst2_audit/identities.py::check_logged_samples` | H1 |",
     "counterpart file sst2_audit/identities.py does not exist"),
])
def test_a_wrong_row_fails_the_check(old, new, problem):
    assert MAP.count(old) == 1
    _, problems = source_map.check(MAP.replace(old, new), installed_root())
    assert len(problems) == 1 and problem in problems[0], problems


def test_installed_scoring_path_files_have_the_pinned_sha256():
    lock = load_lock(LOCK)
    hashes = {}
    for task in lock.evaluator.tasks:
        spec = spec_for(lock, task)
        verified = verify_installed(lock, spec)
        assert verified == files_for(lock, spec) and spec.yaml_path in verified
        hashes.update(verified)
    assert len(files_for(lock, spec_for(lock, "sst2"))) == 55  # what an SST-2 run depends on, as before
    assert hashes == lock.evaluator.files  # every pin is some pinned task's
    cited = {row.file for row in source_map.parse(MAP)}
    pinned = set(lock.evaluator.files) | set(load_lock(DEMOS).evaluator.files)  # truthfulqa's mc2: a demo lock's task
    assert cited <= pinned, cited - pinned


@pytest.mark.skipif(not FACTS.exists(), reason="the shared facts folder is not beside this clone")
def test_lock_pins_equal_the_tagged_commit_files():
    pinned = {}
    for line in FACTS.read_text().splitlines():
        if line and not line.startswith("#"):
            digest, path = line.split()
            pinned[path] = digest
    files = load_lock(LOCK).evaluator.files
    assert {path: files[path] for path in pinned} == pinned
    # The other tasks' YAMLs are not in that list: their pins equal the installed wheel's RECORD.
    record = _wheel_record()
    for path in sorted(set(files) - set(pinned)):
        assert path.startswith("lm_eval/tasks/") and files[path] == record[path], path


def _wheel_record() -> dict:
    import base64
    from importlib.metadata import distribution

    found = {}
    for entry in distribution("lm_eval").files:
        if entry.hash is not None and entry.hash.mode == "sha256":
            found[str(entry)] = base64.urlsafe_b64decode(entry.hash.value + "==").hex()
    return found


def test_hazards_cite_upstream_issues():
    hazards = MAP.split("## Hazards", 1)[1]
    for reference in ("#4084", "#4085", "#4089", "0.4.13", "#4063", "#4065", "#3881", "include_path", "training_split"):
        assert reference in hazards, reference
    assert "MIT" in MAP and "copies no code" in MAP


def test_a_changed_installed_file_is_named(tmp_path):
    import json

    from sst2_audit.util.errors import CheckFailed

    raw = json.loads(LOCK.read_text())
    raw["evaluator"]["files"]["lm_eval/evaluator.py"] = "0" * 64
    (tmp_path / "lock.json").write_text(json.dumps(raw))
    spec = spec_for(load_lock(LOCK), "sst2")
    actual = verify_installed(load_lock(LOCK), spec)["lm_eval/evaluator.py"]
    with pytest.raises(CheckFailed, match=f"lm_eval/evaluator.py: expected sha256 {'0' * 64}, got {actual}"):
        verify_installed(load_lock(tmp_path / "lock.json"), spec)


def test_the_run_s_task_index_logs_the_task_s_yaml_as_lm_eval_s_default_index_does(embedded_cache, caplog):
    """Step 40 under 0.4.9.2: the pretty-printer looks the task up by name in the index it is given (H5); the run's
    one-entry index (scoring/official.py::task_index, read from no YAML) gives the line TaskManager() gives."""
    import logging

    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks import get_task_dict
    from sst2_audit.formats.manifest import read_manifest
    from sst2_audit.scoring.official import data_files_of, task_config, task_index

    spec = spec_for(load_lock(LOCK), "sst2")
    task = ConfigurableTask(config=task_config(spec, data_files_of(embedded_cache, read_manifest(embedded_cache), spec)))
    manager = task_index(spec)
    assert manager.all_tasks == ["sst2"]
    with caplog.at_level(logging.INFO):
        assert get_task_dict([task], manager) == {"sst2": task}
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Task: ")] == [
        "Task: sst2 (glue/sst2/default.yaml)"]
