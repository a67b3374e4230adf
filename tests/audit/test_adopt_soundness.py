"""A verdict that drift cannot buy (issue 58) and the row set as a claim (issue 65, 1b), on real `lm_eval` console
runs of a tiny model over the embedded demo data (tests/audit/test_adopt.py's runs): forgeries that spend the old bound,
the reviewer's own number printed, the dtype claim held to its evidence, rows dropped or chosen, edited records,
lone surrogates; and generated forgeries judged by the same functions the rescore level calls."""

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from support.builders import _exclusive, built_once
from support.paths import LOCK, RELEASE_LOCK, TEST_CACHE, VENV_BIN
from support.processes import run_script
from sst2_audit.formats.releases import installed_version
from support.lm_eval_files import claim_dtype, rehash
from support.plain_runs import copy_sorted, build_plain_runs, ROWS
from support.json_paths import set_at, string_paths

# this environment's release's lock (.ci/run runs this file under 0.4.9.2 and 0.4.13)


@pytest.fixture(scope="session")
def release_cache() -> Path:
    """The embedded cache, prepared (or re-verified) under this environment's release's lock (as test_leaderboard)."""
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--profile", "embedded", "--cache",
                          TEST_CACHE / "embedded")
    assert done.returncode == 0, done.stderr
    return TEST_CACHE / "embedded"


@pytest.fixture(scope="session")
def plain(release_cache, tmp_path_factory) -> Path:
    """tests/audit/test_adopt.py's real lm_eval runs (sorted, unsorted, bfloat16) under this environment's release: the
    same folder as that file's fixture under 0.4.9.2."""
    name = "plain-lm-eval" if RELEASE_LOCK == LOCK else f"plain-lm-eval-{installed_version()}"
    return built_once(tmp_path_factory, name, lambda folder: build_plain_runs(folder, release_cache, RELEASE_LOCK))


def adopt(plain: Path, output, *args, cwd: Path):
    return run_script(str(VENV_BIN / "sst2-audit"), "adopt", output, "--lock", plain / RELEASE_LOCK.name, "--profile",
                      "embedded", "--cache", plain / "cache", *args, cwd=cwd)


def audit(plain: Path, *args, cwd: Path):
    return run_script(str(VENV_BIN / "sst2-audit"), "audit", "--lock", plain / RELEASE_LOCK.name, "--cache",
                      plain / "cache", *args, cwd=cwd)

OLD_BOUND = (2 ** -3, 2 ** -3)  # the bfloat16 bound before issue 58: R * |score| + A nats per candidate


def _rows(samples: Path) -> list:
    return [json.loads(line) for line in samples.read_text().splitlines()]


def _write(samples: Path, rows: list) -> None:
    samples.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def _restate(results: Path, samples: Path, rows: list, dtype: str | None = None) -> dict:
    """The results file made consistent with edited rows, as a forger makes it: acc, its stderr, n-samples, the task
    hash; and the dtype claimed everywhere the run says it."""
    from sst2_audit.protocol.rules import accuracy, accuracy_stderr

    _write(samples, rows)
    raw = json.loads(results.read_text())
    values = [row["acc"] for row in sorted(rows, key=lambda r: r["doc_id"])]
    raw["results"]["sst2"]["acc,none"], raw["results"]["sst2"]["acc_stderr,none"] = (accuracy(values),
                                                                                     accuracy_stderr(values))
    if dtype:
        claim_dtype(raw, "sst2", dtype)
    results.write_text(json.dumps(raw))
    rehash(results, samples)
    return json.loads(results.read_text())


def _move_toward_gold(row: dict, fraction: float) -> None:
    """Both candidate scores of a wrongly predicted row moved toward the gold answer by `fraction` of the old bound,
    the per-sample acc and the filtered copy following."""
    gold = int(row["target"])
    scores = [float(resp[0][0]) for resp in row["resps"]]
    for k, score in enumerate(scores):
        step = fraction * (OLD_BOUND[0] * abs(score) + OLD_BOUND[1])
        scores[k] = score + step if k == gold else score - step
    row["resps"] = [[[repr(s), "False"]] for s in scores]
    row["filtered_resps"] = [[repr(s), "False"] for s in scores]
    row["acc"] = 1.0 if max(range(len(scores)), key=lambda k: (scores[k], -k)) == gold else 0.0


def test_the_forgery_that_spent_the_bfloat16_bound_fails_and_the_reviewer_s_number_leads(plain, tmp_path):
    """Issue 58's forgery: a float32 run relabelled bfloat16, every wrong row's two scores moved toward the gold
    answer by 90 % of the old bound, the numbers and the task hash made consistent: exit 1, with the reviewer's
    accuracy printed right under the verdict beside the reported 1.000."""
    results, samples = copy_sorted(plain, tmp_path / "out")
    rows = _rows(samples)
    honest = sum(row["acc"] for row in rows) / len(rows)
    wrong = [row["doc_id"] for row in rows if row["acc"] == 0.0]
    for row in rows:
        if row["acc"] == 0.0:
            _move_toward_gold(row, 0.9)
    raw = _restate(results, samples, rows, "bfloat16")
    assert raw["results"]["sst2"]["acc,none"] == 1.0 and len(wrong) >= 5
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 1 and lines[0].startswith("VERDICT: FAIL (rescore (all rows, seed 1)); exit 1"), done.stdout
    assert lines[1] == f"sst2 acc: reported 1.000 (their scores) / rescored {honest:.3f} (yours, {ROWS} rows)"
    # the rows no one moved equal the float32 rescore bit for bit: the bfloat16 claim is not taken
    assert f"bound: |logged - rescored| <= 0.0001 (derived from float32: {ROWS - len(wrong)} of {ROWS} rescored rows " \
           "of this run, which claims bfloat16, equal the float32 rescore bit for bit" in done.stdout
    for idx in wrong:
        assert f"  - row idx {idx}: logged scores " in done.stdout
    assert not (tmp_path / "runs").exists()


def _perturbed(rows: list, rng: random.Random, scale: float) -> None:
    """Every score moved by a little noise, as reduced precision moves it (so no row stays bit for bit)."""
    for row in rows:
        scores = [float(resp[0][0]) + rng.uniform(-scale, scale) for resp in row["resps"]]
        row["resps"] = [[[repr(s), "False"]] for s in scores]
        row["filtered_resps"] = [[repr(s), "False"] for s in scores]
        gold = int(row["target"])
        row["acc"] = 1.0 if max(range(len(scores)), key=lambda k: (scores[k], -k)) == gold else 0.0


def test_flips_that_all_run_toward_gold_fail_by_the_sign_test_even_within_the_band(plain, tmp_path):
    """Within the new bound: every score perturbed a little (no row bit for bit), and each wrong row whose own margin
    lies within the near-tie band flipped toward gold; with the reviewer's --bound wide enough to keep each row within
    it, the flips' directions alone FAIL the run (exact sign test), and the direction counts are named."""
    results, samples = copy_sorted(plain, tmp_path / "out")
    rows = _rows(samples)
    _perturbed(rows, random.Random(3), 1e-3)
    wrong = [row for row in rows if row["acc"] == 0.0]
    for row in wrong:
        _move_toward_gold(row, 1.0)
    _restate(results, samples, rows, "bfloat16")
    done = adopt(plain, tmp_path / "out", "--seed", "1", "--bound", "3", cwd=tmp_path)
    assert done.returncode == 1, done.stdout
    assert f"  acc flips: {len(wrong)} toward gold, 0 away from gold, " in done.stdout
    p = 2 * 0.5 ** len(wrong)
    assert (f"  - prediction flips acc: {len(wrong)} of {len(wrong)} flips toward gold against 0: exact two-sided sign "
            f"test p = {p:.3g} < 0.01") in done.stdout


def test_honest_bfloat16_run_adopts_within_drift_with_the_reviewer_s_number(plain, tmp_path):
    done = adopt(plain, plain / "bf16", "--run-name", "bf16", "--seed", "1", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 4, done.stdout + done.stderr
    assert lines[0].startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: 16 rescored row(s) within the bound "
                               "|logged - rescored| <= 0.0078125 * |rescored| + 1.038 * sqrt(tokens), a margin's drift <= "
                               "0.0078125 * (|a| + |b|) + 0.302 * sqrt(tokens) (derived from the dtype the run claims "
                               "(bfloat16), fitted to measured honest drift x2)")
    assert "consistent with rounding" in lines[0] and "not tampering" not in done.stdout
    # the causes the run's own files show (issue 60): here its dtype; attention and device are the lock's
    assert lines[0].endswith("consistent with rounding; likely causes the run's files show: the dtype the run "
                             "claims, bfloat16; exit 4"), lines[0]
    record = json.loads((tmp_path / "runs" / "bf16" / "adopted.json").read_text())
    mine = record["rescored_summary"]["acc"]
    assert lines[1] == (f"sst2 acc: reported {record['reported']['acc']:.3f} (their scores) / rescored {mine:.3f} "
                        "(yours, 16 rows)")
    assert record["bound"]["per_token"] == 1.038 and record["row_set"]["rule"].startswith("the profile's dev rows")
    done = audit(plain, "--out", "runs/bf16", cwd=tmp_path)
    assert done.returncode == 4 and "adopted record: PASS" in done.stdout, done.stdout
    shutil.copytree(plain / "bf16", tmp_path / "sdpa")  # the same run, said to be made with transformers' default
    results = next((tmp_path / "sdpa").glob("*/results_*.json"))
    raw = json.loads(results.read_text())
    raw["config"]["model_args"] = str(raw["config"]["model_args"]).replace(",attn_implementation=eager", "")
    raw["configs"]["sst2"]["metadata"].pop("attn_implementation")  # lm-eval merges model_args into the metadata
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "sdpa", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 4 and done.stdout.splitlines()[0].endswith(
        "likely causes the run's files show: attention None (model_args attn_implementation; unset: transformers "
        "picks sdpa) where your lock computes 'eager'; the dtype the run claims, bfloat16; exit 4"), done.stdout


def test_an_edited_rescored_number_or_row_class_fails_the_folder_and_the_bundle(plain, tmp_path):
    done = adopt(plain, plain / "sorted", "--run-name", "kept", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    folder = tmp_path / "runs" / "kept"
    for edit, named in ((lambda r: r["rescored_summary"].__setitem__("acc", 1.0),
                         "adopted.json: rescored_summary (re-derived from its rows' rescored scores)"),
                        (lambda r: r["row_classes"].__setitem__("bit for bit", 99),
                         "adopted.json: row_classes (counted from its rows)"),
                        (lambda r: r["row_set"].__setitem__("rule", "the whole split (264 rows)"),
                         "adopted.json: row_set")):
        copy = tmp_path / "edited"
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(folder, copy)
        raw = json.loads((copy / "adopted.json").read_text())
        edit(raw)
        (copy / "adopted.json").write_text(json.dumps(raw))
        done = audit(plain, "--out", str(copy), cwd=tmp_path)
        assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (adopted record); exit 1"), done.stdout
        assert named in done.stdout
    # the same edit inside a bundle whose SHA256SUMS was rewritten to match
    from sst2_audit.bundle import adopted as adopted_bundle

    raw = json.loads((folder / "adopted.json").read_text())
    raw["rescored_summary"]["acc"] = 1.0
    (folder / "adopted.json").write_text(json.dumps(raw))
    files = {name: (folder / name).read_bytes() for name in ("lm_eval_results.json", "lm_eval_samples.public.jsonl",
                                                             "adopted.json")}
    from sst2_audit.formats.lock import load_lock

    bundle = adopted_bundle.pack(folder, files, "kept", load_lock(plain / RELEASE_LOCK.name), plain / "cache",
                                 tmp_path / "results")
    done = audit(plain, "--bundle-file", str(bundle), cwd=tmp_path)
    assert done.returncode == 1 and "adopted.json: rescored_summary (re-derived from its rows' rescored scores)" in \
        done.stdout, done.stdout


@pytest.mark.parametrize("how", [("--structural",), ("--rescore", "4")], ids=["no-row", "four-rows"])
def test_a_float32_run_claiming_bfloat16_is_held_to_the_bound_its_own_adoption_gave(plain, tmp_path, how):
    """A float32 run whose results claim bfloat16: its adoption that rescored no row keeps the claim's bound, one that
    drew 4 rows takes the claim back in the words of its 4; the audit of the folder rescores all 16, takes the claim
    back in the words of all 16, and holds the record to the bound the record's own rows give: PASS (it was FAIL,
    naming the bound, though nothing in the folder was false)."""
    results, samples = copy_sorted(plain, tmp_path / "out")
    _restate(results, samples, _rows(samples), "bfloat16")
    done = adopt(plain, tmp_path / "out", "--run-name", "kept", "--seed", "1", *how, cwd=tmp_path)
    assert done.returncode == 4 and (tmp_path / "runs" / "kept" / "adopted.json").exists(), done.stdout
    recorded = json.loads((tmp_path / "runs" / "kept" / "adopted.json").read_text())["bound"]["basis"]
    assert recorded.startswith("derived from float32: 4 of 4 rescored rows" if how[0] == "--rescore" else
                               "derived from the dtype the run claims (bfloat16)"), recorded
    again = audit(plain, "--out", str(tmp_path / "runs" / "kept"), cwd=tmp_path)
    assert again.returncode == 0 and again.stdout.startswith("VERDICT: PASS"), again.stdout
    assert f"(derived from float32: {ROWS} of {ROWS} rescored rows of this run, which claims bfloat16, equal the " \
           "float32 rescore bit for bit" in again.stdout, again.stdout


def test_a_dropped_wrong_row_with_numbers_and_hash_recomputed_is_not_a_pass(plain, tmp_path):
    """Issue 65's cherry-pick: one wrongly predicted row's line deleted, acc, stderr, n-samples.effective and the task
    hash recomputed: the run contradicts its release's own count (FAIL); left as lm-eval 0.4.9.2 writes it, the
    row set matches no rule and the verdict names the missing doc_id (exit 4, never PASS)."""
    from sst2_audit.formats.releases import release_of
    from sst2_audit.formats.lock import load_lock

    results, samples = copy_sorted(plain, tmp_path / "out")
    rows = _rows(samples)
    dropped = next(row["doc_id"] for row in rows if row["acc"] == 0.0)
    kept = [row for row in rows if row["doc_id"] != dropped]
    raw = _restate(results, samples, kept)
    scored = release_of(load_lock(plain / RELEASE_LOCK.name).evaluator.version).n_samples_effective_is_scored
    raw["n-samples"]["sst2"]["effective"] = len(kept) if not scored else 264
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (claims); exit 1"), done.stdout
    assert "results: n-samples.sst2.effective" in done.stdout
    raw["n-samples"]["sst2"]["effective"] = 264 if not scored else len(kept)
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "out", "--seed", "1", "--run-name", "picked", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 4, done.stdout
    assert lines[0].startswith(f"VERDICT: ROWS CHOSEN BY THE RUN, NOT RECOGNISED: rows: {ROWS - 1} of 264 logged match "
                               "no rule a reviewer recognises"), lines[0]
    assert f"nearest: the profile's dev rows in hash order, the first {ROWS}, 1 missing (doc_ids [{dropped}])" in lines[0]
    assert lines[1].endswith(f"(yours, {ROWS - 1} rows, over the {ROWS - 1} of 264 rows the run chose)"), lines[1]
    record = json.loads((tmp_path / "runs" / "picked" / "adopted.json").read_text())
    assert record["row_set"]["missing"] == [dropped] and record["row_set"]["rule"] is None


def test_a_limit_run_is_recognised_by_its_rule(plain, tmp_path):
    """A real `lm_eval --limit 6` run: its first 6 rows, the rule named."""
    folder = tmp_path / "work"
    folder.mkdir()
    for name in ("cache", "sst2.yaml"):
        (folder / name).symlink_to(plain / name)
    out = _limit_run(folder)
    done = adopt(plain, out, "--seed", "1", cwd=tmp_path)
    assert done.returncode in (0, 4) and "  rows: 6 of 264, lm-eval's --limit 6: its first 6 rows" in done.stdout, \
        done.stdout


def _limit_run(folder: Path) -> Path:
    import os

    from support.processes import lm_eval_console

    out = folder / "limit"
    argv = ["--model", "hf", "--model_args",
            f"pretrained={folder / 'cache' / 'model'},dtype=float32,max_length=512,attn_implementation=eager",
            "--tasks", str(folder / "sst2.yaml"), "--limit", "6", "--log_samples", "--output_path", str(out),
            "--device", "cpu", "--batch_size", "1", "--seed", "94"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(folder / "datasets")}
    done = lm_eval_console(argv, env, folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_lone_surrogate_in_any_string_field_is_bad_input(plain, tmp_path, seed):
    """Generated: a lone surrogate escape written into a random string field (or key) of a random sample line or of
    the results file: exit 2, naming the file, the line and the field; never exit 3."""
    results, samples = copy_sorted(plain, tmp_path / "out")
    rng = random.Random(seed)
    target = samples if seed % 3 else results
    lines = target.read_text().splitlines() if target == samples else [target.read_text()]  # results: one value
    number = rng.randrange(len(lines))
    value = json.loads(lines[number])
    path = rng.choice(list(string_paths(value)))
    lone = rng.choice(("\\ud800", "\\udfff", "\\udc00x", "a\\ud83d"))
    set_at(value, path, "\u0000SURROGATE\u0000")
    text = json.dumps(value, ensure_ascii=False)
    lines[number] = text.replace("\\u0000SURROGATE\\u0000", lone)
    target.write_text("\n".join(lines) + "\n")
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 2, (path, done.stdout, done.stderr)
    where = f"{target}:{number + 1}" if target == samples else f"{target}"
    assert where in done.stderr and "a lone surrogate escape" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


# --- generated forgeries, judged by the functions the rescore level calls ---------------------------------------

def _questions(plain: Path, tmp_path: Path) -> list:
    """The 16 rows of the real float32 run as the rescore level holds them (their float32 rescore, token counts,
    choice lengths, labels), from its adopted.json."""
    from sst2_audit.formats.adopted_read import read_adopted

    done = adopt(plain, plain / "sorted", "--run-name", "base", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    return read_adopted(tmp_path / "runs" / "base" / "adopted.json").questions


def test_generated_forgeries_that_flip_one_way_never_pass_and_honest_noise_never_fails(plain, tmp_path):
    """240 generated forgeries: a random subset of the wrong rows moved toward gold by a random fraction of the old
    bound, every score perturbed by honest-sized noise, claims bfloat16 or float16. None whose flips run one way
    beyond the sign test's threshold is accepted; every accepted one gains at most the rows whose own margin lies
    within the near-tie band. 60 honest-noise runs (no move) are never a FAIL."""
    import copy

    from sst2_audit.audit.adopt_scores import bound_for, candidate_bounds, flip_test, margin_bound, row_class
    from sst2_audit.protocol.stats import mcnemar_exact
    from sst2_audit.formats.adopted import FLIP, OUT

    base = _questions(plain, tmp_path)
    rng, accepted, failed, honest_fails = random.Random(58), 0, 0, 0
    for number in range(300):
        forged = number < 240
        dtype = rng.choice(("bfloat16", "float16"))
        bound = bound_for(None, dtype, False, "")
        questions, flips, out = copy.deepcopy(base), [], False
        wrong = [q for q in questions if q.logged_metrics["acc"] == 0.0]
        moved = set(q.idx for q in rng.sample(wrong, rng.randint(1, len(wrong)))) if forged else set()
        for q in questions:
            q.rescored = list(q.logged)  # the reviewer's float32 rescore; the logged copy is the forger's
            # honest-shaped noise: a common shift within 0.9 of the candidate bound, each candidate's own within 0.4
            # of half the margin's bound (rounding moves a context's candidates largely together)
            common = 0.9 * rng.uniform(-1, 1) * min(candidate_bounds(q, bound)) / 2
            own = [0.4 * rng.uniform(-1, 1) * margin_bound(q, bound, 0, 1) / 2 for _ in q.rescored]
            logged = [s + common + e for s, e in zip(q.rescored, own)]
            if q.idx in moved:
                fraction = rng.uniform(0.05, 1.0)
                logged = [s + (1 if k == q.label else -1) * fraction * (OLD_BOUND[0] * abs(s) + OLD_BOUND[1])
                          for k, s in enumerate(logged)]
            q.logged = logged
            found, _, row_flips = row_class(q, bound, ["acc"])
            out |= found == OUT
            flips += row_flips if found == FLIP else []
        test = flip_test(flips)
        verdict_fails = out or bool(test.one_way)
        toward = sum(f.direction == "toward gold" for f in flips)
        away = sum(f.direction == "away from gold" for f in flips)
        if forged:
            failed += verdict_fails
            if not verdict_fails:
                accepted += 1
                assert mcnemar_exact(toward, away) >= 0.01
                assert all(f.margin <= f.band for f in flips)
        else:
            honest_fails += verdict_fails
    assert honest_fails == 0
    assert failed + accepted == 240 and failed > 200, (failed, accepted)


def test_the_fitted_bound_grows_with_the_square_root_of_the_tokens():
    from sst2_audit.audit.adopt_scores import bound_for, candidate_bounds, margin_bound
    from sst2_audit.formats.adopted import AdoptedQuestion

    bound = bound_for(None, "bfloat16", False, "")
    question = AdoptedQuestion(0, 0, "", "", "", 0, [1, 100], "", [1, 1], [], [0.0, 0.0], [-10.0, -200.0], {}, "", None)
    small, large = candidate_bounds(question, bound)
    assert small == 2 ** -7 * 10 + 1.038 * 1 and large == 2 ** -7 * 200 + 1.038 * 10
    assert margin_bound(question, bound, 0, 1) == 2 ** -7 * 210 + 0.302 * 10
    assert math.isclose(bound_for(None, "float32", False, "").absolute, 1e-4)


ARC = "embedded-arc-challenge-25shot"


@pytest.fixture(scope="module")
def arc(tiny_demos, tmp_path_factory) -> Path:
    """The ARC-shaped demo profile (25 shots, acc and acc_norm) on the tiny model: its cache, and a real float32
    `lm_eval` run of its first 8 dev rows."""
    from support.builders import prepare_cache
    from support.plain_runs import task_yaml, plain_lm_eval
    folder = tmp_path_factory.mktemp("arc")
    cache = prepare_cache(tiny_demos, ARC, folder)
    ids = task_yaml(tiny_demos, cache, folder / "arc_challenge.yaml", profile=ARC)
    plain_lm_eval(folder, "plain", sorted(ids[:8]), task="arc_challenge", num_fewshot=25, max_length=4096)
    return folder


@pytest.mark.skipif(RELEASE_LOCK != LOCK, reason="demos.lock.json pins lm-eval 0.4.9.2; the flip rule is the same code")
def test_an_acc_norm_only_flip_is_listed(arc, tiny_demos, tmp_path):
    """The float32 ARC run relabelled bfloat16, every row's scores moved a little, and in one row the candidate
    acc_norm predicts lowered until acc_norm predicts another choice while acc keeps its own; under the reviewer's
    --bound 5 the row is within the bound: the acc_norm flip is listed with its band (exit 4), acc has none, and both
    metrics' numbers stand under the verdict (before issue 58 such a flip was counted as no flip at all)."""
    from sst2_audit.protocol.rules import accuracy, accuracy_stderr, predict, predict_norm

    shutil.copytree(arc / "plain", tmp_path / "out")
    results, samples = next((tmp_path / "out").glob("*/results_*.json")), next((tmp_path / "out").glob("*/samples_*"))
    rows, target = _rows(samples), None
    for row in rows:
        scores = [float(resp[0][0]) - 1e-3 for resp in row["resps"]]
        lengths = [len(args["arg_1"]) - 1 for args in row["arguments"].values()]  # " " + choice
        if target is None:
            chosen = predict_norm(scores, lengths)
            for step in range(1, 91):
                moved = [x - step * 0.05 if k == chosen else x for k, x in enumerate(scores)]
                if predict_norm(moved, lengths) != chosen and predict(moved) == predict(scores):
                    scores, target = moved, row["doc_id"]
                    break
        row["resps"] = [[[repr(x), resp[0][1]]] for x, resp in zip(scores, row["resps"])]
        row["filtered_resps"] = [[repr(x), resp[0][1]] for x, resp in zip(scores, row["resps"])]
        row["acc_norm"] = float(predict_norm(scores, lengths) == int(row["target"]))
    assert target is not None
    samples.write_text("".join(json.dumps(row) + "\n" for row in rows))
    raw = json.loads(results.read_text())
    values = [row["acc_norm"] for row in sorted(rows, key=lambda r: r["doc_id"])]
    task = raw["results"]["arc_challenge"]
    task["acc_norm,none"], task["acc_norm_stderr,none"] = accuracy(values), accuracy_stderr(values)
    claim_dtype(raw, "arc_challenge", "bfloat16")
    results.write_text(json.dumps(raw))
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", tmp_path / "out", "--lock", tiny_demos, "--profile", ARC,
                      "--cache", arc / "cache", "--seed", "1", "--bound", "5", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 4, done.stdout + done.stderr
    assert lines[0].startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: 8 rescored row(s) within the bound "
                               "|logged - rescored| <= 5 (the reviewer's --bound 5 nats)"), lines[0]
    assert "1 of them prediction flips at near ties (acc_norm flips: " in lines[0]
    assert lines[1].startswith("arc_challenge acc: reported ") and lines[2].startswith("arc_challenge acc_norm: reported ")
    assert any(line.startswith(f"  flip: row idx {target} (acc_norm): logged predicts ") for line in lines), done.stdout
    assert not any(line.startswith(f"  flip: row idx {target} (acc):") for line in lines)


@pytest.mark.slow
@pytest.mark.parametrize("model,dtype", [("tiny", "float16"), ("embedded", "bfloat16")])
def test_honest_reduced_precision_runs_adopt_with_the_reviewer_s_number(plain, release_cache, tmp_path, model, dtype):
    """Real `lm_eval` runs in float16 (the tiny model) and bfloat16 (the embedded SmolLM2-135M) of the first 16 dev
    rows: exit 4 within drift (or 0 where bit for bit), consistent with rounding, the reviewer's number printed."""
    from support.plain_runs import task_yaml, plain_lm_eval
    folder = tmp_path / "work"
    folder.mkdir()
    if model == "tiny":
        lock, cache = plain / RELEASE_LOCK.name, plain / "cache"
        (folder / "sst2.yaml").symlink_to(plain / "sst2.yaml")
        ids = json.loads((plain / "ids.json").read_text())
    else:
        lock, cache = RELEASE_LOCK, release_cache
        ids = task_yaml(RELEASE_LOCK, release_cache, folder / "sst2.yaml")
    (folder / "cache").symlink_to(cache)
    out = plain_lm_eval(folder, "run", sorted(ids), dtype=dtype)
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", out, "--lock", lock, "--profile", "embedded", "--cache",
                      cache, "--seed", "1", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode in (0, 4), done.stdout + done.stderr
    assert lines[0].startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: 16 rescored row(s) within the bound") \
        and lines[0].endswith(f": consistent with rounding; likely causes the run's files show: the dtype the run "
                              f"claims, {dtype}; exit 4") if done.returncode == 4 else \
        lines[0].startswith("VERDICT: PASS"), lines[0]
    assert f"(derived from the dtype the run claims ({dtype}), fitted to measured honest drift x2)" in lines[0]
    assert lines[1].startswith("sst2 acc: reported ") and lines[1].endswith(" (yours, 16 rows)"), lines[1]


def test_a_dtype_is_the_narrowest_the_run_states_and_float32_on_a_gpu_is_its_own_claim():
    from sst2_audit.audit.adopt_scores import bound_for, claimed_dtype, DERIVED

    def claim(model_dtype, args: dict, device="cpu"):
        return claimed_dtype({"config": {"model_dtype": model_dtype, "device": device}}, args)

    assert claim("torch.bfloat16", {"dtype": "float32"}) == (
        "float32", "the narrowest of the dtypes the run claims (bfloat16, float32: float32)")
    assert claim("torch.bfloat16", {}) == ("bfloat16", "the dtype the run claims (bfloat16)")
    assert claim(None, {"torch_dtype": "fp16"})[0] == "float16"
    assert claim("torch.float32", {}, "cuda:0") == (
        "float32-gpu", "the dtype the run claims (float32) on device cuda:0: float32 (on a CUDA device: TF32 matmuls "
        "have float16's mantissa; the float16 fit, not measured here)")
    gpu = bound_for(None, "float32-gpu", False, "")
    assert (gpu.relative, gpu.per_token, gpu.margin_per_token) == DERIVED["float16"]
    assert claim(None, {}) == (None, "")


def test_a_run_of_another_task_is_named_with_the_profile_or_pin_that_takes_it(plain, tmp_path):
    """Issue 65: the run's samples are of task sst2 renamed to rte (a profile of the lock pins rte) and of a task no
    profile pins: adopt names the tasks the run holds and what takes each, never the --log_samples hint."""
    results, samples = copy_sorted(plain, tmp_path / "out")
    samples.rename(samples.with_name(samples.name.replace("samples_sst2_", "samples_rte_")))
    done = adopt(plain, tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the run logged samples of task(s) rte, not of task sst2" in done.stderr
    assert "Task rte: adopt it with --profile embedded-rte." in done.stderr and "--log_samples" not in done.stderr
    rte = next(results.parent.glob("samples_rte_*"))
    rte.rename(rte.with_name(rte.name.replace("samples_rte_", "samples_my_task_")))
    done = adopt(plain, tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2 and "Task my_task: no profile of this lock pins it; pin it with `" in done.stderr
    assert "--pin NAME --task my_task --model MODEL --data DATA --new-lock NEW.lock.json`" in done.stderr
    next(results.parent.glob("samples_*")).unlink()
    done = adopt(plain, tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 2 and "re-run lm_eval with --log_samples" in done.stderr


def test_a_minimised_results_file_is_read_and_says_what_it_cannot_compare(plain, tmp_path):
    """Issue 65: a results file its author minimised (no `configs`): the claims level says the config cannot be
    compared and what is still checked (exit 4, never PASS); a minimised run of another release is named as such."""
    results, _ = copy_sorted(plain, tmp_path / "out")
    raw = json.loads(results.read_text())
    del raw["configs"]
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "out", "--seed", "1", "--run-name", "minimised", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 4, done.stdout + done.stderr
    assert lines[0].startswith("VERDICT: PASS WITH LIMITS: results: configs.sst2 is missing (a minimised results "
                               "file): the logged task config cannot be compared with the pinned YAML; still checked:")
    done = audit(plain, "--out", "runs/minimised", cwd=tmp_path)
    assert done.returncode == 4 and "configs.sst2 is missing" in done.stdout.splitlines()[0], done.stdout
    raw["lm_eval_version"] = "0.4.13" if RELEASE_LOCK == LOCK else "0.4.9.2"
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (claims); exit 1"), done.stdout + done.stderr
    assert f"results: lm_eval_version: expected '{installed_version()}', got '{raw['lm_eval_version']}'" in done.stdout
