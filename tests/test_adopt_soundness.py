"""A verdict that drift cannot buy (issue 58) and the row set as a claim (issue 65, 1b), on real `lm_eval` console
runs of a tiny model over the embedded demo data (tests/test_adopt.py's runs): forgeries that spend the old bound,
the reviewer's own number printed, the dtype claim held to its evidence, rows dropped or chosen, edited records,
lone surrogates; and generated forgeries judged by the same functions the rescore level calls."""

import json
import math
import random
import shutil
from pathlib import Path

import pytest

from test_adopt import _copy, _rehash, adopt, audit, plain, ROWS  # noqa: F401 (plain: the shared fixture)

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
        raw["config"]["model_dtype"] = f"torch.{dtype}"
        raw["config"]["model_args"] = raw["config"]["model_args"].replace("dtype=float32", f"dtype={dtype}")
        raw["configs"]["sst2"]["metadata"]["dtype"] = dtype  # lm-eval merges model_args into the task's metadata
    results.write_text(json.dumps(raw))
    _rehash(results, samples)
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
    results, samples = _copy(plain, tmp_path / "out")
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
    results, samples = _copy(plain, tmp_path / "out")
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
    record = json.loads((tmp_path / "runs" / "bf16" / "adopted.json").read_text())
    mine = record["rescored_summary"]["acc"]
    assert lines[1] == (f"sst2 acc: reported {record['reported']['acc']:.3f} (their scores) / rescored {mine:.3f} "
                        "(yours, 16 rows)")
    assert record["bound"]["per_token"] == 1.038 and record["row_set"]["rule"].startswith("the profile's dev rows")
    done = audit(plain, "--out", "runs/bf16", cwd=tmp_path)
    assert done.returncode == 4 and "adopted record: PASS" in done.stdout, done.stdout


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

    bundle = adopted_bundle.pack(folder, files, "kept", load_lock(plain / "resources.lock.json"), plain / "cache",
                                 tmp_path / "results")
    done = audit(plain, "--bundle-file", str(bundle), cwd=tmp_path)
    assert done.returncode == 1 and "adopted.json: rescored_summary (re-derived from its rows' rescored scores)" in \
        done.stdout, done.stdout


def test_a_dropped_wrong_row_with_numbers_and_hash_recomputed_is_not_a_pass(plain, tmp_path):
    """Issue 65's cherry-pick: one wrongly predicted row's line deleted, acc, stderr, n-samples.effective and the task
    hash recomputed: the run contradicts its release's own count (FAIL); left as lm-eval 0.4.9.2 writes it, the
    row set matches no rule and the verdict names the missing doc_id (exit 4, never PASS)."""
    from sst2_audit.formats.releases import release_of
    from sst2_audit.formats.lock import load_lock

    results, samples = _copy(plain, tmp_path / "out")
    rows = _rows(samples)
    dropped = next(row["doc_id"] for row in rows if row["acc"] == 0.0)
    kept = [row for row in rows if row["doc_id"] != dropped]
    raw = _restate(results, samples, kept)
    scored = release_of(load_lock(plain / "resources.lock.json").evaluator.version).n_samples_effective_is_scored
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
    import subprocess

    from conftest import VENV_BIN

    out = folder / "limit"
    argv = [str(VENV_BIN / "lm_eval"), "--model", "hf", "--model_args",
            f"pretrained={folder / 'cache' / 'model'},dtype=float32,max_length=512,attn_implementation=eager",
            "--tasks", str(folder / "sst2.yaml"), "--limit", "6", "--log_samples", "--output_path", str(out),
            "--device", "cpu", "--batch_size", "1", "--seed", "94"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(folder / "datasets")}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(folder))
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_lone_surrogate_in_any_string_field_is_bad_input(plain, tmp_path, seed):
    """Generated: a lone surrogate escape written into a random string field (or key) of a random sample line or of
    the results file: exit 2, naming the file, the line and the field; never exit 3."""
    results, samples = _copy(plain, tmp_path / "out")
    rng = random.Random(seed)
    target = samples if seed % 3 else results
    lines = target.read_text().splitlines() if target == samples else [target.read_text()]  # results: one value
    number = rng.randrange(len(lines))
    value = json.loads(lines[number])
    paths = list(_string_paths(value, ()))
    path = rng.choice(paths)
    lone = rng.choice(("\\ud800", "\\udfff", "\\udc00x", "a\\ud83d"))
    text = json.dumps(_set(value, path, "\u0000SURROGATE\u0000"), ensure_ascii=False)
    lines[number] = text.replace("\\u0000SURROGATE\\u0000", lone)
    target.write_text("\n".join(lines) + "\n")
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 2, (path, done.stdout, done.stderr)
    where = f"{target}:{number + 1}" if target == samples else f"{target}"
    assert where in done.stderr and "a lone surrogate escape" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def _string_paths(value, path):
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _string_paths(item, path + (key,))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _string_paths(item, path + (number,))


def _set(value, path, new):
    if not path:
        return new
    value[path[0]] = _set(value[path[0]], path[1:], new)
    return value


# --- generated forgeries, judged by the functions the rescore level calls ---------------------------------------

def _questions(plain: Path, tmp_path: Path) -> list:
    """The 16 rows of the real float32 run as the rescore level holds them (their float32 rescore, token counts,
    choice lengths, labels), from its adopted.json."""
    from sst2_audit.formats.adopted import read

    done = adopt(plain, plain / "sorted", "--run-name", "base", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    return read(tmp_path / "runs" / "base" / "adopted.json").questions


def test_generated_forgeries_that_flip_one_way_never_pass_and_honest_noise_never_fails(plain, tmp_path):
    """240 generated forgeries: a random subset of the wrong rows moved toward gold by a random fraction of the old
    bound, every score perturbed by honest-sized noise, claims bfloat16 or float16. None whose flips run one way
    beyond the sign test's threshold is accepted; every accepted one gains at most the rows whose own margin lies
    within the near-tie band. 60 honest-noise runs (no move) are never a FAIL."""
    import copy

    from sst2_audit.audit.adopt_scores import (bound_for, candidate_bounds, flip_test, margin_bound, row_class,
                                              sign_test)
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
                assert sign_test(toward, toward + away) >= 0.01
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
