"""run.py end to end on the embedded profile: the real lm-eval, the real model."""

import json

import pytest

from support.paths import EMBEDDED_COLUMNS
from support.processes import one_paragraph, run_cli, run_script, tree_state
from sst2_audit.util.commands import command_line
from sst2_audit.formats import records
from sst2_audit.task.dataset import read_parquet
from sst2_audit.util.hashing import tokens_hash


def test_smoke_run_passes_and_says_it_is_the_demo(embedded_cache, tmp_path):
    done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "smoke")
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert out.startswith("*** EMBEDDED DEMO: sentences written for sst2-audit and a de-quantized Q4_1 model; "
                          "not a GLUE SST-2 measurement. ***")
    assert "run smoke: task sst2, profile embedded, smoke mode, 2 dev rows (128 confirmation rows sealed, never scored)" in out
    assert "agreement             4/4 candidate scores bit for bit (max abs diff 0.0)" in out
    assert "identity              2/2 logged samples match their rows" in out
    record = records.read(tmp_path / "out" / records.RUN_FILE, records.RunRecord)
    assert record.split.scored_ids == record.split.dev_ids[:2]
    assert "[official path: lm-eval simple_evaluate on 2 rows] done" in done.stderr  # progress on long steps
    # each package once: run.py's folder (the checkout, on sys.path) holds the editable install's egg-info too
    packages = json.loads((tmp_path / "out" / records.ENVIRONMENT_FILE).read_text())["installed_packages"]
    assert len(packages) == len(set(packages)) and len([p for p in packages if p.startswith("sst2-audit==")]) == 1


def test_a_run_forked_from_the_warm_interpreter_writes_what_a_new_interpreter_writes(embedded_cache, tmp_path):
    """Most of the suite's runs fork from tests/support/warm.py instead of starting Python: the same smoke run both ways
    prints the same summary and writes the same run.json (third-party lines counted alike), apart from its times
    and memory."""
    runs = {}
    for how in ("new", "warm"):
        done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke", "--out",
                          tmp_path / how / "out", "--private", tmp_path / how / "private", "--run-name", "same",
                          fresh=how == "new")
        assert done.returncode == 0, done.stderr[-2000:]
        record = json.loads((tmp_path / how / "out" / records.RUN_FILE).read_text())
        printed = done.stdout.replace(str(tmp_path / how), "FOLDER").splitlines()
        runs[how] = ({k: v for k, v in record.items() if k not in ("timings", "peak_rss_bytes")},
                     [line for line in printed if not line.lstrip().startswith(("time ", "peak RSS"))])
    warm, new = runs["warm"][0], runs["new"][0]
    differing = {key: (warm.get(key), new.get(key)) for key in sorted(set(warm) | set(new))
                 if warm.get(key) != new.get(key)}  # named, so that a difference says where it is
    assert differing == {} and runs["warm"][1] == runs["new"][1], (differing, runs["warm"][1], runs["new"][1])
    assert runs["new"][0]["third_party_log"]["lm-eval: `pretrained` is a model object, not a name"] == 1


def test_rows_scores_a_prefix_of_the_dev_rows_and_the_audit_reads_it(embedded_cache, tmp_path):
    """--rows N: the first N dev rows in hash order (run mode first-N), audited like any run; out of range or
    with --smoke: exit 2 before anything is loaded."""
    for extra, message in ((["--rows", "1"], "--rows 1: expected 2 to 64 (the profile's dev rows in "),
                           (["--rows", "65"], "--rows 65: expected 2 to 64"),
                           (["--rows", "3", "--smoke"], "--smoke scores the first 2 dev rows; leave out --rows")):
        done = run_cli("run.py", "--profile", "embedded", "--cache", embedded_cache, *extra, "--out", tmp_path / "x")
        assert done.returncode == 2 and message in one_paragraph(done.stderr), done.stderr
        assert not (tmp_path / "x").exists()
    done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--rows", "3", "--out",
                      tmp_path / "out", "--private", tmp_path / "private", "--run-name", "three", "--quiet")
    assert done.returncode == 0 and done.stdout.startswith("three: sst2 "), done.stdout + done.stderr
    record = records.read(tmp_path / "out" / records.RUN_FILE, records.RunRecord)
    assert record.mode == "first-3" and record.split.scored_ids == record.split.dev_ids[:3]
    done = run_script("audit.py", "--out", tmp_path / "out", "--cache", embedded_cache)
    assert done.returncode == 0 and "all 3 scored rows rescored" in done.stdout, done.stdout + done.stderr


def test_full_run_records(full_run, embedded_cache):
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    assert (record.mode, record.profile, record.demo, record.lock_fully_hashed) == ("full", "embedded", True, True)
    assert (record.task, record.metrics, list(record.summaries["official"])) == ("sst2", ["acc"], ["acc"])
    assert record.split.row_hash_rule == "sha256(canonical_json(doc))"
    assert len(record.questions) == 64 and record.split.scored_ids == record.split.dev_ids
    assert [q.idx for q in record.questions] == record.split.dev_ids
    assert len(record.split.confirm) == 128
    assert not {c.idx for c in record.split.confirm} & set(record.split.scored_ids)
    assert record.max_abs_diff == 0.0
    for q in record.questions:
        assert q.scores["official"] == q.scores["independent"]
        assert q.logged_doc_id == q.idx
        assert q.candidates == [" negative", " positive"] and q.candidate_token_counts == [1, 1]
        assert q.candidate_tokens_sha256 == tokens_hash([[3524], [2731]]) and q.choice_lengths == [8, 8]
        assert list(q.predictions["official"]) == list(q.logged) == ["acc"]
        assert q.logged["acc"] == float(q.predictions["official"]["acc"] == q.label)
    official = record.summaries["official"]["acc"]
    assert official == record.summaries["independent"]["acc"]
    assert official.rows == 64
    assert official.correct == sum(q.predictions["official"]["acc"] == q.label for q in record.questions)
    assert record.lm_eval_reported["acc"] == official.value
    assert record.lm_eval_reported["acc_stderr"] == official.stderr
    assert record.identity_checks_passed == 64
    assert sum(record.labels.values()) == 64 and sum(official.predictions.values()) == 64
    assert set(record.task_config["differences"]) <= {"dataset_path", "dataset_name", "dataset_kwargs", "num_fewshot"}
    assert record.task_config["effective"]["doc_to_text"] == "{{sentence}}\nQuestion: Is this sentence positive or negative?\nAnswer:"
    assert record.settings["doc_id_order"] == "sorted" and record.settings["num_fewshot"] == 0
    assert {"verify", "imports", "model_load", "official", "independent", "checks", "total"} <= set(record.timings)
    assert record.versions["torch"].startswith("2.13.0") and record.versions["lm_eval"] == "0.4.9.2"
    assert record.peak_rss_bytes > 500_000_000
    assert record.evaluator["files_verified"] == 55  # every line of the facts file: .py files + the sst2 YAML


def test_public_records_carry_no_review_text(full_run, embedded_cache):
    sentences = [row.doc["sentence"] for row in read_parquet(embedded_cache / "data" / "validation.parquet", EMBEDDED_COLUMNS)]
    for path in (full_run / "out").iterdir():
        text = path.read_text()
        assert not [s for s in sentences if s in text], path.name
        assert str(embedded_cache.resolve()) not in text, path.name
    private = records.read(full_run / "private" / records.PRIVATE_FILE, records.PrivateRecord)
    assert len(private.questions) == 64 and private.questions[0].doc["sentence"] in sentences


def test_lm_eval_public_output_matches_our_records(full_run):
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    samples = [json.loads(line) for line in (full_run / "out" / records.LM_EVAL_SAMPLES_FILE).read_text().splitlines()]
    by_id = {s["doc_id"]: s for s in samples}
    assert sorted(by_id) == sorted(record.split.scored_ids)
    for q in record.questions:
        assert [r[0][0] for r in by_id[q.idx]["resps"]] == q.scores["official"]
        assert by_id[q.idx]["prompt_hash"] == q.prompt_hash and by_id[q.idx]["doc_hash"] == q.doc_hash


@pytest.fixture(scope="module")
def unsorted_run(embedded_cache, tmp_path_factory):
    base = tmp_path_factory.mktemp("unsorted")
    done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--unsorted-ids", "--rows", "16",
                      "--out", base / "out", "--private", base / "private", "--run-name", "unsorted")
    return base, done


def test_unsorted_ids_reproduce_the_doc_id_bug_and_stop_the_run(embedded_cache, unsorted_run, tmp_path):
    base, done = unsorted_run
    out = base / "out"
    assert done.returncode == 1
    message = one_paragraph(done.stderr)
    assert "identity check failed:" in message and "lm-eval was given the dev ids in hash order (--unsorted-ids: " \
        "reproducing upstream issue #4084 on purpose)." in message
    assert f"Failure record: {out / records.FAILURE_FILE}" in message
    failure = records.read(out / records.FAILURE_FILE, records.FailureRecord)
    assert failure.check == "identity" and failure.run_name == "unsorted"
    assert not (out / records.RUN_FILE).exists()  # no record that looks like a finished run
    page = (out / records.REPORT_FILE).read_text()  # the failure's page: what a person opens first
    assert "stopped: the identity check failed" in page and "doc.idx" in page and "<script" not in page
    # issue 31: the page answers first (why, what to do), then counts, then a few samples: not 500 rows
    assert "reproduces lm-eval&#x27;s doc_id mislabelling" in page or "reproduces lm-eval's doc_id mislabelling" in page
    assert "Run again without --unsorted-ids for a measurement" in page
    assert page.count("<tr><td class=\"n\">") <= 10 * 8 + 10 and "doc_hash (of the logged doc)" not in page
    assert "<h2>Settings of the run</h2>" in page and "hash order (unsorted)" in page
    wrong = [m for m in failure.mismatches if m.logged_position >= 0]
    assert len(wrong) >= 8  # of the 16 rows
    for m in wrong:
        assert "doc.idx" in m.fields and m.expected["doc.idx"] == m.claimed_id != m.logged["doc.idx"]
        assert "prompt_hash" in m.fields
    # The record is kept: a second run into the same folder is refused and changes nothing.
    before = tree_state(out)
    again = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                       "--out", out, "--private", tmp_path / "private2")
    assert again.returncode == 2
    assert f"--out {out} already exists and is not empty; a finished run is never overwritten" in one_paragraph(again.stderr)
    assert tree_state(out) == before


def test_a_failed_run_is_audited_as_failed_and_never_bundled(embedded_cache, unsorted_run, tmp_path):
    out = unsorted_run[0] / "out"
    audited = run_script("audit.py", "--out", out, "--cache", embedded_cache, "--bundle", "--results", tmp_path)
    assert audited.returncode == 1
    assert "arithmetic: FAIL" in audited.stdout and "the run stopped on its own identity check" in audited.stdout
    assert "no bundle is packed for a run that does not pass" in one_paragraph(audited.stderr)
    assert not (tmp_path / "unsorted.tar.gz").exists()


def test_run_on_an_unprepared_cache_says_how_to_prepare(tmp_path):
    done = run_cli("run.py", "--profile", "embedded", "--cache", tmp_path / "empty", "--out", tmp_path / "out")
    assert done.returncode == 2
    assert (f"{tmp_path / 'empty'}: no manifest.json; the cache is not prepared. "
            f"Run: {command_line('prepare')} --profile embedded --cache {tmp_path / 'empty'}") in \
        one_paragraph(done.stderr)
    assert not (tmp_path / "out").exists()
