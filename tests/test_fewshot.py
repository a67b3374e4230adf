"""Few-shot contexts re-derived (sst2_audit/fewshot.py) against lm-eval's own ConfigurableTask and sampler,
on the embedded demo data: the same shots, in the same draw order, the same context string."""

import dataclasses
import json

import pytest

from conftest import EMBEDDED_COLUMNS, LOCK, one_paragraph, prepare_cache, prepare_run_audit, run_script
from sst2_audit import fewshot
from sst2_audit.dataset import read_parquet
from sst2_audit.lock import load_lock
from sst2_audit.task_config import data_config
from sst2_audit.task_spec import spec_for


@pytest.fixture()
def sst2_parts(embedded_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    spec = spec_for(load_lock(LOCK), "sst2")
    files = {split: str(embedded_cache / "data" / f"{split}.parquet") for split in spec.splits}
    docs = {split: [row.as_doc() for row in read_parquet(path, EMBEDDED_COLUMNS)] for split, path in files.items()}
    return spec, files, docs


def _lm_eval_contexts(spec, files, docs: list, shots: int, seed: int) -> list:
    from lm_eval.api.task import ConfigurableTask

    task = ConfigurableTask(config=data_config(spec, files))
    task.set_fewshot_seed(seed)  # what simple_evaluate does with fewshot_random_seed
    return [task.fewshot_context(doc, shots) for doc in docs]


def test_five_shot_contexts_equal_lm_eval_s_in_its_draw_order(sst2_parts):
    spec, files, docs = sst2_parts
    evaluated = docs["validation"][:12]
    rule = fewshot.rule_for(spec)
    # sst2 names neither fewshot_split nor test_split: lm-eval's `None == None` draws 6 docs for 5 shots
    assert (rule.split, rule.sampler, rule.extra_draw, rule.delimiter) == ("train", "default", True, "\n\n")
    drawn = fewshot.draws(rule, 5, 1234, docs["train"], list(enumerate(evaluated)))
    ours = [fewshot.context(spec, doc, [docs["train"][p] for p in drawn[i]], rule.delimiter)
            for i, doc in enumerate(evaluated)]
    assert ours == _lm_eval_contexts(spec, files, evaluated, 5, 1234)
    assert all(len(positions) == 5 for positions in drawn.values())
    assert ours[0].endswith(spec.text(evaluated[0])) and ours[0].count("\nAnswer: ") == 5
    # one generator for all documents: the same question gets other shots when built in another order
    backwards = fewshot.draws(rule, 5, 1234, docs["train"], list(reversed(list(enumerate(evaluated)))))
    assert backwards[0] != drawn[0]


def test_shots_from_the_evaluated_split_can_be_one_short(sst2_parts):
    """lm-eval draws one extra doc only when fewshot_split == test_split; sst2 evaluates its
    validation split (no test_split), so shots taken from validation lose one whenever the
    evaluated doc itself is drawn: measured here, and lm-eval's strings agree."""
    spec, files, docs = sst2_parts
    same = dataclasses.replace(spec, official=dict(spec.official, fewshot_split="validation"))
    evaluated = docs["validation"][:64]
    rule = fewshot.rule_for(same)
    assert (rule.split, rule.extra_draw) == ("validation", False)
    drawn = fewshot.draws(rule, 5, 7, docs["validation"], list(enumerate(evaluated)))
    short = sorted(i for i, positions in drawn.items() if len(positions) < 5)
    assert short and all(len(drawn[i]) == 4 for i in short)  # the evaluated doc drawn and dropped
    ours = [fewshot.context(same, doc, [docs["validation"][p] for p in drawn[i]], rule.delimiter)
            for i, doc in enumerate(evaluated)]
    assert ours == _lm_eval_contexts(same, files, evaluated, 5, 7)


def test_first_n_takes_the_first_docs_and_an_unknown_sampler_is_refused(sst2_parts):
    spec, _, docs = sst2_parts
    first = dataclasses.replace(spec, official=dict(spec.official, fewshot_config={"sampler": "first_n"}))
    drawn = fewshot.draws(fewshot.rule_for(first), 3, 0, docs["train"], [(0, docs["validation"][0])])
    assert drawn == {0: [0, 1, 2]}
    balanced = dataclasses.replace(spec, official=dict(spec.official, fewshot_config={"sampler": "balanced"}))
    with pytest.raises(fewshot.InputError, match="few-shot sampler 'balanced' is not re-derived"):
        fewshot.rule_for(balanced)


def _fewshot_lock(tmp_path, profile: str, shots: int, **more):
    """A copy of the shipped lock whose profile pins `shots`, beside a copy of the demo data it names."""
    import shutil

    from conftest import REPO, load_lock_json

    shutil.copytree(REPO / "data" / "demo", tmp_path / "data" / "demo")
    raw = load_lock_json()
    raw["profiles"][profile]["settings"] = {"num_fewshot": shots, **more}
    lock = tmp_path / f"{profile}-{shots}shot.lock.json"
    lock.write_text(json.dumps(raw))
    return lock


def test_a_five_shot_sst2_run_is_scored_identically_and_its_shots_are_re_derived_by_the_audit(tmp_path):
    lock = _fewshot_lock(tmp_path, "embedded", 5)
    record = prepare_run_audit(lock, "embedded", tmp_path)  # both paths bit for bit, the default audit PASS
    cache = tmp_path / "cache"
    assert record["settings"]["num_fewshot"] == 5 and record["max_abs_diff"] == 0.0
    assert [len(q["shots"]) for q in record["questions"]] == [5, 5]
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())
    assert results["n-shot"]["sst2"] == 5 and results["configs"]["sst2"]["num_fewshot"] == 5
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all(q["context"].count("\nAnswer: ") == 5 for q in private["questions"])  # five answered examples
    assert "<th>shots (of 5)</th>" in (tmp_path / "out" / "report.html").read_text()
    edited = dict(record, questions=[dict(record["questions"][0], shots=record["questions"][0]["shots"][::-1]),
                                     record["questions"][1]])
    (tmp_path / "out" / "run.json").write_text(json.dumps(edited))
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", cache, "--structural")
    assert done.returncode == 1 and f"row idx {record['questions'][0]['idx']}: shots: expected " in done.stdout


def test_shots_drawn_from_the_evaluated_split_never_show_a_sealed_row(tmp_path):
    """inverse_scaling scores its test split and, naming no other, takes its shots from it too."""
    lock = _fewshot_lock(tmp_path, "embedded-inverse-scaling", 25)
    cache = prepare_cache(lock, "embedded-inverse-scaling", tmp_path)
    done = run_script("run.py", "--lock", lock, "--profile", "embedded-inverse-scaling", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 2, done.stderr
    assert ("25 shots drawn from the evaluated split 'train' would show the sealed confirmation rows ["
            in one_paragraph(done.stderr))
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()
    assert "allow it explicitly with the profile setting shots_may_show_sealed_rows: true" in one_paragraph(done.stderr)


def test_sealed_rows_as_shots_only_when_the_lock_allows_it_and_then_on_record(tmp_path):
    lock = _fewshot_lock(tmp_path, "embedded-inverse-scaling", 3, shots_may_show_sealed_rows=True)
    record = prepare_run_audit(lock, "embedded-inverse-scaling", tmp_path)  # scored and audited bit for bit
    assert record["settings"]["shots_may_show_sealed_rows"] is True and record["settings"]["num_fewshot"] == 3
    assert [len(q["shots"]) for q in record["questions"]] in ([3, 3], [2, 3], [3, 2], [2, 2])
    page = (tmp_path / "out" / "report.html").read_text()
    assert "shots_may_show_sealed_rows" in page and "scored questions also shown as another question" in page


def test_a_profile_pins_its_own_max_length_and_shots_seen_are_counted(tmp_path):
    from types import SimpleNamespace

    from conftest import load_lock_json
    from sst2_audit.errors import InputError
    from sst2_audit.html_report import _shots_seen

    raw = load_lock_json()
    raw["profiles"]["embedded"]["settings"] = {"num_fewshot": 25, "max_length": 2048}
    (tmp_path / "l.json").write_text(json.dumps(raw))
    settings = load_lock(tmp_path / "l.json").settings_for("embedded")
    assert (settings["num_fewshot"], settings["max_length"]) == (25, 2048)
    raw["profiles"]["embedded"]["settings"] = {"max_length": 1}
    (tmp_path / "l.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"max_length \(2..1048576\) and shots_may_show_sealed_rows \(true\), got"):
        load_lock(tmp_path / "l.json")
    lock = load_lock(LOCK)
    inverse, sst2 = spec_for(lock, "inverse_scaling_redefine_math"), spec_for(lock, "sst2")
    record = SimpleNamespace(settings={"num_fewshot": 2}, questions=[
        SimpleNamespace(idx=3, shots=[7, 9]), SimpleNamespace(idx=7, shots=[3, 11]), SimpleNamespace(idx=9, shots=[1, 2])])
    assert _shots_seen(record, inverse) == [
        ("scored questions also shown as another question's shot (shots from the evaluated split)", "3 of 3", True)]
    assert _shots_seen(record, sst2) == []  # sst2's shots come from its train split


def test_fewshot_config_overrides_are_refused_with_the_reason():
    spec = spec_for(load_lock(LOCK), "sst2")
    override = dataclasses.replace(spec, official=dict(spec.official, fewshot_config={"doc_to_target": "label"}))
    with pytest.raises(fewshot.InputError, match=r"task sst2: fewshot_config overrides \['doc_to_target'\]"):
        fewshot.rule_for(override)
