"""Generative tasks (issue 49): the independent greedy decoder against lm-eval's own generate_until, the filters and
exact_match against lm-eval's own on generated cases, and a plain `lm_eval` run of a GSM8K-shaped demo of our own
(arithmetic word problems generated here) adopted, audited, bundled and tampered with. Runs in both releases."""

import json
import random
import shutil
from pathlib import Path

import pytest

from support.builders import built_once, tiny_model_folder
from support.paths import RELEASE_LOCK, VENV_BIN
from support.processes import run_script
from sst2_audit.formats.releases import installed_version
from support.demo_data import word_problems

GSM = "gsm8k"


# --- the filters and exact_match, against lm-eval's own ----------------------------------------------------------

PIPELINES = [  # gsm8k's two, and each other filter re-derived
    [{"function": "regex", "regex_pattern": r"#### (\-?[0-9\.\,]+)"}, {"function": "take_first"}],
    [{"function": "regex", "group_select": -1, "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)"},
     {"function": "take_first"}],
    [{"function": "remove_whitespace"}, {"function": "lowercase"}, {"function": "take_first"}],
    [{"function": "uppercase"}, {"function": "regex", "regex_pattern": r"ANSWER: (\w+)", "fallback": "none"},
     {"function": "take_first"}],
]
PIECES = ["#### ", "42", "-7", "1,024", "$3.50", " ", "\n", "Answer: ", "answer: yes", ".", ",", "!", "\x00", "É",
          "ß", "The answer is", "(-?", "Question:", "ﬁ", "  "]


def _response(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))


def test_the_filters_and_exact_match_equal_lm_eval_s_on_generated_responses():
    """600 generated responses through each pipeline and exact_match with each flag set: our pure functions give
    lm-eval's own FilterEnsemble's answers and exact_match_hf_evaluate's values, exactly."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters import build_filter_ensemble

    from sst2_audit.protocol.generation import ExactMatch, generation_rule

    rng = random.Random(49)
    for number, steps in enumerate(PIPELINES):
        config = {"generation_kwargs": {"until": ["Q:"], "do_sample": False}, "metric_list": [
            {"metric": "exact_match", "ignore_case": number % 2 == 0, "ignore_punctuation": number >= 2,
             "ignore_numbers": number == 3, "regexes_to_ignore": [",", r"\$", "(?s).*#### "] if number < 2 else None}],
            "filter_list": [{"name": f"p{number}", "filter": steps}]}
        rule = generation_rule(config)
        ensemble = build_filter_ensemble(f"p{number}", [[s["function"], {k: v for k, v in s.items()
                                                                          if k != "function"} or None] for s in steps])
        metric = {k: v for k, v in config["metric_list"][0].items() if k != "metric"}
        for _ in range(150):
            response, reference = _response(rng), _response(rng)

            class One:  # the one Instance field a FilterEnsemble reads and writes
                resps, doc, filtered_resps = [response], {}, {}
            ensemble.apply([One])
            ours = rule.pipelines[0].apply(response)
            assert ours == One.filtered_resps[f"p{number}"], (steps, response)
            theirs = exact_match_hf_evaluate(predictions=[ours], references=[reference], **metric)["exact_match"]
            assert ExactMatch(**{k: v for k, v in metric.items() if k != "regexes_to_ignore"},
                              regexes_to_ignore=tuple(metric["regexes_to_ignore"] or ()) or None
                              ).score(ours, reference) == theirs, (ours, reference, metric)


def test_generate_until_configs_are_listed_with_their_reasons():
    """`run --list-tasks --output-type generate_until`: gsm8k and BBH's chain of thought within the protocol; a
    sampled, a bleu and a multi_choice_regex task refused with the reason."""
    from sst2_audit.task.support import list_installed

    found = {task: reason for task, _, reason in list_installed("*", installed_version(), "generate_until")}
    assert found["gsm8k"] is None and found["gsm8k_cot"] is None and found["bbh_cot_fewshot_navigate"] is None
    refused = [reason for reason in found.values() if reason]
    assert any("bleu" in reason for reason in refused) and any("multi_choice_regex" in r for r in refused)
    assert len(found) > 4000 and 1100 < sum(reason is None for reason in found.values()) < len(found)
    assert "gen_prefix" in found["mmlu_llama_anatomy"]  # lm-eval's prefix of the answer: not re-derived


# --- the decoder, against lm-eval's own generate_until -----------------------------------------------------------

def _lm_eval_generations(model, tokenizer, contexts: list, kwargs: dict) -> list:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=1, max_length=512, device="cpu")
    return lm.generate_until([Instance("generate_until", {}, (c, dict(kwargs)), 0) for c in contexts],
                             disable_tqdm=True)


def test_the_greedy_decoder_equals_lm_eval_s_generate_until_with_a_stop_string_split_across_tokens(
        release_cache, tmp_path):
    """A tiny model's free generation; a stop string is taken across the boundary of its 5th and 6th tokens: lm-eval
    (its MultiTokenEOSCriteria and postprocess) and our decoder stop at the same token and log the same text, and
    without the stop both run to max_gen_toks with the same text."""
    import torch

    from sst2_audit.scoring.decode import context_tokens, GreedyDecoder, stop_rule
    from sst2_audit.scoring.model import load_tokenizer

    folder = tiny_model_folder(tmp_path / "tiny", 23, release_cache)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = load_tokenizer(folder)
    config = json.loads((folder / "generation_config.json").read_text())
    decoder = GreedyDecoder(model, tokenizer, 512)
    contexts = ["Question: how many shells?\nAnswer:", "Demo prompt of our own: 3 + 4 ="]
    free = {"until": ["never appears §§"], "do_sample": False, "max_gen_toks": 24}
    ours = [decoder.decode(context_tokens(tokenizer, c, False), stop_rule(tokenizer, free, config)) for c in contexts]
    assert [g.text for g in ours] == _lm_eval_generations(model, tokenizer, contexts, free)
    assert [g.stopped for g in ours] == ["max_gen_toks"] * 2 and all(len(g.tokens) == 24 for g in ours)
    pieces = [tokenizer.decode([t]) for t in ours[0].tokens]
    split = next(k for k in range(4, 20) if len(pieces[k].strip()) >= 2 and len(pieces[k + 1].strip()) >= 2)
    stop = pieces[split][-2:] + pieces[split + 1][:2]  # in neither token alone
    assert stop not in pieces[split] and stop not in pieces[split + 1]
    stopped = {"until": [stop], "do_sample": False, "max_gen_toks": 24}
    again = decoder.decode(context_tokens(tokenizer, contexts[0], False), stop_rule(tokenizer, stopped, config))
    assert again.stopped == "stop string 0" and len(again.tokens) <= split + 2
    assert [again.text] == _lm_eval_generations(model, tokenizer, contexts[:1], stopped)
    assert again.text == ours[0].text.split(stop)[0]


@pytest.mark.slow
def test_the_greedy_decoder_equals_lm_eval_s_generate_until_on_the_embedded_model(release_cache):
    """The real model (SmolLM2-135M, float32): lm-eval's generate_until and our decoder give the same texts, with
    the gsm8k stop strings and a 40-token limit."""
    import torch
    from transformers import AutoModelForCausalLM

    from sst2_audit.scoring.decode import context_tokens, GreedyDecoder, stop_rule
    from sst2_audit.scoring.model import load_tokenizer

    folder = release_cache / "model"
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    tokenizer = load_tokenizer(folder)
    config = json.loads((folder / "generation_config.json").read_text())
    contexts = ["Question: (demo) Ada has 5 shells and finds 7 more. How many now?\nAnswer:",
                "Q: What is 12 times 7?\nA:", "The three demo colours are"]
    kwargs = {"until": ["Question:", "</s>", "<|im_end|>"], "do_sample": False, "temperature": 0.0,
              "max_gen_toks": 40}
    decoder = GreedyDecoder(model, tokenizer, 512)
    ours = [decoder.decode(context_tokens(tokenizer, c, False), stop_rule(tokenizer, kwargs, config)) for c in contexts]
    assert [g.text for g in ours] == _lm_eval_generations(model, tokenizer, contexts, kwargs)
    assert all(g.closest[1] > 0 for g in ours)  # a margin is the chosen logit over the runner-up's


# --- a plain lm_eval run of a GSM8K-shaped demo, adopted -----------------------------------------------------------

@pytest.fixture(scope="module")
def gsm(release_cache, tmp_path_factory) -> Path:
    """A tiny model and 200 word problems of our own pinned as gsm8k (3 shots from its train split, and 0 shots in a
    second profile), prepared, and real `lm_eval` console runs of its first 6 dev rows with 3 shots and with 0: built
    once per test run (both workers read it)."""
    return built_once(tmp_path_factory, f"gsm-{installed_version()}", lambda folder: _build_gsm(folder, release_cache))


def _build_gsm(folder: Path, release_cache: Path) -> None:
    from support.plain_runs import task_yaml, plain_lm_eval
    model = tiny_model_folder(folder / "model", 29, release_cache)
    data = folder / "data"
    data.mkdir()
    for split, count, seed in (("train", 30, 1), ("test", 200, 2)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in word_problems(count, seed, split)))
    lock, both = folder / "gsm.lock.json", folder / "both.lock.json"
    for profile, shots, given, new in (("gsm", "3", RELEASE_LOCK, lock), ("gsm0", "0", lock, both)):
        done = run_script("prepare.py", "--lock", given, "--pin", profile, "--task", GSM, "--model", model,
                          "--data", data, "--new-lock", new, "--num-fewshot", shots)
        assert done.returncode == 0, done.stdout + done.stderr
    both.replace(lock)
    for profile in ("gsm", "gsm0"):
        done = run_script("prepare.py", "--lock", lock, "--profile", profile, "--cache", folder / f"cache-{profile}")
        assert done.returncode == 0, done.stderr
    shutil.copytree(folder / "cache-gsm", folder / "cache")  # where plain_lm_eval finds the model and the data
    ids = task_yaml(lock, folder / "cache", folder / f"{GSM}.yaml", profile="gsm")
    plain_lm_eval(folder, "plain3", sorted(ids[:6]), task=GSM, num_fewshot=3)
    plain_lm_eval(folder, "plain0", sorted(ids[:6]), task=GSM, num_fewshot=0)


def _adopt(gsm: Path, output, profile: str, *args, cwd: Path):
    return run_script(str(VENV_BIN / "sst2-audit"), "adopt", output, "--lock", gsm / "gsm.lock.json", "--profile",
                      profile, "--cache", gsm / f"cache-{profile}", *args, cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("profile,plain", [("gsm", "plain3"), ("gsm0", "plain0")])
def test_a_plain_gsm8k_run_is_re_decoded_token_for_token_and_its_folder_and_bundle_pass(gsm, tmp_path, profile,
                                                                                          plain):
    done = _adopt(gsm, gsm / plain, profile, "--run-name", "g", "--bundle", "--results", tmp_path / "results",
                  "--export-eee", tmp_path / "eee", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS") and "  rows: 6 token for token" in done.stdout.splitlines()
    # the Every Eval Ever export: a line per document and filter, the generation and the filter's answer, the verdict
    [samples] = (tmp_path / "eee").rglob("*_samples.jsonl")
    logged = {(r["doc_id"], r["filter"]): r for r in map(json.loads, next((gsm / plain).glob("*/samples_*")).open())}
    exported = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(exported) == len(logged) == 12
    for line in exported:
        filter_name = line["evaluation_result_id"].split(":")[1]
        row = logged[(int(line["sample_id"]), filter_name)]
        assert line["output"]["raw"] == [row["resps"][0][0]]
        assert line["answer_attribution"][0]["extracted_value"] == row["filtered_resps"][0]
        assert line["evaluation"]["score"] == row["exact_match"] and line["metadata"]["sst2_audit_verdict"] == "PASS"
    record = json.loads((tmp_path / "runs" / "g" / "adopted.json").read_text())
    assert record["kind"] == "sst2-audit/adopted-generation" and record["filters"] == ["strict-match",
                                                                                       "flexible-extract"]
    assert [len(row["shots"]) for row in record["rows"]] == [3 if profile == "gsm" else 0] * 6
    assert record["rederived"] == {k: v for k, v in record["reported"].items()}
    public = (tmp_path / "runs" / "g" / "lm_eval_samples.public.jsonl").read_text()
    assert "demo test" not in public and "####" not in public  # no data text, no generation in the public copy
    for target in (["--out", tmp_path / "runs" / "g"], ["--bundle-file", tmp_path / "results" / "g.tar.gz"]):
        done = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", gsm / "gsm.lock.json", "--cache",
                          gsm / f"cache-{profile}", *target, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr


def test_a_structural_adoption_is_re_decoded_by_the_audit_and_a_decode_it_did_not_make_fails(gsm, tmp_path):
    """A structural adoption (nothing re-decoded) audited with the default rescore: the audit re-decodes every row
    itself and PASSes; a record that gives such a row a greedy answer FAILs, naming the row and the field."""
    done = _adopt(gsm, gsm / "plain0", "gsm0", "--run-name", "s", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "  prompts not tokenized: lm-eval logs no tokens, and only a rescore reads them" in done.stdout
    assert {row["context_length"] for row in json.loads((tmp_path / "runs" / "s" / "adopted.json").read_text())[
        "rows"]} == {None}  # nothing re-decoded: no tokens derived
    audit = [str(VENV_BIN / "sst2-audit"), "audit", "--lock", gsm / "gsm.lock.json", "--cache", gsm / "cache-gsm0"]
    audited = run_script(*audit, "--out", tmp_path / "runs" / "s", cwd=tmp_path)
    assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr
    path = tmp_path / "runs" / "s" / "adopted.json"
    record = json.loads(path.read_text())
    row = record["rows"][1]
    row["greedy_exact_match"] = dict(row["logged_exact_match"])
    path.write_text(json.dumps(record))
    audited = run_script(*audit, "--out", tmp_path / "runs" / "s", cwd=tmp_path)
    assert audited.returncode == 1 and f"row idx {row['idx']}: greedy_exact_match (a row the adoption did not " \
                                       "rescore): expected None, got " in audited.stdout, audited.stdout


def _forged(gsm: Path, target: Path, change) -> tuple:
    """A copy of the 3-shot run with `change(line)` applied to the lines of its second logged doc; (folder, doc_id)."""
    shutil.copytree(gsm / "plain3", target)
    samples = next(target.glob("*/samples_*.jsonl"))
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    doc_id = sorted({line["doc_id"] for line in lines})[1]
    samples.write_text("".join(json.dumps(change(line) if line["doc_id"] == doc_id else line) + "\n"
                               for line in lines))
    return target, doc_id


def _text(line: dict, response: str) -> dict:
    return dict(line, resps=[[response]])


@pytest.mark.parametrize("what", ["generation", "filtered answer", "per-sample metric"])
def test_a_forged_generation_answer_or_metric_is_caught_with_its_row_named(gsm, tmp_path, what):
    """A generation changed (both filter lines, their answers kept), one line's filtered answer changed, one
    line's exact_match changed: each is exit 1 with the doc_id named, and nothing is written."""
    change = {"generation": lambda line: _text(line, line["resps"][0][0] + " (edited)"),
              "filtered answer": lambda line: dict(line, filtered_resps=["12345"]) if line["filter"] ==
              "strict-match" else line,
              "per-sample metric": lambda line: dict(line, exact_match=1.0 - line["exact_match"]) if line["filter"] ==
              "flexible-extract" else line}[what]
    folder, doc_id = _forged(gsm, tmp_path / "forged", change)
    done = _adopt(gsm, folder, "gsm", "--run-name", "f", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: FAIL") and not (tmp_path / "runs" / "f").exists()
    failed = {"generation": f"row idx {doc_id}: the logged generation is not one the model decodes here",
              "filtered answer": f"doc_id {doc_id}: strict-match: the filtered answer (sha256)",
              "per-sample metric": f"doc_id {doc_id}: flexible-extract: exact_match"}[what]
    assert failed in done.stdout, done.stdout


@pytest.mark.slow
def test_a_bbh_chain_of_thought_shaped_run_is_adopted_token_for_token(release_cache, tmp_path):
    """bbh_cot_fewshot_boolean_expressions (the YAML's 3 literal chain-of-thought shots, max_gen_toks 1024, the
    lookbehind regex filter) pinned from Boolean expressions of our own on a tiny model with max_length 2048; a
    plain `lm_eval` run of 2 rows adopted (each 1,024 tokens of a random model's text, the limit, as a model that
    never stops gives): every generation re-decoded token for token, the filter re-derived."""
    from support.plain_runs import task_yaml, plain_lm_eval
    from support.demo_data import boolean_expressions

    task = "bbh_cot_fewshot_boolean_expressions"
    model = tiny_model_folder(tmp_path / "model", 31, release_cache)
    data = tmp_path / "data"
    data.mkdir()
    (data / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in boolean_expressions(220, 53)))
    lock = tmp_path / "cot.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "cot", "--task", task, "--model", model,
                      "--data", data, "--new-lock", lock, "--num-fewshot", "3", "--max-length", "2048")
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_script("prepare.py", "--lock", lock, "--profile", "cot", "--cache", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    ids = task_yaml(lock, tmp_path / "cache", tmp_path / f"{task}.yaml", profile="cot")
    plain = plain_lm_eval(tmp_path, "plain", sorted(ids[:2]), task=task, seed=None, max_length=2048)
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", plain, "--lock", lock, "--profile", "cot", "--cache",
                      tmp_path / "cache", "--run-name", "cot", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every level passed and every scored row was re-decoded token for "
                                  "token") and "  rows: 2 token for token" in done.stdout.splitlines()
    record = json.loads((tmp_path / "runs" / "cot" / "adopted.json").read_text())
    assert record["filters"] == ["get-answer"] and record["generation_kwargs"]["max_gen_toks"] == 1024
    assert [row["shots"] for row in record["rows"]] == [[0, 1, 2]] * 2
    assert [row["generated_tokens"] for row in record["rows"]] == [1024, 1024]


@pytest.mark.slow
def test_a_bfloat16_runs_near_ties_are_taken_again_by_rank_on_the_public_copy(gsm, tmp_path):
    """A plain lm_eval run in bfloat16 (what a GPU run publishes) of the 0-shot profile, adopted under the float32
    lock: its generations re-decoded along the logged text, each near tie taken the logged way recorded with its rank.
    The public copy holds no text: its audit takes the recorded ties again by rank and gets every logged hash (no row
    left unverified); a rank changed in adopted.json gives another generation, and with both machines in the lock's
    numeric mode that row fails, named."""
    from support.plain_runs import plain_lm_eval
    folder = tmp_path / "bf16"
    folder.mkdir()
    (folder / "cache").symlink_to(gsm / "cache")
    shutil.copy(gsm / f"{GSM}.yaml", folder)
    logged = next((gsm / "plain0").glob("*/samples_*.jsonl")).read_text().splitlines()
    plain_lm_eval(folder, "plain", sorted({json.loads(line)["doc_id"] for line in logged}), task=GSM, num_fewshot=0,
                  dtype="bfloat16")
    done = _adopt(gsm, folder / "plain", "gsm0", "--run-name", "b", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    record = json.loads((tmp_path / "runs" / "b" / "adopted.json").read_text())
    tied = [row for row in record["rows"] if row["ties"]]
    assert record["bits_required"] and len(tied) >= 2 and all(row["row_class"] == "near-tie drift" for row in tied)
    assert all(type(tie["rank"]) is int and tie["rank"] >= 1 for row in tied for tie in row["ties"])
    drift = (f"VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: {len(tied)} generation(s) differ at near ties within the "
             "tie budget 1 a row: consistent with rounding; likely causes the run's files show: the dtype the run "
             "claims, bfloat16; exit 4")
    assert done.stdout.startswith(drift)

    def audit(out):
        return run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", gsm / "gsm.lock.json", "--cache",
                          gsm / "cache-gsm0", "--out", out, cwd=tmp_path)

    done = audit(tmp_path / "runs" / "b")
    assert done.returncode == 4 and done.stdout.startswith(drift), done.stdout + done.stderr
    assert "differs from the logged generation" not in done.stdout and "adopted record: PASS" in done.stdout
    for row in tied:
        assert f"near tie: row idx {row['idx']}: taken as adopted.json records them at step {row['ties'][0]['step']} " \
               f"(rank {row['ties'][0]['rank']}," in done.stdout
    forged = shutil.copytree(tmp_path / "runs" / "b", tmp_path / "forged")
    first = tied[0]["ties"][0]
    first["rank"] += 1  # tied[0] is a row of `record`
    (forged / "adopted.json").write_text(json.dumps(record))
    done = audit(forged)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (adopted record)"), done.stdout + done.stderr
    assert f"row idx {tied[0]['idx']}: the near ties adopted.json records (step, rank: {first['step']}, " \
           f"{first['rank']}; " in done.stdout
    # adopted.json is input: a recorded tie of any other shape is refused by its reader, naming the row (generated)
    import copy

    from sst2_audit.formats.adopted_generation import from_dict
    from sst2_audit.util.errors import InputError

    draw, row = random.Random(49), record["rows"].index(tied[0])
    values = [None, -1, 0, 1.5, "1", True, [], {}, 1 << 40, float("nan"), 3]
    for _ in range(200):
        bad = copy.deepcopy(record)
        tie = bad["rows"][row]["ties"][0]
        key = draw.choice(["step", "rank", "gap", "logit", "extra", "drop"])
        if key == "drop":
            del tie[draw.choice(["step", "gap", "logit"])]
        else:
            tie[key] = draw.choice(values)
        whole = type(tie.get(key)) is int and 0 <= tie[key] <= 1 << 31
        fine = key in ("gap", "logit") and type(tie[key]) in (int, float) or key == "step" and whole \
            or key == "rank" and whole and tie[key] >= 1
        if fine:
            assert from_dict(bad, "adopted.json").rows[row].ties[0] == tie
            continue
        with pytest.raises(InputError, match=rf"adopted.json.rows\[{row}\].ties: expected"):
            from_dict(bad, "adopted.json")


@pytest.mark.slow
@pytest.mark.parametrize("shots", [0, 3])
def test_a_plain_gsm8k_run_of_the_embedded_model_is_adopted_token_for_token(release_cache, tmp_path, shots):
    """The embedded model (SmolLM2-135M, real weights) pinned on the GSM8K-shaped demo with 0 and 3 shots; a real
    `lm_eval` run of its first 2 dev rows adopted: every generation re-decoded token for token, exact_match re-derived
    per filter, and the adopted folder's and bundle's audits PASS."""
    from support.plain_runs import task_yaml, plain_lm_eval
    data = tmp_path / "data"
    data.mkdir()
    for split, count, seed in (("train", 30, 1), ("test", 200, 2)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in word_problems(count, seed, split)))
    lock = tmp_path / "gsm.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "real", "--task", GSM, "--model",
                      release_cache / "model", "--data", data, "--new-lock", lock, "--num-fewshot", str(shots))
    assert done.returncode == 0, done.stdout + done.stderr
    done = run_script("prepare.py", "--lock", lock, "--profile", "real", "--cache", tmp_path / "cache",
                      env={"SST2_AUDIT_REAL_MODEL": str(release_cache / "model")})
    assert done.returncode == 0, done.stderr
    ids = task_yaml(lock, tmp_path / "cache", tmp_path / f"{GSM}.yaml", profile="real")
    plain = plain_lm_eval(tmp_path, "plain", sorted(ids[:2]), task=GSM, num_fewshot=shots)
    common = ["--lock", lock, "--cache", tmp_path / "cache"]
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", plain, "--profile", "real", *common, "--run-name", "e",
                      "--bundle", "--results", tmp_path / "results", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS") and "  rows: 2 token for token" in done.stdout.splitlines()
    record = json.loads((tmp_path / "runs" / "e" / "adopted.json").read_text())
    assert [len(row["shots"]) for row in record["rows"]] == [shots, shots]
    assert record["rederived"] == record["reported"] and all(row["generated_tokens"] > 0 for row in record["rows"])
    for target in (["--out", tmp_path / "runs" / "e"], ["--bundle-file", tmp_path / "results" / "e.tar.gz"]):
        done = run_script(str(VENV_BIN / "sst2-audit"), "audit", *common, *target, cwd=tmp_path)
        assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr


@pytest.mark.slow
def test_a_generation_steered_through_near_ties_fails_and_the_reviewer_s_greedy_number_is_printed(gsm, tmp_path):
    """Issue 58: the float32 3-shot run relabelled bfloat16, one row's generation replaced by a decode that takes the
    runner-up token at up to 8 steps whose margin is 0.02-0.06 logits (every one within the bfloat16 bound of this flat tiny model), its
    answers and exact_match made consistent: the row's ties overspend the tie budget (exit 1, named), and the
    reviewer's greedy exact_match is printed under the verdict."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from sst2_audit.audit.adopt_generation import answers, near_rule
    from sst2_audit.audit.adopt_scores import bound_for
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.scoring.decode import context_tokens, GreedyDecoder, stop_rule
    from sst2_audit.task.spec import spec_for

    lock = load_lock(gsm / "gsm.lock.json")
    spec = spec_for(lock, lock.profile("gsm").task)
    settings = lock.settings_for("gsm", spec)
    model_dir = gsm / "cache-gsm" / "model"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    config = json.loads((model_dir / "generation_config.json").read_text())
    rule = stop_rule(tokenizer, spec.generation.generation_kwargs, config)
    decoder = GreedyDecoder(model, tokenizer, settings["max_length"])
    near = near_rule(bound_for(None, "bfloat16", True))
    steered = {}

    def change(line):
        if "text" not in steered:
            tokens = context_tokens(tokenizer, line["arguments"]["gen_args_0"]["arg_0"], settings["add_bos_token"])
            forced = {}  # the runner-up taken at each next step whose margin is within the bound (0.02-0.06 logits)
            for _ in range(8):
                greedy = decoder.decode(tokens, rule, None, near, forced)
                later = [s for s, m in enumerate(greedy.margins) if s > max(forced, default=-1) and 0.02 <= m <= 0.06]
                if not later:
                    break
                forced[later[0]] = 1
            steered["text"], steered["ties"] = decoder.decode(tokens, rule, None, near, forced).text, len(forced)
        answer = answers(spec.generation, steered["text"], spec.reference(line["doc"]))[line["filter"]]
        return dict(line, resps=[[steered["text"]]], filtered_resps=[answer[0]], exact_match=answer[1])

    folder, doc_id = _forged(gsm, tmp_path / "steered", change)
    results = next(folder.glob("*/results_*.json"))
    samples = [json.loads(line) for line in next(folder.glob("*/samples_*.jsonl")).read_text().splitlines()]
    raw = json.loads(results.read_text())
    from sst2_audit.protocol.rules import accuracy, accuracy_stderr

    for name in spec.generation.filter_names:
        values = [s["exact_match"] for s in sorted(samples, key=lambda s: s["doc_id"]) if s["filter"] == name]
        raw["results"][GSM][f"exact_match,{name}"] = accuracy(values)
        raw["results"][GSM][f"exact_match_stderr,{name}"] = accuracy_stderr(values)
    from support.lm_eval_files import claim_dtype

    claim_dtype(raw, GSM, "bfloat16")
    results.write_text(json.dumps(raw))
    done = _adopt(gsm, folder, "gsm", "--run-name", "s", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and lines[0].startswith("VERDICT: FAIL (rescore"), done.stdout + done.stderr
    assert f"  - row idx {doc_id}: the logged generation takes " in done.stdout, done.stdout
    assert "of the tie budget 1 " in done.stdout and steered["ties"] >= 4
    assert lines[1].startswith(f"{GSM} exact_match,strict-match: reported ") and \
        lines[1].endswith("(your greedy decode, 6 rows)"), lines[1]
    assert "not tampering" not in done.stdout


@pytest.mark.slow
def test_run_of_a_generate_until_profile_is_lm_eval_s_command_line_re_decoded_token_for_token(gsm, tmp_path):
    """`run` of the 3-shot profile: lm_eval's own command line (the task YAML `prepare --lm-eval-files` writes, the
    shots drawn by lm-eval) on the first 3 dev rows, then every generation re-decoded on the independent path: PASS,
    token for token, an adopted folder that `audit --out` passes, its generations in the private folder only."""
    done = run_script(str(VENV_BIN / "sst2-audit"), "run", "--lock", gsm / "gsm.lock.json", "--profile", "gsm",
                      "--cache", gsm / "cache-gsm", "--rows", "3", "--run-name", "g", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("VERDICT: PASS") and "  rows: 3 token for token" in lines, done.stdout
    record = json.loads((tmp_path / "runs" / "g" / "adopted.json").read_text())
    assert record["kind"] == "sst2-audit/adopted-generation" and [len(row["shots"]) for row in record["rows"]] == [3] * 3
    assert "####" in next((tmp_path / "private" / "g" / "lm-eval-out").glob("*/samples_*.jsonl")).read_text()
    assert "####" not in (tmp_path / "runs" / "g" / "lm_eval_samples.public.jsonl").read_text()
    audited = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--out", tmp_path / "runs" / "g", "--lock",
                         gsm / "gsm.lock.json", "--cache", gsm / "cache-gsm", cwd=tmp_path)
    assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr


def test_every_field_of_an_adopted_generation_record_is_held_or_descriptive(gsm, tmp_path, capsys):
    """Each leaf of a structural adoption's adopted.json (its first row) changed alone and the folder audited
    (structural): exit 1 or 2, but for what describes the adopting machine or names its files: exit 4 (a
    generate_until record holds the rescore's row count and its source files as claims). A re-decode's facts claimed
    for a row nobody re-decoded rode along, before this test."""
    from support.plain_runs import ADOPTING_MACHINE, every_adopted_field_held

    done = _adopt(gsm, gsm / "plain3", "gsm", "--run-name", "g", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    counted = every_adopted_field_held(tmp_path / "runs" / "g", gsm / "gsm.lock.json", gsm / "cache-gsm", capsys,
                                       (*ADOPTING_MACHINE, "rescore.rows", "source."),
                                       skip=lambda path: path[:1] == ("rows",) and path[1] > 0)
    assert counted["held"] > 40 and counted["descriptive"] > 20, counted
