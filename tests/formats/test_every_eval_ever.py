"""`adopt --export-eee DIR` (issue 62): the adopted real lm-eval 0.4.4 run as Every Eval Ever records, checked against
the schemas of the `every-eval-ever` 0.3.0 wheel from the package registry (its eval.schema.json and
instance_level_eval.schema.json, read from the wheel, never copied here), the verdict on every record, the sample
hash by the package's own rule, and the layout its datastore and validator expect."""

import hashlib
import json
import re
import subprocess
import sys
import zipfile

import pytest

from support.paths import LOCK, REPO, TEST_CACHE, VENV_BIN
from support.processes import run_script

RUN = REPO / "tests" / "data" / "lm-eval-0.4.4"
WHEEL = "every_eval_ever-0.3.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def schemas() -> dict:
    """The package's two schemas, from its published wheel (it needs Python 3.12: downloaded, never installed)."""
    folder = TEST_CACHE / "every-eval-ever"
    if not (folder / WHEEL).is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                        "--python-version", "3.12", "-d", str(folder), "every-eval-ever==0.3.0"], check=True)
    with zipfile.ZipFile(folder / WHEEL) as wheel:
        return {name: json.loads(wheel.read(f"every_eval_ever/schemas/{name}"))
                for name in ("eval.schema.json", "instance_level_eval.schema.json")}


def _validator(schema: dict):
    import jsonschema

    return jsonschema.validators.validator_for(schema)(schema)


@pytest.fixture(scope="module")
def open_lock(tmp_path_factory):
    raw = json.loads(LOCK.read_text())
    raw["split"]["confirm_rows"] = 0  # no sealed rows: every logged row is rescored (tests/formats/test_legacy_writer.py)
    lock = tmp_path_factory.mktemp("eee-lock") / "open.lock.json"
    lock.write_text(json.dumps(raw, indent=2))
    return lock


def test_an_adopted_run_exports_records_the_packages_schemas_accept_with_the_verdict_on_each(
        embedded_cache, open_lock, schemas, tmp_path):
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", RUN, "--lock", open_lock, "--profile", "embedded",
                      "--cache", embedded_cache, "--export-eee", tmp_path / "eee", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [aggregate_path] = (tmp_path / "eee").rglob("*[0-9a-f].json")
    [samples_path] = (tmp_path / "eee").rglob("*_samples.jsonl")
    relative = samples_path.relative_to(tmp_path / "eee").as_posix()
    assert re.fullmatch(r"data/sst2/local/embedded/[0-9a-f-]{36}_samples\.jsonl", relative)
    assert f"every eval ever: {aggregate_path} and {samples_path.name} (sst2, 16 rows, " \
           "verdict on each)" in done.stdout
    aggregate = json.loads(aggregate_path.read_text())
    instances = [json.loads(line) for line in samples_path.read_text().splitlines()]
    assert list(_validator(schemas["eval.schema.json"]).iter_errors(aggregate)) == []
    for line in instances:
        assert list(_validator(schemas["instance_level_eval.schema.json"]).iter_errors(line)) == []
    details = aggregate["detailed_evaluation_results"]
    assert details["file_path"] == relative and details["total_rows"] == 16
    assert details["checksum"] == hashlib.sha256(samples_path.read_bytes()).hexdigest()
    [result] = aggregate["evaluation_results"]
    assert (result["evaluation_result_id"], result["score_details"]["score"]) == ("acc", 0.375)
    assert result["score_details"]["details"]["sst2_audit_rescored"] == "0.375"
    assert aggregate["eval_library"] == {"name": "lm_eval", "version": "unknown",
                                         "additional_details": {"audited_by": result["score_details"]["details"][
                                             "sst2_audit_tool"]}}
    samples = {json.loads(line)["doc_id"]: json.loads(line) for line in next(RUN.glob("samples_*")).open()}
    for line in instances:
        sample = samples[int(line["sample_id"])]
        prompt = sample["arguments"]["gen_args_0"]["arg_0"]
        assert line["sample_hash"] == hashlib.sha256(json.dumps({"raw": prompt, "reference": sample["target"]},
                                                                sort_keys=True).encode()).hexdigest()
        assert line["evaluation"] == {"score": sample["acc"], "is_correct": sample["acc"] == 1.0}
        assert (line["metadata"]["sst2_audit_verdict"], line["metadata"]["sst2_audit_exit_code"],
                line["metadata"]["sst2_audit_row_class"]) == ("PASS", "0", "bit for bit")
    assert sum(line["evaluation"]["score"] for line in instances) == 6  # 0.375 of 16


def test_a_failed_adoption_exports_nothing(embedded_cache, open_lock, tmp_path):
    results = tmp_path / "run"
    results.mkdir()
    for path in RUN.iterdir():
        (results / path.name).write_bytes(path.read_bytes())
    raw = json.loads(next(results.glob("results_*")).read_text())
    raw["results"]["sst2"]["acc,none"] = 0.5
    next(results.glob("results_*")).write_text(json.dumps(raw))
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", results, "--lock", open_lock, "--profile", "embedded",
                      "--cache", embedded_cache, "--export-eee", tmp_path / "eee", cwd=tmp_path)
    assert done.returncode == 1 and not (tmp_path / "eee").exists(), done.stdout


def test_an_export_folder_that_cannot_be_written_is_refused_before_any_work(embedded_cache, open_lock, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", RUN, "--lock", open_lock, "--profile", "embedded",
                      "--cache", embedded_cache, "--export-eee", blocker / "eee", "--out", tmp_path / "adopted",
                      cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"--export-eee {blocker / 'eee'}: cannot create the folder ({blocker} is a file)" in done.stderr
    assert "[verify" not in done.stderr and not (tmp_path / "adopted").exists()  # no level ran, nothing written


def test_an_adopted_lighteval_run_exports_records_the_schemas_accept(embedded_cache, open_lock, schemas, tmp_path):
    """The real lighteval 0.13.0 run (tests/audit/test_lighteval.py) exported: lighteval as the library, its
    results file's time, each row's context, choices and gold from lighteval's own details, the verdict on each."""
    import pyarrow.parquet as parquet

    run = REPO / "tests" / "data" / "lighteval-0.13.0"
    done = run_script(str(VENV_BIN / "sst2-audit"), "adopt", run, "--lock", open_lock, "--profile", "embedded",
                      "--cache", embedded_cache, "--export-eee", tmp_path / "eee", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    [aggregate_path] = (tmp_path / "eee").rglob("*[0-9a-f].json")
    [samples_path] = (tmp_path / "eee").rglob("*_samples.jsonl")
    aggregate = json.loads(aggregate_path.read_text())
    instances = [json.loads(line) for line in samples_path.read_text().splitlines()]
    assert list(_validator(schemas["eval.schema.json"]).iter_errors(aggregate)) == []
    for line in instances:
        assert list(_validator(schemas["instance_level_eval.schema.json"]).iter_errors(line)) == []
    assert (aggregate["eval_library"]["name"], aggregate["eval_library"]["version"]) == ("lighteval", "unknown")
    assert aggregate["evaluation_timestamp"] == "1796581818.356252"  # results_2026-12-06T18-30-18.356252.json as UTC
    [result] = aggregate["evaluation_results"]
    assert (result["evaluation_result_id"], result["score_details"]["score"]) == ("acc", 0.5625)
    assert result["score_details"]["details"]["sst2_audit_rescored"] == "0.5625"
    rows = parquet.read_table(next(run.glob("details/model/*/*.parquet"))).to_pylist()
    assert [line["sample_id"] for line in instances] == [row["doc"]["id"] for row in rows]
    for line, row in zip(instances, rows):
        doc = row["doc"]
        gold = doc["choices"][doc["gold_index"]].strip()
        assert line["input"] == {"raw": doc["query"], "reference": [gold], "choices": [c.strip() for c in doc["choices"]]}
        assert line["sample_hash"] == hashlib.sha256(json.dumps({"raw": doc["query"], "reference": gold},
                                                                sort_keys=True).encode()).hexdigest()
        assert line["evaluation"] == {"score": float(row["metric"]["acc"]), "is_correct": row["metric"]["acc"] == 1}
        assert (line["metadata"]["sst2_audit_verdict"], line["metadata"]["sst2_audit_row_class"]) == \
            ("PASS", "bit for bit")
