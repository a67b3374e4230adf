"""Few-shot contexts re-derived (sst2_audit/task/fewshot.py) against lm-eval's own ConfigurableTask and sampler,
on the embedded demo data: the same shots, in the same draw order, the same context string."""

import dataclasses
import json

import pytest

from support.builders import bundle_audited, prepare_cache, prepare_run_audit, tiny_model_folder
from support.paths import DEMOS, EMBEDDED_COLUMNS, LOCK, REPO
from support.processes import one_paragraph, run_script
from sst2_audit.task import fewshot
from sst2_audit.task.dataset import read_parquet
from sst2_audit.formats.lock import load_lock
from sst2_audit.task.config import data_config
from sst2_audit.task.spec import spec_for


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
    with pytest.raises(fewshot.InputError, match=r"task sst2: it draws shots with the sampler 'balanced' \(re-derived: default, first_n\)"):
        fewshot.rule_for(balanced)


def _fewshot_lock(tmp_path, profile: str, shots: int, **more):
    """A copy of the shipped lock whose profile pins `shots`, beside a copy of the demo data it names."""
    import shutil

    from support.paths import load_lock_json, REPO

    shutil.copytree(REPO / "data" / "demo", tmp_path / "data" / "demo")
    raw = load_lock_json()
    raw["profiles"][profile]["settings"] = {"num_fewshot": shots, **more}
    lock = tmp_path / f"{profile}-{shots}shot.lock.json"
    lock.write_text(json.dumps(raw))
    return lock


def test_a_five_shot_sst2_run_is_scored_identically_and_its_shots_are_re_derived_by_the_audit(tmp_path):
    record = prepare_run_audit(DEMOS, "embedded-sst2-5shot", tmp_path)  # both paths bit for bit, default audit PASS
    cache = tmp_path / "cache"
    assert record["settings"]["num_fewshot"] == 5 and record["max_abs_diff"] == 0.0
    assert (record["settings"]["fewshot_split"], record["settings"]["fewshot_sampler"]) == ("train", "default")
    assert [len(q["shots"]) for q in record["questions"]] == [5, 5]
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())
    assert results["n-shot"]["sst2"] == 5 and results["configs"]["sst2"]["num_fewshot"] == 5
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all(q["context"].count("\nAnswer: ") == 5 for q in private["questions"])  # five answered examples
    assert "<th>shots (of 5)</th>" in (tmp_path / "out" / "report.html").read_text()
    _smoke_and_full_shots_compared(record, cache)
    assert "| fewshot_split | train |" in bundle_audited(tmp_path, cache, "embedded-sst2-5shot-smoke")
    edited = dict(record, questions=[dict(record["questions"][0], shots=record["questions"][0]["shots"][::-1]),
                                     record["questions"][1]])
    (tmp_path / "out" / "run.json").write_text(json.dumps(edited))
    done = run_script("audit.py", "--lock", DEMOS, "--out", tmp_path / "out", "--cache", cache, "--structural")
    assert done.returncode == 1 and f"row idx {record['questions'][0]['idx']}: shots: expected " in done.stdout


def _smoke_and_full_shots_compared(record, cache):
    """lm-eval's one generator per task, consumed in dataset order: the smoke run's two questions (the first
    two dev ids in hash order) are drawn first and second there, but after every smaller dev id in a full
    run, so the same question gets other shots."""
    from sst2_audit.task.split import SMOKE_ROWS
    from sst2_audit.task.rows import shot_plan, verified_rows

    lock = load_lock(DEMOS)
    profile = lock.profile("embedded-sst2-5shot")
    spec = spec_for(lock, profile.task)
    data = verified_rows(lock, profile, spec, cache, roles=())
    smoke, full = data.split.scored(SMOKE_ROWS), data.split.scored(None)
    recorded = {q["idx"]: q["shots"] for q in record["questions"]}
    assert recorded == shot_plan(lock, profile, spec, cache, data.manifest, data, smoke).positions
    in_full = shot_plan(lock, profile, spec, cache, data.manifest, data, full).positions
    assert set(smoke) < set(full) and all(sorted(full).index(idx) > 1 for idx in smoke)
    assert [recorded[idx] == in_full[idx] for idx in smoke] == [False, False]  # measured: other shots in a full run


def test_shots_drawn_from_the_evaluated_split_never_show_a_sealed_row(tmp_path):
    """inverse_scaling scores its test split and, naming no other, takes its shots from it too."""
    lock = _fewshot_lock(tmp_path, "embedded-inverse-scaling", 25)
    cache = prepare_cache(lock, "embedded-inverse-scaling", tmp_path)
    done = run_script("run.py", "--lock", lock, "--profile", "embedded-inverse-scaling", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 2, done.stderr
    message = one_paragraph(done.stderr)
    assert "25 shots drawn from the evaluated split 'train' would show " in message and " sealed confirmation rows " \
        "as shots (with their answers): [" in message, message
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()
    assert "allow it explicitly: sst2-audit prepare --pin ... --shots-may-show-sealed-rows (the profile setting " \
        "shots_may_show_sealed_rows: true" in message
    import re

    shown = re.search(r"as shots \(with their answers\): (\[[0-9, ]*\])( and (\d+) more)?;", message)
    count = int(re.search(r"would show (\d+) sealed", message).group(1))
    assert shown and len(eval(shown.group(1))) == min(20, count) and int(shown.group(3) or 0) == count - min(20, count)


def test_sealed_rows_as_shots_only_when_the_lock_allows_it_and_then_on_record(tiny_demos, tmp_path):
    """The shots' policy is the point, not the model: a tiny one."""
    record = prepare_run_audit(tiny_demos, "embedded-inverse-scaling-3shot", tmp_path)  # scored, audited bit for bit
    assert record["settings"]["shots_may_show_sealed_rows"] is True and record["settings"]["num_fewshot"] == 3
    assert record["settings"]["shots_from_evaluated_split"] is True
    assert [len(q["shots"]) for q in record["questions"]] in ([3, 3], [2, 3], [3, 2], [2, 2])
    page = (tmp_path / "out" / "report.html").read_text()
    assert "shots_may_show_sealed_rows" in page and "scored questions also shown as another question" in page
    assert "shots (of 3)" in page
    card = bundle_audited(tmp_path, tmp_path / "cache", "embedded-inverse-scaling-3shot-smoke", lock=tiny_demos)
    assert "| shots_may_show_sealed_rows | True |" in card and "| scored_questions_shown_as_shots |" in card


def test_mmlu_shaped_subject_at_five_shots_first_n_from_dev_run_and_bundle(tmp_path):
    """The published MMLU setting on demo data: shots first_n from the dev split, every question the same 5."""
    profile = "embedded-mmlu-elementary-mathematics"
    cache = prepare_cache(DEMOS, profile, tmp_path)
    out = tmp_path / "out"
    done = run_script("run.py", "--lock", DEMOS, "--profile", profile, "--cache", cache, "--out", out, "--smoke",
                      "--private", tmp_path / "private", "--run-name", "mmlu-5shot")  # the full run: README's table
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "run.json").read_text())
    assert len(record["questions"]) == 2 and record["max_abs_diff"] == 0.0
    assert all(q["shots"] == [0, 1, 2, 3, 4] for q in record["questions"])
    assert (record["settings"]["fewshot_split"], record["settings"]["fewshot_sampler"]) == ("dev", "first_n")
    assert record["settings"]["shots_from_evaluated_split"] is False
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all(q["context"].startswith("The following are multiple choice questions (with answers) about elementary "
                                       "mathematics.\n\n") and q["context"].count("\nAnswer: ") == 5
               for q in private["questions"])
    done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", cache, "--structural", "--bundle",
                      "--results", tmp_path / "results")
    assert done.returncode == 4, done.stdout + done.stderr
    bundle = tmp_path / "results" / "mmlu-5shot.tar.gz"
    done = run_script("audit.py", "--lock", DEMOS, "--bundle-file", bundle, "--cache", cache)  # every row rescored
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
    assert "all 2 scored rows rescored" in done.stdout
    import tarfile

    with tarfile.open(bundle) as archive:
        card = archive.extractfile("mmlu-5shot/CARD.md").read().decode()
    for field in ("| num_fewshot | 5 |", "| fewshot_split | dev |", "| fewshot_sampler | first\\_n |",
                  "| questions_with_fewer_shots | 0 |"):
        assert field in card, card
    assert "scored_questions_shown_as_shots" not in card  # the shots come from dev, not the evaluated split


def test_a_question_shown_its_own_question_as_a_shot_is_named():
    """lm-eval drops only a dict-equal doc from the shots: a duplicate row (the same text, another id) stays,
    with its answer; the plan names the question, and run fails before any model call."""
    from types import SimpleNamespace

    spec = spec_for(load_lock(LOCK), "sst2")
    row = lambda idx, sentence, label: SimpleNamespace(idx=idx, as_doc=lambda: {"sentence": sentence, "label": label, "idx": idx})
    train = [row(0, "a plain day .", 1), row(1, "the same words twice .", 0), row(2, "warm and bright .", 1)]
    scored = [row(7, "the same words twice .", 0), row(8, "nothing like it .", 1)]
    first = dataclasses.replace(spec, official=dict(spec.official, fewshot_config={"sampler": "first_n"}))
    train = [r.as_doc() for r in train]
    plan = fewshot.plan(first, 2, 1, train, scored)  # sst2 draws one more (None == None): rows 0-2, then keeps two
    assert plan.positions == {7: [0, 1], 8: [0, 1]}
    assert plan.own_question(first) == [7]
    assert fewshot.plan(first, 1, 1, train, scored).own_question(first) == []  # only train row 0 is shown


def test_a_profile_pins_its_own_max_length_and_shots_seen_are_counted(tmp_path):
    from types import SimpleNamespace

    from support.paths import load_lock_json
    from sst2_audit.util.errors import InputError
    from sst2_audit.pages.html_report import _shots_seen

    raw = load_lock_json()
    raw["profiles"]["embedded"]["settings"] = {"num_fewshot": 25, "max_length": 2048}
    (tmp_path / "l.json").write_text(json.dumps(raw))
    lock = load_lock(tmp_path / "l.json")
    settings = lock.settings_for("embedded", spec_for(lock, "sst2"))
    assert (settings["num_fewshot"], settings["max_length"]) == (25, 2048)
    raw["profiles"]["embedded"]["settings"] = {"max_length": 1}
    (tmp_path / "l.json").write_text(json.dumps(raw))
    with pytest.raises(InputError, match=r"max_length \(2..1048576\), shots_may_show_sealed_rows \(true\), "
                                         r"bootstrap_iters \(1..10000000\), seed \(0..4294967295\), dev_rows \(2..100000 or "
                                         r"\"all\"\), apply_chat_template \(true\), .* got"):
        load_lock(tmp_path / "l.json")
    lock = load_lock(LOCK)
    inverse, sst2 = spec_for(lock, "inverse_scaling_redefine_math"), spec_for(lock, "sst2")
    assert fewshot.recorded(inverse, 2) == {"fewshot_split": "train", "fewshot_sampler": "default",
                                            "shots_from_evaluated_split": True}
    assert fewshot.recorded(sst2, 5) == {"fewshot_split": "train", "fewshot_sampler": "default",
                                         "shots_from_evaluated_split": False}
    assert fewshot.recorded(sst2, 0) == {}  # zero-shot records keep their settings
    questions = [SimpleNamespace(idx=3, shots=[7, 9]), SimpleNamespace(idx=7, shots=[3, 11]),
                 SimpleNamespace(idx=9, shots=[1, 2]), SimpleNamespace(idx=5, shots=[5, 0])]
    record = SimpleNamespace(settings={"num_fewshot": 2, **fewshot.recorded(inverse, 2)}, questions=questions)
    assert _shots_seen(record) == [  # 5 shows only itself: not "another question's"
        ("scored questions also shown as another question's shot (shots from the evaluated split)", "3 of 4", True)]
    record = SimpleNamespace(settings={"num_fewshot": 2, **fewshot.recorded(sst2, 2)}, questions=questions)
    assert _shots_seen(record) == []  # sst2's shots come from its train split: positions are not scored ids


def test_a_profile_s_shot_count_defaults_to_the_task_yaml_s():
    """Precedence: the profile's own setting, else the YAML's num_fewshot, else the lock's run_settings."""
    lock = load_lock(DEMOS)
    sst2 = spec_for(lock, "sst2")
    assert sst2.num_fewshot is None and lock.settings_for("embedded-sst2-5shot", sst2)["num_fewshot"] == 5
    stated = dataclasses.replace(sst2, num_fewshot=3)  # as tinyArc's YAML states 25
    assert lock.settings_for("embedded-sst2-5shot", stated)["num_fewshot"] == 5  # the profile wins
    shipped = load_lock(LOCK)
    assert shipped.settings_for("embedded", stated)["num_fewshot"] == 3
    assert shipped.settings_for("embedded", sst2)["num_fewshot"] == 0  # run_settings.num_fewshot
    bad = dict(sst2.official, num_fewshot="5")
    from sst2_audit.task.support import unsupported_reason

    assert unsupported_reason(bad) == "states num_fewshot '5', not an integer within 0..1024"


def test_fewshot_config_overrides_are_refused_with_the_reason():
    spec = spec_for(load_lock(LOCK), "sst2")
    override = dataclasses.replace(spec, official=dict(spec.official, fewshot_config={"doc_to_target": "label"}))
    with pytest.raises(fewshot.InputError, match=r"task sst2: it overrides doc_to_target for its shots \(fewshot_config\)"):
        fewshot.rule_for(override)


@pytest.mark.slow
def test_arc_challenge_at_25_shots_on_a_struct_column(embedded_cache, tmp_path):
    """The published ARC-Challenge setting on demo data: 25 shots from train, choices a struct column. The
    model is not the point here (the MMLU and SST-2 few-shot tests run the real one): a tiny random Llama
    with SmolLM2's tokenizer is pinned with the ARC demo data, and the pin fits max_length to the longest
    25-shot context. Smoke run, default audit (every row rescored) and bundle."""
    model = tiny_model_folder(tmp_path / "tiny", 25, embedded_cache)
    lock, env = tmp_path / "arc.lock.json", {"SST2_AUDIT_ARC25_MODEL": str(model)}
    done = run_script("prepare.py", "--lock", DEMOS, "--pin", "arc25", "--task", "arc_challenge", "--model", model,
                      "--data", REPO / "data" / "demo" / "arc", "--new-lock", lock, "--num-fewshot", "25", env=env)
    assert done.returncode == 0, done.stderr
    record = prepare_run_audit(lock, "arc25", tmp_path, env=env, bundle=True)  # default audit PASS
    assert record["max_abs_diff"] == 0.0 and [len(q["shots"]) for q in record["questions"]] == [25, 25]
    assert record["metrics"] == ["acc", "acc_norm"]
    assert record["settings"]["max_length"] > 512 and record["settings"]["max_length"] % 64 == 0  # fitted by the pin
    private = json.loads((tmp_path / "private" / "private.json").read_text())
    assert all(q["context"].count("\nAnswer: ") == 25 for q in private["questions"])


def test_a_run_whose_question_would_see_its_own_question_as_a_shot_fails_before_any_model_call(tmp_path):
    """Every train sentence is dev row 9's sentence (another id, so lm-eval's dict compare keeps it): the
    5-shot SST-2 smoke run's question 9 would be shown its own question and answer; the run stops, keeps its
    failure record, and writes no run record."""
    import shutil

    from support.paths import REPO
    from sst2_audit.formats import records
    from sst2_audit.util.hashing import sha256_file

    shutil.copytree(REPO / "data" / "demo", tmp_path / "data" / "demo")
    validation = (REPO / "data" / "demo" / "validation.tsv").read_text().splitlines()
    sentence = next(line.split("\t", 2)[2] for line in validation[1:] if line.startswith("9\t"))
    train = tmp_path / "data" / "demo" / "train.tsv"
    train.write_text("idx\tlabel\tsentence\n" + "".join(f"{i}\t{i % 2}\t{sentence}\n" for i in range(64)))
    raw = json.loads(DEMOS.read_text())
    for entry in raw["profiles"]["embedded-sst2-5shot"]["data"]["files"]:
        if entry["split"] == "train":
            entry["sha256"] = sha256_file(train)
    lock = tmp_path / "dup.lock.json"
    lock.write_text(json.dumps(raw))
    cache = prepare_cache(lock, "embedded-sst2-5shot", tmp_path)
    out = tmp_path / "out"
    done = run_script("run.py", "--lock", lock, "--profile", "embedded-sst2-5shot", "--cache", cache, "--smoke",
                      "--out", out, "--private", tmp_path / "private", "--run-name", "dup")
    assert done.returncode == 1, done.stderr
    assert ("1 scored question(s) would be shown their own question and answer as a shot (a duplicate row in the "
            "'train' split): ids [9].") in one_paragraph(done.stderr)
    assert "[model load]" not in done.stderr  # before any model call
    failure = records.read(out / records.FAILURE_FILE, records.FailureRecord)
    assert failure.check == "shots" and [m.claimed_id for m in failure.mismatches] == [9]
    assert not (out / records.RUN_FILE).exists()
