"""The Open LLM Leaderboard v2's multiple-choice tasks (issue 47): BBH's shots are the literal samples of its YAML
(`fewshot_config.samples`, sampler first_n), re-derived by position; a BBH-shaped demo of our own (Boolean
expressions generated here) pinned with `prepare --pin`, run, audited and bundled bit for bit. The same module
runs in lm-eval 0.4.13's environment (.ci/run), against its own lock."""

import json
import random
import shutil

import pytest
import yaml

from support.builders import prepare_and_run_group, prepare_run_audit, tiny_model_folder
from support.paths import RELEASE_LOCK, REPO
from support.processes import run_script
from sst2_audit.formats.releases import installed_version
from support.demo_data import boolean_expressions

BBH_TASK = "leaderboard_bbh_boolean_expressions"


def test_every_leaderboard_multiple_choice_subtask_is_supported():
    """BBH's 24 subtasks take their shots from the YAML's literal samples, GPQA's three draw their choice order
    from lm-eval's seeded random state: all 31 within the audit's protocol."""
    from sst2_audit.task.support import list_installed

    found = {task: reason for task, _, reason in list_installed("leaderboard*", installed_version())}
    bbh = {task: reason for task, reason in found.items() if task.startswith("leaderboard_bbh_")}
    assert len(bbh) == 24 and set(bbh.values()) == {None}
    refused = sorted(task for task, reason in found.items() if reason is not None)
    assert refused == [] and len(found) == 31


@pytest.mark.slow
def test_a_bbh_shaped_demo_runs_audits_and_bundles_bit_for_bit(release_cache, tmp_path):
    """A tiny model and 230 Boolean expressions of our own pinned as leaderboard_bbh_boolean_expressions (3 shots:
    the YAML's literal samples): both paths bit for bit on a smoke run, every prompt's shots re-derived, the
    default audit and the bundle's audit PASS; the shots are the YAML's three, in its order, and no split is read
    for them."""
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task import fewshot
    from sst2_audit.task.spec import spec_for

    model = tiny_model_folder(tmp_path / "model", 3, release_cache)
    data = tmp_path / "bbh"
    data.mkdir()
    (data / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in boolean_expressions(230, 47)))
    lock = tmp_path / "bbh.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "bbh", "--task", BBH_TASK, "--model", model,
                      "--data", data, "--new-lock", lock, "--num-fewshot", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    spec = spec_for(load_lock(lock), BBH_TASK)
    rule = fewshot.rule_for(spec)
    assert (rule.split, rule.sampler, rule.extra_draw) == (fewshot.LITERAL, "first_n", False)
    docs = fewshot.shot_docs(spec, rows_of=lambda split: pytest.fail(f"no split is read for the shots ({split})"))
    assert docs == spec.official["fewshot_config"]["samples"] and len(docs) == 3
    question = {"input": "True and not False is", "target": "True"}
    # description + the shots + the question, as lm-eval joins them (this YAML's description ends in no space)
    assert fewshot.context(spec, question, docs, rule.delimiter) == spec.official["description"] + "".join(
        f"Q: {d['input']}\nA: {d['target']}\n\n" for d in docs) + "Q: True and not False is\nA:"
    record = prepare_run_audit(lock, "bbh", tmp_path, bundle=True)
    assert record["task"] == BBH_TASK and record["metrics"] == ["acc_norm"] and record["max_abs_diff"] == 0.0
    assert record["settings"]["fewshot_split"] == "fewshot_config.samples"
    assert [q["shots"] for q in record["questions"]] == [[0, 1, 2]] * len(record["questions"])
    # what a leaderboard submitter publishes: a plain `lm_eval` run of the task (its YAML's 3 shots, lm-eval's own
    # default seeds), adopted: every level, every row bit for bit
    from support.paths import VENV_BIN
    from support.plain_runs import task_yaml, plain_lm_eval
    ids = task_yaml(lock, tmp_path / "cache", tmp_path / f"{BBH_TASK}.yaml", profile="bbh")
    plain = plain_lm_eval(tmp_path, "plain", sorted(ids[:8]), task=BBH_TASK, seed=None)
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", plain, "--lock", lock, "--profile", "bbh",
                      "--cache", tmp_path / "cache", "--run-name", "bbh-plain", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was rescored bit for bit")
    assert "  rows: 8 bit for bit" in done.stdout.splitlines()
    # the leaderboard's normalised score of the task, under the reviewer's number: 2 choices (True, False)
    reported = json.loads(next(plain.glob("*/results_*.json")).read_text())["results"][BBH_TASK]["acc_norm,none"]
    shown = f"{max(0.0, (reported - 0.5) / 0.5 * 100):.2f}"
    assert done.stdout.splitlines()[2] == (f"{BBH_TASK} acc_norm, normalised as the Open LLM Leaderboard does "
                                           f"(baseline 1/2): reported {shown} (their scores) / rescored {shown} (yours)")
    # a second subtask pinned beside it, both logged by one run and adopted together: BBH's normalised score is the
    # mean of its subtasks' (rows of our own for navigate: steps along a line, a demo)
    from support.demo_data import navigate_rows
    from support.plain_runs import lm_eval_tasks, task_yamls
    (tmp_path / "navigate").mkdir()
    (tmp_path / "navigate" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in navigate_rows(230, 5)))
    both = tmp_path / "both.lock.json"
    done = run_script("prepare.py", "--lock", lock, "--pin", "navigate", "--task", "leaderboard_bbh_navigate",
                      "--model", model, "--data", tmp_path / "navigate", "--new-lock", both, "--num-fewshot", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    found = task_yamls(both, ["bbh", "navigate"], tmp_path / "two", rows=8)
    run = lm_eval_tasks(tmp_path / "two", [str(path) for path, _ in found.values()],
                        {task: ids for task, (_, ids) in found.items()})
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", run, "--lock", both, "--cache", tmp_path / "two" / "cache",
                      "--run-name", "bbh-two", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    logged = json.loads(next(run.glob("*/results_*.json")).read_text())["results"]
    mean = sum(max(0.0, (logged[task]["acc_norm,none"] - 0.5) / 0.5 * 100) for task in found) / 2
    assert (f"BBH acc_norm, the Open LLM Leaderboard's normalised score over the 2 subtask(s) adopted: reported "
            f"{mean:.2f} (their scores) / rescored {mean:.2f} (yours)") in done.stdout.splitlines()
    done = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--out", "runs/bbh-two", "--lock", both, "--cache",
                      tmp_path / "two" / "cache", "--structural", "--format", "json", cwd=tmp_path)
    numbers = [n for n in json.loads(done.stdout)["numbers"] if "normalised" in n["metric"]]
    assert done.returncode == 4 and [(n["task"], n["reported"], n["rescored"], n["rows"]) for n in numbers] == [
        *((task, max(0.0, (logged[task]["acc_norm,none"] - 0.5) / 0.5 * 100), None, 0) for task in sorted(found)),
        ("BBH", mean, None, 0)], done.stdout


MUSR = {"leaderboard_musr_murder_mysteries": "murder_mysteries",
        "leaderboard_musr_object_placements": "object_placements",
        "leaderboard_musr_team_allocation": "team_allocation"}


def musr_rows(split: str, count: int) -> list:
    """MuSR-shaped rows of our own (`narrative`, `question`, `choices` as a Python list's text, `answer_index`,
    `answer_choice`): short made-up puzzles, a demo."""
    names = ["Ada", "Bram", "Cleo", "Dev", "Esme"]
    rows = []
    for n in range(count):
        choices = [names[(n + k) % 5] for k in range(2 + n % 2)]
        answer = n % len(choices)
        rows.append({"narrative": f"Demo story {n} ({split.replace('_', ' ')}): {choices[answer]} kept the blue "
                                  f"key {n} in a drawer while the others were out.",
                     "question": f"Who kept blue key {n}?", "choices": repr(choices), "answer_index": answer,
                     "answer_choice": choices[answer]})
    return rows


@pytest.mark.slow
def test_the_leaderboard_musr_group_pinned_from_data_of_our_own_runs_audits_and_bundles(release_cache, tmp_path):
    """A leaderboard group: `prepare --pin-group` of leaderboard_musr (three subtasks, acc_norm weighted by size,
    doc_to_text a pinned hook) from MuSR-shaped folders of our own and a tiny model; the group run both paths bit
    for bit, the group's number re-derived, the group's audit and its bundle's audit PASS."""
    model, data = tmp_path / "locks" / "model", tmp_path / "data"
    tiny_model_folder(model, 17, release_cache)
    for task, split in MUSR.items():
        (data / split).mkdir(parents=True)
        (data / split / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in musr_rows(split, 200)))
    lock = tmp_path / "locks" / "lb.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin-group", "lb", "--task", "leaderboard_musr",
                      "--model", model, "--new-lock", lock, "--rows", "2",
                      *(f for task, split in MUSR.items() for f in ("--subtask", f"{task}={data / split}")),
                      cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    cache, out, record, runs = prepare_and_run_group(lock, "lb", tmp_path, "lb-group")
    assert [r["task"] for r in runs] == sorted(MUSR) and all(r["max_abs_diff"] == 0.0 for r in runs)
    assert record["aggregate"] == [{"metric": "acc_norm", "weight_by_size": True}]
    assert record["official"] == record["independent"]
    done = run_script("audit.py", "--lock", lock, "--out", out, "--cache", cache, "--bundle", "--results",
                      tmp_path / "results")
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
    done = run_script("audit.py", "--lock", lock, "--bundle-file", tmp_path / "results" / "lb-group.tar.gz",
                      "--cache", cache)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr


GPQA_TASK = "leaderboard_gpqa_main"


def gpqa_rows(count: int, seed: int) -> list:
    """GPQA-shaped rows of our own (`Question`, `Correct Answer`, `Incorrect Answer 1..3`): sums of two numbers
    with the right one and three near misses. A demo."""
    rng = random.Random(seed)
    rows = []
    for n in range(count):
        a, b = rng.randrange(10, 99), rng.randrange(10, 99)
        wrong = rng.sample([a + b + d for d in (-11, -10, -2, -1, 1, 2, 10, 11)], 3)
        rows.append({"Question": f"Demo question {n}: what is {a} + {b}?", "Correct Answer": str(a + b),
                     **{f"Incorrect Answer {k + 1}": str(w) for k, w in enumerate(wrong)}})
    return rows


def _choice_orders(rows: list, seed: int) -> list:
    """Each row's four answers in the order lm-eval's GPQA hook shows them after simple_evaluate's
    random.seed(seed): one random.shuffle per row of the split, in row order, from that state (our own draw)."""
    draws, orders = random.Random(seed), []
    for row in rows:
        choices = [row["Incorrect Answer 1"], row["Incorrect Answer 2"], row["Incorrect Answer 3"],
                   row["Correct Answer"]]
        draws.shuffle(choices)
        orders.append(choices)
    return orders


@pytest.mark.slow
def test_a_gpqa_shaped_demo_draws_its_choice_order_from_lm_evals_seed(release_cache, tmp_path):
    """A tiny model and 220 sums of our own pinned as leaderboard_gpqa_main (its process_docs hook shuffles each
    row's answers with the global random): the docs both paths read are the ones lm-eval's seeded state gives,
    the run bit for bit, the default audit and the bundle PASS; a plain `lm_eval` run (lm-eval's default seeds)
    adopted bit for bit; a run whose choice order is not its seed's (a datasets cache warmed by another seed) is
    caught by the identity level, row by row."""
    from support.paths import VENV_BIN
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for
    from support.plain_runs import task_yaml, plain_lm_eval
    model = tiny_model_folder(tmp_path / "model", 5, release_cache)
    data, rows = tmp_path / "gpqa", gpqa_rows(220, 47)
    data.mkdir()
    (data / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    lock = tmp_path / "gpqa.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "gpqa", "--task", GPQA_TASK, "--model", model,
                      "--data", data, "--new-lock", lock)
    assert done.returncode == 0, done.stdout + done.stderr
    record = prepare_run_audit(lock, "gpqa", tmp_path, bundle=True)
    assert record["task"] == GPQA_TASK and record["metrics"] == ["acc_norm"] and record["max_abs_diff"] == 0.0
    reviewer = load_lock(lock)
    spec, profile = spec_for(reviewer, GPQA_TASK), reviewer.profile("gpqa")
    for seed in (0, reviewer.settings_for("gpqa", spec)["seed"]):
        docs = verified_rows(reviewer, profile, spec, tmp_path / "cache", roles=(), random_seed=seed).by_idx
        assert [[docs[i].doc[f"choice{k}"] for k in range(1, 5)] for i in range(220)] == _choice_orders(rows, seed)
    ids = sorted(task_yaml(lock, tmp_path / "cache", tmp_path / f"{GPQA_TASK}.yaml", profile="gpqa")[:8])
    task_yaml = yaml.safe_load((tmp_path / f"{GPQA_TASK}.yaml").read_text())  # the hook as the user's YAML tags it
    task_yaml.pop("process_docs")
    (tmp_path / f"{GPQA_TASK}.yaml").write_text(yaml.safe_dump(task_yaml, sort_keys=False)
                                                + "process_docs: !function utils.process_docs\n")
    shutil.copyfile(spec.process_docs.file, tmp_path / "utils.py")  # the installed, pinned hook file
    plain = plain_lm_eval(tmp_path, "plain", ids, task=GPQA_TASK, seed=None)
    adopt = [str(VENV_BIN / "sst2-audit"), "adopt", "--lock", lock, "--profile", "gpqa", "--cache", tmp_path / "cache"]
    done = run_script(*adopt[:2], plain, *adopt[2:], "--run-name", "gpqa-plain", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was rescored bit for bit")
    # the same datasets cache, now warmed by seed 0's map: a run claiming seed 5 reads seed 0's choice order
    warmed = plain_lm_eval(tmp_path, "warmed", ids, task=GPQA_TASK, seed="5", datasets="plain")
    done = run_script(*adopt[:2], warmed, *adopt[2:], "--run-name", "gpqa-warmed", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    moved = [i for i in ids if _choice_orders(rows, 0)[i] != _choice_orders(rows, 5)[i]]
    assert moved and f"doc_id {moved[0]}: doc_hash" in done.stdout and "VERDICT: FAIL (identity)" in done.stdout
    assert "after lm-eval's random.seed(5) (the run's config.random_seed) in a fresh datasets cache" in done.stdout
    assert not (tmp_path / "results" / "gpqa-warmed").exists()
    # the leaderboard_gpqa group: its subtasks draw from one state in lm-eval's group run, in its construction order
    group = tmp_path / "group.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin-group", "gq", "--task", "leaderboard_gpqa",
                      "--model", model, "--new-lock", group, "--rows", "2", "--subtask", f"{GPQA_TASK}={data}",
                      "--subtask", f"leaderboard_gpqa_diamond={data}", cwd=tmp_path)
    assert done.returncode == 2 and not group.exists(), done.stdout + done.stderr
    assert "leaderboard_gpqa_diamond, leaderboard_gpqa_main each draw their docs from random" in done.stderr


def test_the_leaderboard_era_prompt_mapping_holds_for_the_installed_release():
    """data/leaderboard-prompts.json (scripts/leaderboard_prompts.py, issue 62): for each of the 39 leaderboard
    subtasks, whether lm-eval 0.4.4's YAMLs (the first release holding them, read from the registry's wheel) decide
    the same prompts, requests, filters and metrics as the pinned release's. Its pinned side is re-derived here from
    the installed YAMLs, and every status follows from the two sides (32 equal: BBH, GPQA, IFEval, MMLU-Pro, MuSR;
    the 7 MATH-Hard subtasks differ in their data, process_docs, prompts and metrics)."""
    import importlib.util

    mapping = json.loads((REPO / "data" / "leaderboard-prompts.json").read_text())
    if mapping["new"]["version"] != installed_version():
        pytest.skip(f"the mapping's pinned side is lm-eval {mapping['new']['version']}")
    spec = importlib.util.spec_from_file_location("leaderboard_prompts", REPO / "scripts" / "leaderboard_prompts.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    from sst2_audit.task.evaluator_pin import installed_root

    installed = script.field_hashes(installed_root())
    assert {task: entry["new"] for task, entry in mapping["tasks"].items()} == installed
    old = {task: entry["old"] for task, entry in mapping["tasks"].items()}
    assert script.compare(old, installed) == {task: {"status": e["status"], "fields": e["fields"]}
                                              for task, e in mapping["tasks"].items()}
    statuses = {task: entry["status"] for task, entry in mapping["tasks"].items()}
    assert len(statuses) == 39 and mapping["counts"] == {"differs": 7, "equal": 32}
    assert {t for t, s in statuses.items() if s == "differs"} == {t for t in statuses if t.startswith(
        "leaderboard_math_")}
