"""Any zero-shot multiple_choice task: the spec, the protocol hazards outside SST-2, and the two demo tasks.

Every comparison with lm-eval goes through the installed lm-eval itself (HFLM, ConfigurableTask),
on real tokenizers and a tiny real transformers model.
"""

import json

import pytest

from support.builders import tiny_llama
from support.paths import load_lock_json, LOCK, REPO
from support.processes import one_paragraph, run_cli, run_script, tree_state
from sst2_audit.task.dataset import Row, write_parquet
from sst2_audit.util.errors import InputError
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.scoring.identity import expected_question
from sst2_audit.scoring.independent import IndependentScorer, encode_pair
from sst2_audit.formats.lock import load_lock
from sst2_audit.protocol.rules import predict, predict_norm
from sst2_audit.task.spec import spec_for, spec_from_yaml

IS_TASK = "inverse_scaling_redefine_math"
IS_COLUMNS = (("prompt", "string"), ("classes", "list<string>"), ("answer_index", "int64"))


@pytest.fixture(scope="module")
def lock():
    return load_lock(LOCK)


@pytest.fixture(scope="module")
def tiny_model():
    return tiny_llama(11)


@pytest.fixture(scope="module")
def hflm(tiny_model, tokenizer):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=tiny_model, tokenizer=tokenizer, batch_size=1, max_length=512, device="cpu",
                add_bos_token=False)


def _lm_eval_scores(hflm, context: str, candidates: list) -> list:
    from lm_eval.api.instance import Instance

    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(context, c), idx=i)
                for i, c in enumerate(candidates)]
    return [score for score, _ in hflm.loglikelihood(requests, disable_tqdm=True)]


def test_the_three_pinned_tasks_are_specs_read_from_the_installed_yaml(lock):
    rte, inverse = spec_for(lock, "rte"), spec_for(lock, IS_TASK)
    doc = {"sentence1": "Mara rowed home.", "sentence2": "Mara was on the water.", "label": 0, "idx": 0}
    context = "Mara rowed home.\nQuestion: Mara was on the water. True or False?\nAnswer:"
    assert rte.requests(doc, rte.prefix(doc)) == [(context, " True"), (context, " False")]
    assert rte.gold(doc, rte.choices(doc)) == 0
    assert inverse.yaml_files == ("lm_eval/tasks/inverse_scaling/inverse_scaling_redefine_math.yaml",
                                  "lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml")  # the include is pinned
    assert (inverse.eval_split, inverse.splits, inverse.metrics) == ("train", ("train",), ("acc", "acc_norm"))
    assert inverse.fixed_choices is None and inverse.choice_names(2) == ("choice 0", "choice 1")


def test_an_empty_target_delimiter_scores_the_classes_as_written(lock):
    inverse = spec_for(lock, IS_TASK)
    doc = {"prompt": "Q: What is 4 plus 5?\nA:", "classes": [" 9", " 20"], "answer_index": 0}
    assert inverse.target_delimiter == ""
    # the leading space is the class's own
    assert inverse.requests(doc, inverse.prefix(doc)) == [("Q: What is 4 plus 5?\nA:", " 9"), ("Q: What is 4 plus 5?\nA:", " 20")]


def test_trailing_whitespace_of_a_context_moves_onto_the_candidate_as_in_lm_eval(tokenizer, tiny_model, hflm):
    context = "a fine film .\nAnswer: "  # the space would otherwise merge with the candidate's first word
    for candidate in ("negative", "positive"):
        pair = encode_pair(tokenizer, context, candidate)
        assert (list(pair.context_tokens), list(pair.continuation_tokens)) == hflm._encode_pair(context, candidate)
        assert pair.context_tokens == tuple(tokenizer.encode("a fine film .\nAnswer:"))
    mine = IndependentScorer(tiny_model, 512).score(0, [encode_pair(tokenizer, context, c) for c in ("negative", "positive")])
    assert list(mine.candidate_scores) == _lm_eval_scores(hflm, context, ["negative", "positive"])


def test_a_three_token_candidate_is_summed_bit_for_bit_as_lm_eval(lock, tokenizer, tiny_model, hflm):
    inverse = spec_for(lock, IS_TASK)
    row = Row(0, {"prompt": "Q: What is 40 plus 59?\nA:", "classes": [" 99", " 2360"], "answer_index": 0})
    question = expected_question(row, inverse, tokenizer, 512)
    assert [len(ids) for ids in question.candidate_token_ids] == [3, 5]
    assert question.public_fields()["candidates"][0].startswith("sha256:")  # data text stays out of records
    mine = IndependentScorer(tiny_model, 512).score(0, question.pairs())
    assert list(mine.candidate_scores) == _lm_eval_scores(hflm, question.context, list(question.candidates))


def test_acc_norm_is_lm_eval_s_on_a_case_where_it_differs_from_acc(lock, tmp_path, monkeypatch):
    """lm-eval's own ConfigurableTask.process_results on the installed YAML, against ours."""
    from lm_eval.api.task import ConfigurableTask

    from sst2_audit.scoring.official import task_config

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    inverse = spec_for(lock, IS_TASK)
    doc = {"prompt": "Q: What is 12 times 300?\nA:", "classes": [" 3600", " 15"], "answer_index": 0}
    write_parquet([Row(0, doc)], tmp_path / "train.parquet", IS_COLUMNS)
    task = ConfigurableTask(config=task_config(inverse, {"train": str(tmp_path / "train.parquet")}))
    scores, lengths = [-4.0, -3.0], [5, 3]  # acc: -3.0 wins (choice 1); per character -0.8 > -1.0 (choice 0)
    assert [len(c) for c in inverse.choices(doc)] == lengths
    assert (predict(scores), predict_norm(scores, lengths)) == (1, 0)
    assert task.process_results(doc, [(score, False) for score in scores]) == {"acc": 0.0, "acc_norm": 1.0}


def test_acc_norm_ties_go_to_the_first_choice_like_numpy_argmax():
    assert predict_norm([-2.0, -4.0], [1, 2]) == 0
    with pytest.raises(ValueError, match="acc_norm needs non-empty choices"):
        predict_norm([-1.0, -2.0], [0, 3])


GALICIAN_REFUSAL = ("task truthfulqa_gl_mc2 (lm_eval/tasks/galician_bench/truthfulqa_gl_mc2.yaml) is not supported: it ha"
                    "s its own process_results (lm_eval/tasks/galician_bench/utils.py::process_results_mc2), a metric computed by task code")


def test_a_task_with_a_process_results_hook_is_refused_with_the_reason():
    # galician's mc2 splits at the first 0 label: not the function we re-derive (truthfulqa's), so refused
    import re

    with pytest.raises(InputError, match=re.escape(GALICIAN_REFUSAL)):
        spec_from_yaml("truthfulqa_gl_mc2", "lm_eval/tasks/galician_bench/truthfulqa_gl_mc2.yaml", installed_root())


def test_a_lock_pinning_a_refused_task_exits_2_naming_it(tmp_path):
    raw = load_lock_json()
    from sst2_audit.util.hashing import sha256_file

    yaml = "lm_eval/tasks/galician_bench/truthfulqa_gl_mc2.yaml"
    raw["evaluator"]["tasks"]["truthfulqa_gl_mc2"] = yaml
    for pinned in (yaml, "lm_eval/tasks/galician_bench/truthfulqa_gl_mc1.yaml"):  # the YAML and its include
        raw["evaluator"]["files"][pinned] = sha256_file(installed_root() / pinned)  # as installed: refused for its code
    raw["profiles"]["embedded"]["task"] = "truthfulqa_gl_mc2"
    (tmp_path / "data" / "demo").mkdir(parents=True)
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    done = run_cli("run.py", "--lock", lock, "--profile", "embedded", "--smoke")
    assert done.returncode == 2
    assert GALICIAN_REFUSAL in one_paragraph(done.stderr)


def test_task_option_names_the_profile_that_has_the_data():
    done = run_cli("run.py", "--profile", "embedded", "--task", "rte", "--smoke")
    assert done.returncode == 2
    assert ("--task rte: profile embedded holds data for task sst2; profiles with data for rte: embedded-rte."
            in one_paragraph(done.stderr))
    done = run_cli("run.py", "--profile", "embedded", "--task", "hellaswag", "--smoke")
    assert done.returncode == 2 and "no profile of resources.lock.json has data for hellaswag" in done.stderr


def test_list_tasks_says_supported_or_why_not():
    done = run_script("run.py", "--list-tasks")
    assert done.returncode == 0, done.stderr
    # columns are two spaces or more apart; a few task names hold a single space
    rows = [[part.strip() for part in line.split("  ") if part.strip()] for line in done.stdout.splitlines()[1:]]
    lines = {row[0]: row[1:] for row in rows}
    assert lines["sst2"][0] == lines["rte"][0] == lines[IS_TASK][0] == "pinned"
    assert lines["arc_easy"] == ["supported", "lm_eval/tasks/arc/arc_easy.yaml"]
    assert lines["hellaswag"] == ["supported", "lm_eval/tasks/hellaswag/hellaswag.yaml"]  # its hook: pinned shared code
    assert lines["afrimmlu_direct_amh_prompt_1"] == ["refused", "has a `!function` doc_to_text hook that cannot run as "
                                                     "pinned shared code: utils.py imports lm-eval internals (lm_eval.utils)"]
    assert lines["mrpc"][0] == "supported"  # acc and f1 (binary: two fixed choices)
    assert lines["afrisenti_amh_prompt_1"] == ["refused", "reports f1, defined for 2 choices (lm-eval's aggregation), "
                                                          "over 3 choices"]
    assert done.stdout.splitlines()[0].startswith(f"{len(done.stdout.splitlines()) - 1} installed multiple_choice "
                                                  "tasks match '*', ")
    width = min(max(len(name) for name in lines), 48)  # aligned columns: the state starts at one position
    assert all(line[width + 2:].split()[0] in ("pinned", "supported", "refused")
               for line, row in zip(done.stdout.splitlines()[1:], rows) if len(row[0]) <= width)
    done = run_script("run.py", "--list-tasks", "arc_challenge_mt_*", "--supported")
    names = [line.split()[0] for line in done.stdout.splitlines()[1:]]
    assert done.returncode == 0 and len(names) > 1 and all(n.startswith("arc_challenge_mt_") for n in names), done.stdout
    assert all(line.split()[1] == "supported" for line in done.stdout.splitlines()[1:])
    done = run_script("run.py", "--list-tasks", "mmlu_abstract_algebra")  # a quoted `"task":` key is found too
    # a fewshot_config alone (MMLU: first_n from dev) does not make a task few-shot: at 0 shots it draws nothing
    assert done.stdout.splitlines()[1].split()[:2] == ["mmlu_abstract_algebra", "supported"], done.stdout
    assert len(done.stdout.splitlines()) == 2
    # a YAML's own num_fewshot (tinyArc: 25) is a profile's default; literal `samples` shots (BBH's) are re-derived
    done = run_script("run.py", "--list-tasks", "tinyArc")
    assert done.stdout.splitlines()[1].split()[:2] == ["tinyArc", "supported"], done.stdout
    done = run_script("run.py", "--list-tasks", "leaderboard_bbh_boolean_expressions")
    assert done.stdout.splitlines()[1].split()[1:] == [
        "supported", "lm_eval/tasks/leaderboard/bbh_mc/boolean_expressions.yaml"], done.stdout
    done = run_script("run.py", "--list-tasks", "include_base_44_north macedonian_few_shot_en_arts*")  # a name with a space
    assert [line.split("  ")[0] for line in done.stdout.splitlines()[1:]] == [
        "include_base_44_north macedonian_few_shot_en_arts_humanities"], done.stdout


@pytest.mark.parametrize("fixture, profile, metrics, rows", [
    ("rte_run", "embedded-rte", ["acc"], 16),  # the real model, on the first 16 dev rows
    ("inverse_scaling_run", "embedded-inverse-scaling", ["acc", "acc_norm"], 64),  # a tiny model, every dev row
])
def test_demo_task_runs_end_to_end_and_its_bundle_passes(request, fixture, profile, metrics, rows, tmp_path, capsys):
    from sst2_audit.formats import records
    from sst2_audit.cli import audit_main

    base = request.getfixturevalue(fixture)
    cache = request.getfixturevalue("rte_cache") if profile == "embedded-rte" else base / "cache"
    lock = [] if profile == "embedded-rte" else ["--lock", str(base / "resources.lock.json")]  # a tiny model's
    record = records.read(base / "out" / records.RUN_FILE, records.RunRecord)
    assert record.metrics == metrics and record.demo and "EMBEDDED DEMO" in record.notice
    assert record.max_abs_diff == 0.0 and record.identity_checks_passed == rows == len(record.questions)
    assert all(q.scores["official"] == q.scores["independent"] for q in record.questions)
    if "acc_norm" in metrics:
        assert record.summaries["official"]["acc_norm"] == record.summaries["independent"]["acc_norm"]
        assert record.lm_eval_reported["acc_norm"] == record.summaries["official"]["acc_norm"].value
        assert any(q.predictions["official"]["acc_norm"] != q.predictions["official"]["acc"] for q in record.questions)
        assert max(max(q.candidate_token_counts) for q in record.questions) >= 3
    public = "".join(path.read_text() for path in (base / "out").iterdir())
    for row in json.loads("[" + ",".join((REPO / "data" / "demo" / ("rte/validation.jsonl" if "rte" in profile
                                          else "inverse_scaling/train.jsonl")).read_text().splitlines()[:64]) + "]"):
        text = row.get("sentence1") or row["prompt"]
        assert text not in public  # no data text in the public records
    code = audit_main([*lock, "--out", str(base / "out"), "--cache", str(cache), "--structural",
                       "--bundle", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 4, out
    assert f"*** {record.notice} ***" in out
    # rte: the default audit, every row rescored bit for bit; inverse_scaling's long prompts: a drawn
    # sample of 16 rows (the default audit of every row is the rte case's and the reference's)
    sample = [] if profile == "embedded-rte" else ["--rescore", "16", "--seed", "7"]
    code = audit_main([*lock, "--bundle-file", str(tmp_path / f"{profile}-test.tar.gz"), "--cache", str(cache),
                       *sample])
    out = capsys.readouterr().out
    assert code == (4 if sample else 0), out
    rescore = "rescore (16 rows, seed 7): PASS" if sample else "rescore (all rows"
    for level in ("bundle SHA256SUMS and members", "lock", "claims", "arithmetic", "identity", rescore):
        assert f"{level}" in out and f"{level.split(':')[0]}: FAIL" not in out


def test_a_schema_1_bundle_is_read_and_audited_by_today_s_reader(embedded_cache, capsys):
    from sst2_audit.cli import audit_main

    code = audit_main(["--bundle-file", str(REPO / "tests" / "data" / "v1-embedded-full-reference.tar.gz"),
                       "--cache", str(embedded_cache)])
    out = capsys.readouterr()
    assert code == 1 and "record schema 1 is older than 3, the oldest this audit accepts by default" in out.err, out
    assert "Audit it anyway with --accept-old-schema" in out.err and "v1-embedded-full-reference.tar.gz" in out.err
    code = audit_main(["--bundle-file", str(REPO / "tests" / "data" / "v1-embedded-full-reference.tar.gz"),
                       "--cache", str(embedded_cache), "--accept-old-schema"])
    out = capsys.readouterr().out
    assert code == 1, out  # its card predates the fields today's card binds (the platform): claims fails on it
    # it ran in the native numeric mode: a lock difference limited to the mode is named, not refused (issue 27)
    assert "the run's lock pins another numeric mode: run native (nothing set); yours ATEN_CPU_CAPABILITY=avx2 " \
        "MKL_CBWR=AVX2,STRICT" in out and "lock: PASS" in out
    assert "- CARD.md differs from the one regenerated from the checked records at line 1" in out
    # 1115 = the checks of an acc-only record of 64 questions (schema 4 holds no empty acc_norm fields to check),
    # lm-eval's reported acc and stderr among them twice: from our scores, and from its own logged values;
    # after the claims level failed, identity re-hashes the data and re-derives the split only (no tokenizer)
    assert "arithmetic: PASS (1115 checks)" in out and "identity: PASS (266 checks)" in out
    assert "prompts and token boundaries not rebuilt: an earlier level did not pass" in out


def test_a_bundle_written_before_the_any_task_change_passes_every_level(embedded_cache, capsys):
    """Record schema 2 and lock schema 2, packed before tasks were data: today's reader and the grown lock."""
    from sst2_audit.cli import audit_main

    code = audit_main(["--bundle-file", str(REPO / "tests" / "data" / "v2-embedded-full-reference.tar.gz"),
                       "--cache", str(embedded_cache), "--rescore", "8", "--seed", "2", "--accept-old-schema"])
    out = capsys.readouterr().out
    assert code == 4, out  # no problem found, but an old schema's limits are named in the verdict
    for level in ("bundle SHA256SUMS and members", "lock", "claims", "arithmetic", "identity", "rescore (8 rows, seed 2)"):
        assert f"{level}: PASS" in out
    assert "verdict: identical" in out
    assert out.splitlines()[0].startswith("VERDICT: SCORES NOT VERIFIED: 56 of 64 scored rows not rescored (--rescore 8)")
    assert "record schema 2: the bundle has no report.html or lm-eval notes to check" in out.splitlines()[0]


def test_a_multiple_input_template_and_a_blank_context_are_refused(lock, tokenizer):
    import dataclasses

    from sst2_audit.scoring.independent import encode_question

    sst2 = spec_for(lock, "sst2")
    multiple_input = dataclasses.replace(sst2, doc_to_text="{{label}}")
    doc = {"sentence": "x", "label": 1, "idx": 0}
    assert multiple_input.input_index(doc) == 1 and multiple_input.gold(doc, multiple_input.choices(doc)) == 1
    with pytest.raises(InputError, match=r"task sst2: doc_to_text gave int '1'; a context must be text"):
        multiple_input.text(doc)
    with pytest.raises(InputError, match=r"task sst2: a multiple-input doc_to_target must give the shared "
                                         r"continuation as text, got int '1'"):
        multiple_input.requests(doc, "")
    with pytest.raises(InputError, match=r"context ' \\n' is empty or only whitespace"):
        encode_question(tokenizer, [(" \n", " negative")], 0, 512)


def test_a_gold_index_outside_the_choices_is_bad_data(lock):
    rte = spec_for(lock, "rte")
    doc = {"sentence1": "a", "sentence2": "b", "label": 2, "idx": 0}
    with pytest.raises(InputError, match=r"task rte: the gold answer '2' is not an index into the 2 choices"):
        rte.gold(doc, rte.choices(doc))


def _drop_train(raw):
    raw["profiles"]["embedded-rte"]["data"]["files"] = [
        f for f in raw["profiles"]["embedded-rte"]["data"]["files"] if f["split"] != "train"]


LOCK_EDITS = {
    "default task unmapped": (
        lambda raw: raw["evaluator"]["tasks"].pop("sst2"), "embedded",
        "evaluator.tasks must map the default task 'sst2' to 'lm_eval/tasks/glue/sst2/default.yaml', got None."),
    "task YAML unpinned": (
        lambda raw: raw["evaluator"]["files"].pop("lm_eval/tasks/glue/rte/default.yaml"), "embedded",
        "evaluator.tasks.rte: its YAML 'lm_eval/tasks/glue/rte/default.yaml' must be pinned in evaluator.files."),
    "profile task unknown": (
        lambda raw: raw["profiles"]["embedded-rte"].update(task="nope"), "embedded-rte",
        "profiles.embedded-rte.task: 'nope' is not one of evaluator.tasks"),
    "profile task not text": (
        lambda raw: raw["profiles"]["embedded-rte"].update(task=["rte"]), "embedded-rte",
        "profiles.embedded-rte.task: expected str, got list"),
    "columns malformed": (
        lambda raw: raw["profiles"]["embedded-rte"]["data"].update(columns=[["idx", "float"]]), "embedded-rte",
        "lock: data.columns must be a list of [name, type] with type one of"),
    "included YAML unpinned": (
        lambda raw: raw["evaluator"]["files"].pop("lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml"),
        "embedded-inverse-scaling",
        "task inverse_scaling_redefine_math reads lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml, which "
        "evaluator.files does not pin."),
    "splits not the task's": (
        _drop_train, "embedded-rte",
        "profile embedded-rte: its data files are for splits ['validation']; task rte names ['train', 'validation'] "
        "(it scores 'validation'; lm-eval 0.4.9.2 builds every split its YAML names, so each needs a file)."),
}


@pytest.mark.parametrize("case", list(LOCK_EDITS))
def test_a_lock_whose_tasks_do_not_fit_exits_2_and_writes_nothing(case, tmp_path):
    edit, profile, message = LOCK_EDITS[case]
    raw = load_lock_json()
    edit(raw)
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    for script, args in (("prepare.py", ()), ("run.py", ("--smoke", "--out", tmp_path / "o", "--private", tmp_path / "p"))):
        done = run_cli(script, "--lock", lock, "--profile", profile, "--cache", tmp_path / "c", *args)
        assert done.returncode == 2, (script, done.stderr)
        assert message in one_paragraph(done.stderr), (script, done.stderr)
    assert not any((tmp_path / name).exists() for name in ("c", "o", "p"))


def test_a_malformed_demo_line_exits_2_naming_file_and_line(tmp_path):
    from sst2_audit.util.hashing import sha256_file

    folder = tmp_path / "data" / "demo" / "rte"
    folder.mkdir(parents=True)
    for name in ("train.jsonl", "validation.jsonl"):
        (folder / name).write_bytes((REPO / "data" / "demo" / "rte" / name).read_bytes())
    lines = (folder / "validation.jsonl").read_text().splitlines()
    lines[6] = json.dumps({"sentence2": "swapped", "sentence1": "order", "label": 0, "idx": 6})
    (folder / "validation.jsonl").write_text("\n".join(lines) + "\n")
    raw = load_lock_json()
    for entry in raw["profiles"]["embedded-rte"]["data"]["files"]:  # a reviewer re-pinned the edited file
        entry["sha256"] = sha256_file(tmp_path / entry["path"])
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    done = run_cli("prepare.py", "--lock", lock, "--profile", "embedded-rte", "--cache", tmp_path / "c")
    assert done.returncode == 2, done.stderr
    assert (f"{folder / 'validation.jsonl'}:7: expected the fields ['sentence1', 'sentence2', 'label', 'idx'] in "
            "this order, got ['sentence2', 'sentence1', 'label', 'idx'].") in one_paragraph(done.stderr)
    assert tree_state(tmp_path / "c") == {}  # nothing staged is left, nothing entered the cache


def test_report_of_a_group_is_refused_and_never_overwrites(tmp_path):
    (tmp_path / "group.json").write_text("{}")
    done = run_cli("audit.py", "--out", tmp_path, "--report", tmp_path / "page.html")
    assert done.returncode == 2
    assert "--report writes one run's page (or a comparison's); audit a subtask's run folder" in done.stderr
    (tmp_path / "page.html").write_text("mine")
    done = run_cli("audit.py", "--out", tmp_path, "--report", tmp_path / "page.html")
    assert done.returncode == 2 and "already exists; a report is never overwritten" in done.stderr
    assert (tmp_path / "page.html").read_text() == "mine"


def test_demo_jsonl_holds_lists_and_structs_exactly_as_the_lock_types_them(tmp_path):
    """Generated cases: a struct column's value must have exactly its fields, in order, each of its type."""
    import random

    from sst2_audit.task.dataset import read_demo_jsonl

    columns = [["choices", "struct<text: list<element: string>, label: list<element: string>>"], ["n", "int64"]]
    good = {"choices": {"text": ["a", "b"], "label": ["A", "B"]}, "n": 1}
    bad = [{"choices": {"label": ["A"], "text": ["a"]}, "n": 1}, {"choices": {"text": ["a"]}, "n": 1},
           {"choices": {"text": ["a"], "label": [1]}, "n": 1}, {"choices": {"text": "a", "label": ["A"]}, "n": 1},
           {"choices": {"text": ["a"], "label": ["A"], "x": []}, "n": 1}, {"choices": None, "n": 1},
           {"choices": {"text": ["a"], "label": ["A"]}, "n": True}]
    rng = random.Random(3)
    for case in range(60):
        rows = [good] * rng.randint(0, 3) + ([rng.choice(bad)] if case % 2 else [])
        path = tmp_path / "d.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows))
        if case % 2:
            with pytest.raises(InputError, match=rf"d.jsonl:{len(rows)}: field '(choices|n)' must be "):
                read_demo_jsonl(path, columns)
        else:
            assert [row.doc for row in read_demo_jsonl(path, columns)] == rows
    with pytest.raises(InputError, match=r"columns are one of .*, or lists and structs of them, got 'map<string, string>'"):
        read_demo_jsonl(path, [["m", "map<string, string>"]])
