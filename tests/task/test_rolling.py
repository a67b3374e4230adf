"""loglikelihood_rolling (issue 60, the third task shape): the rolling window rule and the perplexity metrics against
lm-eval's own on generated cases, and a plain `lm_eval` run of a wikitext-shaped demo of our own (pages generated
here, each marked "Demo") pinned as lm-eval's wikitext task (its YAML, its detokenizer hook and its process_results),
adopted bit for bit, and tampered with. Runs in both releases."""

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from support.builders import built_once, tiny_model_folder
from support.lm_eval_files import adopt_each, misbehaved
from support.paths import RELEASE_LOCK, VENV_BIN
from support.processes import run_cli, run_script
from sst2_audit.formats.releases import installed_version

WORDS = ("demo river stone lantern quiet harbour meadow copper signal orchard window autumn bridge letter sparrow "
         "kettle ladder velvet compass garden").split()
MAX_LENGTH = 64  # the profile's: the demo pages take 1 to 3 rolling windows each


def demo_pages(count: int, seed: int, split: str) -> list:
    """wikitext-shaped rows (`page`, with wikitext's ' @-@ ', ' , ' and heading marks) of our own: a demo."""
    rng, rows = random.Random(seed), []
    for n in range(count):
        paragraphs = [f" = Demo {split} page {n} = \n {' '.join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))}"
                      f" @-@ {rng.randint(1, 99)} , ( a demo ) . \n" for _ in range(rng.randint(1, 3))]
        rows.append({"page": "".join(paragraphs)})
    return rows


# --- the window rule and the metrics, against lm-eval's own ------------------------------------------------------

def test_the_rolling_windows_equal_lm_eval_s_on_generated_token_lists():
    """20,000 generated token lists and max lengths: our windows are lm-eval's get_rolling_token_windows made
    disjoint, exactly, every token predicted once and no model input over max_length."""
    from lm_eval import utils

    from sst2_audit.scoring.rolling import rolling_windows

    rng = random.Random(60)
    for _ in range(20000):
        tokens, length = [rng.randint(3, 50) for _ in range(rng.randint(0, 80))], rng.randint(1, 24)
        theirs = [utils.make_disjoint_window(w) for w in utils.get_rolling_token_windows(tokens, 1, length, 1)]
        ours = rolling_windows(tokens, 1, length)
        assert [(list(w.context_tokens), list(w.continuation_tokens)) for w in ours] == theirs, (tokens, length)
        assert [t for w in ours for t in w.continuation_tokens] == tokens
        assert all(len(w.input_tokens) <= length for w in ours)


def test_the_perplexities_and_counts_equal_lm_eval_s_on_generated_documents():
    """300 generated sets of documents (spaces, newlines, accents): the words and bytes lm-eval's ConfigurableTask
    counts, and its weighted_perplexity and bits_per_byte of the pairs, equal ours exactly."""
    from lm_eval.api.metrics import bits_per_byte, weighted_perplexity
    from lm_eval.api.task import ConfigurableTask

    from sst2_audit.protocol.perplexity import ROLLING_METRICS

    rng, pieces = random.Random(61), ["demo", " ", "\n", "  ", "é", "ß", "\t", "word", ".", "≈"]
    for _ in range(300):
        texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 30))) for _ in range(rng.randint(1, 8))]
        scores = [-rng.uniform(0.1, 500.0) for _ in texts]
        words = [(s, ConfigurableTask.count_words(t)) for s, t in zip(scores, texts)]
        nbytes = [(s, ConfigurableTask.count_bytes(t)) for s, t in zip(scores, texts)]
        assert words == [(s, ROLLING_METRICS["word_perplexity"].count(t)) for s, t in zip(scores, texts)]
        assert nbytes == [(s, ROLLING_METRICS["bits_per_byte"].count(t)) for s, t in zip(scores, texts)]
        assert ROLLING_METRICS["word_perplexity"].aggregate(words) == weighted_perplexity(words)
        assert ROLLING_METRICS["byte_perplexity"].aggregate(nbytes) == weighted_perplexity(nbytes)
        assert ROLLING_METRICS["bits_per_byte"].aggregate(nbytes) == bits_per_byte(nbytes)


def test_loglikelihood_rolling_configs_are_listed_with_their_reasons():
    """`run --list-tasks --output-type loglikelihood_rolling`: wikitext within the protocol (its process_results
    recognised by its source's hash), paloma's 16 (their doc_to_decontamination_query hook is one lm-eval never
    calls) and the pile's; 41 of 0.4.9.2's 51 configs, 56 of 0.4.13's 66. A rolling task with another metric or
    another aggregation is refused with the reason."""
    from sst2_audit.task.support import list_installed, unsupported_reason

    found = {task: reason for task, _, reason in list_installed("*", installed_version(), "loglikelihood_rolling")}
    assert found["wikitext"] is None and found["paloma_c4_en"] is None and found["pile_arxiv"] is None
    assert sum(task.startswith("paloma_") and reason is None for task, reason in found.items()) == 16
    assert (len(found), sum(reason is None for reason in found.values())) == {"0.4.9.2": (51, 41),
                                                                              "0.4.13": (66, 56)}[installed_version()]
    assert "process_results" in found["c4"]  # c4's own process_results is not re-derived
    plain = {"output_type": "loglikelihood_rolling", "doc_to_target": "{{page}}", "test_split": "test"}
    assert unsupported_reason({**plain, "metric_list": [{"metric": "acc"}]}) == (
        "reports metrics ['acc'] (a loglikelihood_rolling task: word_perplexity, byte_perplexity, bits_per_byte, "
        "each once)")
    assert unsupported_reason({**plain, "metric_list": [{"metric": "word_perplexity", "aggregation": "mean"}]}) == (
        "aggregates word_perplexity by 'mean' (re-derived: weighted_perplexity)")
    assert unsupported_reason({**plain, "metric_list": [{"metric": "bits_per_byte",
                                                         "aggregation": "bits_per_byte"}]}) is None


def test_generated_hostile_rolling_lines_are_read_or_refused_as_bad_input_never_anything_else():
    """3,000 generated lines (a valid line with fields dropped, retyped, nested or given odd numbers): the reader gives
    a sample whose numbers are the line's own, or exit 2's InputError; no other exception."""
    from sst2_audit.formats.lm_eval_rolling import read_rolling_sample
    from sst2_audit.util.errors import InputError

    valid = {"doc_id": 3, "doc": {"page": " = Demo = \n a b "}, "target": "= Demo =\na b",
             "arguments": {"gen_args_0": {"arg_0": "= Demo =\na b"}}, "resps": [["-12.5"]], "filtered_resps": ["-12.5"],
             "filter": "none", "metrics": ["word_perplexity", "bits_per_byte"], "doc_hash": "d", "prompt_hash": "p",
             "target_hash": "t", "word_perplexity": [-12.5, 5], "bits_per_byte": [-12.5, 17]}
    odd = [None, True, 1, -1, 1.5, float("nan"), "x", "-12.50", " -12.5", "1e999", [], [[]], {}, {"arg_0": 1},
           [-12.5], [-12.5, 5, 1], [-12.5, "5"], [-12.5, 5.0], ["-12.5"], [["-12.5", "-1.0"]]]
    # (a lone surrogate never reaches this reader: the strict JSON reader refuses the line first, a mutation below)
    rng, read = random.Random(63), 0
    for _ in range(3000):
        line = json.loads(json.dumps(valid))
        for _ in range(rng.randint(1, 3)):
            key = rng.choice(sorted(line) + ["extra"])
            if rng.random() < 0.2:
                line.pop(key, None)
            else:
                line[key] = rng.choice(odd)
        try:
            sample = read_rolling_sample(line, "x.jsonl:1", public=rng.random() < 0.3)
        except InputError:
            continue
        read += 1
        assert sample.score == float(line["resps"][0][0]) and sample.metrics == {
            name: line[name] for name in line["metrics"]}
    assert read > 0  # some changes leave a readable line (an unchecked hash's text, say)


# --- a plain lm_eval run of a wikitext-shaped demo, adopted ------------------------------------------------------

@pytest.fixture(scope="module")
def wiki(release_cache, tmp_path_factory) -> Path:
    """A tiny model and 200 demo pages pinned as wikitext (max_length 64), prepared, and real `lm_eval` console runs
    of its first 6 dev rows: in float32 by the command `prepare --lm-eval-files` prints, run verbatim, and in
    bfloat16: built once per test run."""
    return built_once(tmp_path_factory, f"wiki-{installed_version()}", lambda folder: _build(folder, release_cache))


def _build(folder: Path, release_cache: Path) -> None:
    from support.plain_runs import plain_lm_eval
    model, data = tiny_model_folder(folder / "model", 31, release_cache), folder / "data"
    data.mkdir()
    for split, count, seed in (("train", 4, 1), ("validation", 4, 2), ("test", 200, 3)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in demo_pages(count, seed, split)))
    lock = folder / "wiki.lock.json"
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "wiki", "--task", "wikitext", "--model", model,
                      "--data", data, "--new-lock", lock, "--max-length", str(MAX_LENGTH))
    assert done.returncode == 0 and "rolling windows of max_length 64 tokens" in done.stdout, done.stdout + done.stderr
    done = run_script("prepare.py", "--lock", lock, "--profile", "wiki", "--cache", folder / "cache")
    assert done.returncode == 0, done.stderr
    # the task's files and the exact lm_eval command, from `prepare --lm-eval-files` (the YAML pointed at the cache,
    # the pinned hook file beside it), the command run verbatim as a user runs it in that folder
    done = run_script("prepare.py", "--lock", lock, "--profile", "wiki", "--cache", "cache", "--lm-eval-files",
                      "files", "--lm-eval-rows", "6", cwd=folder)
    assert done.returncode == 0, done.stderr
    command = done.stdout.strip().splitlines()[-1]
    assert command.startswith("env ") and " lm_eval --model hf " in command and "max_length=64" in command
    assert sorted(p.name for p in (folder / "files").iterdir()) == ["preprocess_wikitext.py", "samples.json",
                                                                    "wikitext.yaml"]
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
           "HF_DATASETS_CACHE": str(folder / "datasets-plain")}
    ran = subprocess.run(command.replace("--output_path lm-eval-out", "--output_path plain"), shell=True,
                         capture_output=True, text=True, env=env, cwd=folder)
    assert ran.returncode == 0, ran.stderr[-3000:]
    for name in ("wikitext.yaml", "preprocess_wikitext.py"):  # where plain_lm_eval finds them, for the bfloat16 run
        shutil.copy(folder / "files" / name, folder / name)
    ids = json.loads((folder / "files" / "samples.json").read_text())["wikitext"]
    plain_lm_eval(folder, "bf16", ids, task="wikitext", max_length=MAX_LENGTH, dtype="bfloat16")


def _adopt(wiki: Path, output, *args, cwd: Path):
    return run_script(str(VENV_BIN / "sst2-audit"), "adopt", output, "--lock", wiki / "wiki.lock.json", "--profile",
                      "wiki", "--cache", wiki / "cache", *args, cwd=cwd)


def _lines(folder: Path) -> tuple:
    samples = next(folder.glob("*/samples_*.jsonl"))
    return samples, [json.loads(line) for line in samples.read_text().splitlines()]


def test_a_plain_wikitext_run_is_rescored_bit_for_bit_in_its_rolling_windows_and_its_folder_and_bundle_pass(
        wiki, tmp_path):
    """The run's 6 documents (1 to 3 windows each) rescored on the independent path: each summed log-likelihood
    equals lm-eval's bit for bit, the three perplexities re-derived exactly and the reviewer's numbers lead; the
    adopted folder (no data text) and its bundle audit PASS; --export-eee is refused (exit 2) before any work."""
    done = _adopt(wiki, wiki / "plain", "--run-name", "w", "--bundle", "--results", tmp_path / "results", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0"
    results = json.loads(next((wiki / "plain").glob("*/results_*.json")).read_text())["results"]["wikitext"]
    assert lines[1] == f"wikitext word_perplexity: reported {results['word_perplexity,none']:.3f} (their scores) / " \
                       f"rescored {results['word_perplexity,none']:.3f} (yours, 6 rows)"
    assert "  rows: 6 bit for bit" in lines and "arithmetic: PASS (36 checks)" in lines
    record = json.loads((tmp_path / "runs" / "w" / "adopted.json").read_text())
    assert record["kind"] == "sst2-audit/adopted-rolling" and record["rescored_summary"] == {
        **{name: results[f"{name},none"] for name in ("word_perplexity", "byte_perplexity", "bits_per_byte")},
        "rows": 6}
    assert record["reported"]["bits_per_byte_stderr"] == "N/A" and record["row_classes"]["bit for bit"] == 6
    assert max(row["windows"] for row in record["rows"]) >= 2  # the window rule is exercised, not only one window
    public = (tmp_path / "runs" / "w" / "lm_eval_samples.public.jsonl").read_text()
    assert "Demo" not in public and "demo" not in public  # no data text in the public copy
    for target in (["--out", tmp_path / "runs" / "w"], ["--bundle-file", tmp_path / "results" / "w.tar.gz"]):
        audited = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", wiki / "wiki.lock.json", "--cache",
                             wiki / "cache", *target, cwd=tmp_path)
        assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr
        assert "adopted record: PASS (83 checks)" in audited.stdout.splitlines()
    refused = _adopt(wiki, wiki / "plain", "--export-eee", tmp_path / "eee", cwd=tmp_path)
    assert refused.returncode == 2 and "--export-eee: task wikitext is a loglikelihood_rolling task, whose adoption " \
                                       "is not exported as Every Eval Ever records yet" in refused.stderr


@pytest.mark.parametrize("field", ["rescored_summary", "rescored", "row_class", "counts"])
def test_an_edited_adopted_rolling_record_fails_its_audit(wiki, tmp_path, field):
    """adopted.json edited after the adoption (its summary, a row's rescored score, a row's class, a row's counts):
    the audit of the folder is exit 1 naming what differs."""
    done = _adopt(wiki, wiki / "plain", "--run-name", "e", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    path = tmp_path / "runs" / "e" / "adopted.json"
    record = json.loads(path.read_text())
    row = record["rows"][2]
    if field == "rescored_summary":
        record["rescored_summary"]["word_perplexity"] *= 0.9
    elif field == "rescored":
        row["rescored"] += 1.0
    elif field == "row_class":
        row["row_class"] = "within the bound"
    else:
        row["counts"]["word_perplexity"] += 1
    path.write_text(json.dumps(record))
    audited = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", wiki / "wiki.lock.json", "--cache",
                         wiki / "cache", "--out", tmp_path / "runs" / "e", cwd=tmp_path)
    assert audited.returncode == 1 and audited.stdout.startswith("VERDICT: FAIL (adopted record)"), audited.stdout
    expected = {"rescored_summary": "adopted.json: rescored_summary (re-derived from its rows' rescored scores)",
                "rescored": f"row idx {row['idx']}: rescored", "row_class": f"row idx {row['idx']}: row_class",
                "counts": f"row idx {row['idx']}: counts"}[field]
    assert expected in audited.stdout, audited.stdout


def test_a_float32_run_claiming_bfloat16_adopted_structurally_is_held_to_the_claim_s_bound(wiki, tmp_path):
    """A float32 wikitext run whose results claim bfloat16, adopted without a rescore: its record keeps the claim's
    bound; the folder's audit rescores every document, takes the claim back (their float32 bits) for its own levels
    and holds the record to the bound the record's own rows give: PASS (it FAILed naming the bound)."""
    from support.lm_eval_files import claim_dtype

    shutil.copytree(wiki / "plain", tmp_path / "claims")
    path = next((tmp_path / "claims").glob("*/results_*.json"))
    raw = json.loads(path.read_text())
    claim_dtype(raw, "wikitext", "bfloat16")
    path.write_text(json.dumps(raw))
    done = _adopt(wiki, tmp_path / "claims", "--run-name", "s", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    recorded = json.loads((tmp_path / "runs" / "s" / "adopted.json").read_text())["bound"]["basis"]
    assert recorded.startswith("derived from the dtype the run claims (bfloat16)"), recorded
    audited = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", wiki / "wiki.lock.json", "--cache",
                         wiki / "cache", "--out", tmp_path / "runs" / "s", cwd=tmp_path)
    assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr
    assert "rescored rows of this run, which claims bfloat16, equal the float32 rescore bit for bit" in \
        audited.stdout, audited.stdout


def test_a_structural_adoption_is_rescored_by_the_audit_and_a_class_it_did_not_find_fails(wiki, tmp_path):
    """A structural adoption (nothing rescored) audited with the default rescore: the audit rescores every document
    itself and PASSes; a record that calls such a row rescored (its class, with the counts made to agree), or gives
    such a row a token count, FAILs. Nothing rescored: no tokens derived (lm-eval logs none), none recorded."""
    done = _adopt(wiki, wiki / "plain", "--run-name", "s", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "  prompts not tokenized: lm-eval logs no tokens, and only a rescore reads them" in done.stdout
    assert {(row["tokens"], row["tokens_sha256"], row["windows"]) for row in json.loads(
        (tmp_path / "runs" / "s" / "adopted.json").read_text())["rows"]} == {(None, None, None)}
    audit = [str(VENV_BIN / "sst2-audit"), "audit", "--lock", wiki / "wiki.lock.json", "--cache", wiki / "cache"]
    audited = run_script(*audit, "--out", tmp_path / "runs" / "s", cwd=tmp_path)
    assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr
    path = tmp_path / "runs" / "s" / "adopted.json"
    record = json.loads(path.read_text())
    record["rows"][2]["row_class"] = "bit for bit"
    record["row_classes"].update({"bit for bit": 1, "not drawn": len(record["rows"]) - 1})
    record["rows"][3]["tokens"] = 1
    path.write_text(json.dumps(record))
    audited = run_script(*audit, "--out", tmp_path / "runs" / "s", cwd=tmp_path)
    assert audited.returncode == 1 and (f"row idx {record['rows'][2]['idx']}: row_class (a row the adoption did not "
                                        "rescore): expected 'not drawn', got 'bit for bit'") in audited.stdout, \
        audited.stdout
    assert f"row idx {record['rows'][3]['idx']}: tokens: expected " in audited.stdout, audited.stdout


def _forged(wiki: Path, target: Path, change, results_change=None) -> tuple:
    """A copy of the run with change(lines) applied to its samples (and results_change(results) to its results)."""
    shutil.copytree(wiki / "plain", target)
    samples, lines = _lines(target)
    doc_id = sorted(line["doc_id"] for line in lines)[1]
    samples.write_text("".join(json.dumps(line) + "\n" for line in change(lines, doc_id)))
    if results_change:
        path = next(target.glob("*/results_*.json"))
        path.write_text(json.dumps(results_change(json.loads(path.read_text()))))
    return target, doc_id


def _score(line: dict, value: float) -> dict:
    """One document's log-likelihood changed everywhere lm-eval logs it."""
    return dict(line, resps=[[repr(value)]], filtered_resps=[repr(value)],
                **{name: [value, line[name][1]] for name in line["metrics"]})


def _rederived(folder: Path):
    """The results' perplexities re-derived from the (forged) samples as lm-eval would, so only the rescore can
    tell."""
    from sst2_audit.protocol.perplexity import ROLLING_METRICS

    _, lines = _lines(folder)

    def change(results: dict) -> dict:
        ordered = sorted(lines, key=lambda line: line["doc_id"])
        for name, metric in ROLLING_METRICS.items():
            results["results"]["wikitext"][f"{name},none"] = metric.aggregate([tuple(line[name]) for line in ordered])
        return results
    return change


@pytest.mark.parametrize("what", ["score", "count", "aggregate", "stderr", "mislabel", "max_length"])
def test_a_forged_wikitext_run_is_caught_with_its_row_named(wiki, tmp_path, what):
    """A document's log-likelihood raised by 2 nats everywhere and the perplexities recomputed (the rescore: exit 1,
    the row named); a word count changed (arithmetic); a reported perplexity edited; its stderr "N/A" made a number;
    two documents' doc_ids swapped (identity, the mislabel located); the logged max_length not the profile's (claims:
    the windows would be others)."""
    if what == "score":
        folder, doc_id = _forged(wiki, tmp_path / "f", lambda lines, d: [
            _score(line, float(line["resps"][0][0]) + 2.0) if line["doc_id"] == d else line for line in lines])
        results = next(folder.glob("*/results_*.json"))
        results.write_text(json.dumps(_rederived(folder)(json.loads(results.read_text()))))
        expected = f"row idx {doc_id}: logged log-likelihood"
    elif what == "count":
        folder, doc_id = _forged(wiki, tmp_path / "f", lambda lines, d: [
            dict(line, word_perplexity=[line["word_perplexity"][0], line["word_perplexity"][1] + 1])
            if line["doc_id"] == d else line for line in lines])
        expected = f"doc_id {doc_id}: word_perplexity ([log-likelihood, words]): expected"
    elif what == "max_length":  # a run whose windows were cut at another length
        folder, doc_id = _forged(wiki, tmp_path / "f", lambda lines, d: lines, lambda r: {**r, "max_length": 128})
        expected = "results: max_length (the rolling windows are cut at it): expected 64, got 128"
    elif what in ("aggregate", "stderr"):
        key, value = ("word_perplexity,none", 12.5) if what == "aggregate" else ("bits_per_byte_stderr,none", "0.01")
        folder, doc_id = _forged(wiki, tmp_path / "f", lambda lines, d: lines,
                                 lambda r: {**r, "results": {"wikitext": {**r["results"]["wikitext"], key: value}}})
        expected = f"results: {key}: expected"
    else:
        def swap(lines, d):
            first, second = lines[0]["doc_id"], lines[1]["doc_id"]
            return [dict(line, doc_id={first: second, second: first}.get(line["doc_id"], line["doc_id"]))
                    for line in lines]
        folder, doc_id = _forged(wiki, tmp_path / "f", swap)
        expected = "(mislabelled: lm-eval #4084)"
    done = _adopt(wiki, folder, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: FAIL") and expected in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


def test_a_bfloat16_run_is_within_drift_never_a_pass_and_a_forgery_inside_the_bound_is_not_one_either(wiki, tmp_path):
    """The bfloat16 run: every document within the bound its claimed dtype gives (exit 4, the dtype named as the
    likely cause), the reviewer's float32 perplexities leading. Every document then raised by 1 nat (within the bound)
    and the perplexities recomputed (a forger spending the bound on a better number): still exit 4 with the reviewer's
    numbers unchanged, never a PASS."""  # every bound is at least 1.038 nats (a bfloat16 claim's fit, one token)
    done = _adopt(wiki, wiki / "bf16", "--out", tmp_path / "a", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: 6 rescored row(s) within the bound")
    assert "likely causes the run's files show: the dtype the run claims, bfloat16" in done.stdout
    plain = _adopt(wiki, wiki / "plain", "--out", tmp_path / "b", cwd=tmp_path)
    mine = [line.split(" / ")[1] for line in plain.stdout.splitlines()[1:4]]
    assert [line.split(" / ")[1] for line in done.stdout.splitlines()[1:4]] == mine
    folder = tmp_path / "f"
    shutil.copytree(wiki / "bf16", folder)
    samples, lines = _lines(folder)
    samples.write_text("".join(json.dumps(_score(line, float(line["resps"][0][0]) + 1.0)) + "\n" for line in lines))
    results = next(folder.glob("*/results_*.json"))
    results.write_text(json.dumps(_rederived(folder)(json.loads(results.read_text()))))
    forged = _adopt(wiki, folder, "--out", tmp_path / "c", cwd=tmp_path)
    assert forged.returncode == 4 and "6 rescored row(s) within the bound" in forged.stdout, forged.stdout
    assert [line.split(" / ")[1] for line in forged.stdout.splitlines()[1:4]] == mine  # the reviewer's own numbers


def _mutations(wiki: Path, base: Path, count: int) -> list:
    """count generated mutations of the run: a field dropped, retyped or changed, a digit of a logged number changed,
    a line deleted, duplicated or cut, a lone surrogate in a text, a results number edited."""
    rng, cases = random.Random(62), []
    for number in range(count):
        folder = base / f"m{number}"
        shutil.copytree(wiki / "plain", folder)
        samples, lines = _lines(folder)
        results_path = next(folder.glob("*/results_*.json"))
        results, line = json.loads(results_path.read_text()), rng.choice(lines)
        kind = number % 8
        if kind == 0:
            line.pop(rng.choice(sorted(line)))
        elif kind == 1:
            line[rng.choice(sorted(line))] = rng.choice([None, 3, "x", [], {}, 1.5])
        elif kind == 2:
            text = line["resps"][0][0]
            at = rng.choice([i for i, c in enumerate(text) if c.isdigit()])
            line["resps"][0][0] = text[:at] + str((int(text[at]) + rng.randint(1, 9)) % 10) + text[at + 1:]
        elif kind == 3:
            name = rng.choice(line["metrics"])
            line[name] = [line[name][0], line[name][1] + rng.choice([-1, 1, 1000])]
        elif kind == 4:
            lines.append(dict(line)) if rng.random() < 0.5 else lines.remove(line)
        elif kind == 5:
            line["doc"] = {"page": line["doc"]["page"] + "\ud800"}
        elif kind == 6:
            key = rng.choice([k for k in results["results"]["wikitext"] if "," in k])  # a "metric,filter" number
            results["results"]["wikitext"][key] = rng.choice([v for v in (0.5, "N/A", None, 1e308)
                                                              if v != results["results"]["wikitext"][key]])
        else:
            line["doc_id"] = rng.choice([line["doc_id"] + 1, -1, 10 ** 6, 0])
        samples.write_text("".join(json.dumps(one) + "\n" for one in lines))
        results_path.write_text(json.dumps(results))
        cases.append(str(folder))
    return cases


@pytest.mark.slow
def test_generated_mutations_of_a_wikitext_run_are_refused_or_failed_never_passed(wiki, tmp_path):
    """64 generated mutations of the run, adopted in one process: every one exit 1 (a check failed) or 2 (bad
    input), with no traceback and no internal error."""
    cases = _mutations(wiki, tmp_path, 64)
    codes = adopt_each(["--profile=wiki", *cases], wiki / "wiki.lock.json", wiki / "cache", tmp_path)
    assert len(codes) == 64
    assert misbehaved(codes) == {}


def test_run_of_a_rolling_profile_is_lm_eval_s_command_line_adopted_bit_for_bit(wiki, tmp_path):
    """`run` of the profile: lm_eval's own command line (the files `prepare --lm-eval-files` writes) on its first 4 dev
    rows in a process of its own, then every row rescored: PASS, its documents bit for bit, an adopted folder that
    `audit --out` passes, lm-eval's output with the data text in the private folder only; a folder that exists and
    the options of the two-path run are refused before any work (exit 2)."""
    base = ["--lock", wiki / "wiki.lock.json", "--profile", "wiki", "--cache", wiki / "cache"]
    done = run_script(str(VENV_BIN / "sst2-audit"), "run", *base, "--rows", "4", "--run-name", "r", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0"
    assert "  rows: 4 bit for bit" in lines and lines[-1].startswith("adopted: runs/r (audit it: "), done.stdout
    assert "[official path] lm_eval on the first 4 dev rows (hash order) in its own process" in done.stderr
    private = tmp_path / "private" / "r"
    assert sorted(p.name for p in private.iterdir()) == ["datasets", "lm-eval-files", "lm-eval-out", "lm_eval.command",
                                                         "lm_eval.log"]
    assert (private / "lm_eval.command").read_text().startswith("env ")
    assert "Demo" in next((private / "lm-eval-out").glob("*/samples_wikitext_*.jsonl")).read_text()
    assert not any("Demo" in f.read_text() for f in (tmp_path / "runs" / "r").iterdir())
    # nor a path of this machine: lm-eval's output sat in private/r/ under tmp_path, the cache under the fixture's
    assert not any(str(tmp_path) in f.read_text() or str(wiki) in f.read_text()
                   for f in (tmp_path / "runs" / "r").iterdir())
    record = json.loads((tmp_path / "runs" / "r" / "adopted.json").read_text())
    assert record["kind"] == "sst2-audit/adopted-rolling" and record["row_classes"]["bit for bit"] == 4
    reviewer = ["--lock", wiki / "wiki.lock.json", "--cache", wiki / "cache"]
    audited = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--out", tmp_path / "runs" / "r", *reviewer,
                         "--bundle", cwd=tmp_path)  # packed after the audit passed, as a two-path run's is
    assert audited.returncode == 0 and audited.stdout.startswith("VERDICT: PASS"), audited.stdout + audited.stderr
    assert audited.stdout.splitlines()[-1] == "bundle: results/r.tar.gz"
    unpacked = run_script(str(VENV_BIN / "sst2-audit"), "audit", "--bundle-file", "results/r.tar.gz", *reviewer,
                          cwd=tmp_path)
    assert unpacked.returncode == 0 and "adopted record: PASS (61 checks)" in unpacked.stdout, unpacked.stdout
    for refused in (["--bundle-file", "results/r.tar.gz", "--bundle"], ["--out", tmp_path / "runs" / "r",
                                                                          "--bundle"]):
        done = run_cli("audit.py", *refused, *reviewer, "--results", tmp_path / "results")
        assert done.returncode == 2, done.stderr  # a bundle is not packed again; nor one that exists
    again = run_script(str(VENV_BIN / "sst2-audit"), "run", *base, "--smoke", "--run-name", "r", cwd=tmp_path)
    assert again.returncode == 2 and "--out runs/r already exists; a finished run is never overwritten" in again.stderr
    for option in ("--unsorted-ids", "--quiet", "--json"):
        refused = run_cli("run.py", *base, "--smoke", option)
        assert refused.returncode == 2 and refused.stderr.startswith(
            f"error: {option}: task wikitext is a loglikelihood_rolling task, whose run is lm_eval's own command "
            "line adopted with every row rescored"), refused.stderr


def test_a_run_terminated_while_lm_eval_runs_leaves_nothing_and_its_child_goes_with_it(wiki, tmp_path):
    """A plain `kill` (SIGTERM) of `run` while its lm_eval process starts or works (0, 10 ms and 1 s after its log
    opens: the first lands inside Popen on most tries, which once left the child running): exit 143, the lm_eval
    child ended too, and no private or public folder left to block a rerun of the same name."""
    import signal
    import time

    for delay in (0, 0.01, 1.0):
        argv = [str(VENV_BIN / "sst2-audit"), "run", "--lock", str(wiki / "wiki.lock.json"), "--profile", "wiki",
                "--cache", str(wiki / "cache"), "--smoke", "--run-name", "t"]
        process = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        log = tmp_path / "private" / "t" / "lm_eval.log"
        while not log.is_file() and process.poll() is None:
            time.sleep(0.001)
        time.sleep(delay)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
        assert process.returncode == 143, (delay, out + err)
        assert "terminated (SIGTERM); nothing half-written was kept" in err
        assert not (tmp_path / "private" / "t").exists() and not (tmp_path / "runs").exists()
        marker = str(tmp_path / "private" / "t").encode()  # lm_eval's arguments name its files there
        alive = []
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                alive += [cmdline] if marker in cmdline.read_bytes() else []
            except OSError:  # a process that ended while read
                pass
        assert alive == [], delay


def test_every_field_of_an_adopted_rolling_record_is_held_or_descriptive(wiki, tmp_path, capsys):
    """Each leaf of a structural adoption's adopted.json (its first row) changed alone and the folder audited
    (structural): exit 1 or 2, but for what describes the adopting machine or names its files: exit 4."""
    from support.plain_runs import ADOPTING_MACHINE, every_adopted_field_held

    done = _adopt(wiki, wiki / "plain", "--run-name", "w", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    counted = every_adopted_field_held(tmp_path / "runs" / "w", wiki / "wiki.lock.json", wiki / "cache", capsys,
                                       (*ADOPTING_MACHINE, "rescore.rows", "source."),
                                       skip=lambda path: path[:1] == ("rows",) and path[1] > 0)
    assert counted["held"] > 30 and counted["descriptive"] > 20, counted
