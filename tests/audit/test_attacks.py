"""A hostile submitter against a careful reviewer who runs the README's audit command with our lock.

Each attack re-packs a bundle the way a submitter could (SHA256SUMS recomputed, so only the
reviewer's own lock, cache and regenerated fields can catch it) and checks exit code and message.
"""

import json
import os
import shutil

import pytest

from support.bundles import REFERENCE, audit, edited, members_of, pack, regenerate_card
from support.builders import local_lock
from support.paths import LOCK
from support.processes import one_paragraph, run_script
from sst2_audit.audit.rescore import draw

def test_the_salt_shopping_bundle_is_caught_by_the_reviewers_lock(embedded_cache, tmp_path, capsys):
    raw = json.loads(LOCK.read_text())
    raw["split"]["salt"] = "a salt chosen for a better score"
    raw["split"]["confirm_rows"] = 0
    shopped = tmp_path / "shopped" / "resources.lock.json"
    shopped.parent.mkdir()
    shopped.write_text(json.dumps(raw, indent=2))
    done = run_script("run.py", "--lock", shopped, "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "shopped")
    assert done.returncode == 0, done.stderr[-2000:]
    code, out = audit(capsys, "--lock", shopped, "--out", tmp_path / "out", "--cache", embedded_cache,
                      "--bundle", "--results", tmp_path)
    assert code == 0, out  # genuine against its own lock
    code, out = audit(capsys, "--bundle-file", tmp_path / "shopped.tar.gz", "--cache", embedded_cache, "--rescore", "all")
    assert code == 1, out
    assert "lock: FAIL" in out
    assert "bundled lock: split.salt: expected 'sst2-audit/split/v1', got 'a salt chosen for a better score'" in out
    assert "bundled lock: split.confirm_rows: expected 128, got 0" in out
    assert "rescore: SKIPPED (an earlier level did not pass; the record's scores were not compared)" in out
    code, out = audit(capsys, "--bundle-file", tmp_path / "shopped.tar.gz", "--cache", embedded_cache,
                      "--trust-bundle-lock", "--arithmetic-only")
    assert code == 4, out
    assert out.splitlines()[1].startswith("WARNING: audited against the bundle's own lock (--trust-bundle-lock: NOT "
                                          "the reviewer's lock)")
    assert "audited against the submitter's own lock (--trust-bundle-lock), not the reviewer's" in out.splitlines()[0]


def test_a_relabelled_demo_is_caught_and_still_says_demo(tmp_path, capsys):
    def relabel(record, members):
        record["demo"] = False
        record["notice"] = "GLUE SST-2 validation scored with SmolLM2-135M-Instruct (original float weights)"

    members = edited(relabel)
    regenerate_card(members)
    assert b"EMBEDDED DEMO" not in members["CARD.md"].split(b"| profile |")[0]
    pack(tmp_path / "relabelled.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "relabelled.tar.gz", "--arithmetic-only")
    assert code == 1, out
    assert "run: demo (the lock's profile): expected True, got False" in out
    assert "run: notice (the lock's profile): expected 'EMBEDDED DEMO: " in out
    assert out.splitlines()[2].startswith("*** EMBEDDED DEMO")


def test_a_forged_card_is_caught(tmp_path, capsys):
    members = members_of(REFERENCE)
    members["CARD.md"] = members["CARD.md"].replace(b"accuracy 42/64 = 0.6562", b"accuracy 63/64 = 0.9844")
    pack(tmp_path / "card.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "card.tar.gz", "--arithmetic-only")
    assert code == 1, out
    assert "claims: FAIL (1 of" in out
    assert "CARD.md differs from the one regenerated from the checked records at line 5: expected " in out
    assert "accuracy 42/64 = 0.6562" in out and "got \"Run `embedded-full-reference` (full), scored by lm-eval and by " \
           "sst2-audit's independent path; accuracy 63/64 = 0.9844" in out


def _forge_position(position: int):
    def forge(record, members):
        question = record["questions"][position]  # both candidates moved: the prediction stays
        question["official_scores"] = [score + 0.5 for score in question["official_scores"]]
        question["independent_scores"] = list(question["official_scores"])
        samples = [json.loads(line) for line in members["lm_eval_samples.public.jsonl"].splitlines()]
        for sample in samples:
            if sample["doc_id"] == question["idx"]:
                for number, score in enumerate(question["official_scores"]):
                    sample["resps"][number][0][0] = score
                    if "filtered_resps" in sample:
                        sample["filtered_resps"][number][0] = score
        members["lm_eval_samples.public.jsonl"] = "".join(json.dumps(s) + "\n" for s in samples).encode()
    return forge


def test_a_forged_row_at_position_63_is_caught_by_rescore(embedded_cache, tmp_path, capsys):
    members = edited(_forge_position(63))
    record = json.loads(members["run.json"])
    regenerate_card(members)
    pack(tmp_path / "forged.tar.gz", members)
    forged_idx = record["questions"][63]["idx"]
    code, out = audit(capsys, "--bundle-file", tmp_path / "forged.tar.gz", "--cache", embedded_cache, "--structural")
    assert code == 4, out  # score-preserving predictions, consistent sums: only a rescore can see it
    assert out.splitlines()[0].startswith("VERDICT: SCORES NOT VERIFIED: none of the 64 scored rows was rescored")
    code, out = audit(capsys, "--bundle-file", tmp_path / "forged.tar.gz", "--cache", embedded_cache)
    assert code == 1, out  # the default audit rescores every row
    assert out.startswith("VERDICT: FAIL (rescore (all rows, seed ")
    forged = record["questions"][63]["independent_scores"]
    # what the record says first, then what this machine rescored (issue 31: readers took "expected" for the record)
    assert f"row idx {forged_idx}: scores.independent: the record says {forged!r}, rescored here [" in out
    dev = [q["idx"] for q in record["questions"]]
    assert draw(dev, 8, 0) != dev[:8]  # not the predictable first rows
    seed = next(s for s in range(1000) if forged_idx in draw(dev, 8, s))
    code, out = audit(capsys, "--bundle-file", tmp_path / "forged.tar.gz", "--cache", embedded_cache,
                      "--rescore", "8", "--seed", str(seed))
    assert code == 1, out
    assert f"rescore (8 rows, seed {seed}): FAIL" in out
    assert f"row idx {forged_idx}: scores.independent: the record says {forged!r}, rescored here [" in out
    # a bundle of the earlier numeric mode (MKL_CBWR=AVX2) is held to the drift bound, and this row is beyond it
    assert "verdict: different (the run was made in another numeric mode (ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 " \
           "ONEDNN_MAX_CPU_ISA=AVX2): drift bound 0.0001 per score)" in out


def test_rescore_rows_are_bounded_and_come_from_the_reviewers_dev_set(embedded_cache, tmp_path, capsys):
    code, out = audit(capsys, "--bundle-file", REFERENCE, "--cache", embedded_cache, "--rescore", "999")
    assert code == 2 and "--rescore 999: the run has 64 scored rows; give at most 64 or 'all'." in out

    def sealed(record, members):  # a confirmation row edited in, where a rescore would have reached it
        record["questions"][0]["idx"] = record["questions"][0]["logged_doc_id"] = record["split"]["confirm"][0]["idx"]

    members = edited(sealed)
    pack(tmp_path / "sealed.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "sealed.tar.gz", "--cache", embedded_cache, "--rescore", "all")
    assert code == 1
    assert "a confirmation id appears in questions; the confirmation set is sealed" in out
    assert "rescore: SKIPPED (an earlier level did not pass; the record's scores were not compared)" in out


@pytest.mark.parametrize("field, value, message", [
    ("settings.add_bos_token", True, "run: settings: expected "),
    ("settings.extra_key", 1, "run: settings: expected "),
    ("settings.tie_rule", "last candidate", "run: settings: expected "),
    ("task_config.effective.target_delimiter", "", "task_config: effective (rebuilt from the installed YAML): expected "),
    ("task_config.effective.doc_to_text", "{{sentence}}\nAnswer:", "task_config: effective (rebuilt from the installed YAML)"),
    ("versions.transformers", "4.99.0", "versions: transformers (installed here): expected '4.57.6', got '4.99.0'"),
    ("lock_fully_hashed", False, "run: lock_fully_hashed (the lock's profile): expected True, got False"),
    ("mode", "smoke", "run: mode (from the scored ids): expected 'full', got 'smoke'"),
    ("run_name", "../../escape", "run: run_name (a safe slug): expected True, got False"),
    ("evaluator.files_verified", 1, "run: evaluator: expected "),
])
def test_every_field_a_person_reads_is_checked(tmp_path, capsys, field, value, message):
    def change(record, members):
        *parents, last = field.split(".")
        holder = record
        for key in parents:
            holder = holder[key]
        holder[last] = value

    members = edited(change)
    regenerate_card(members)
    pack(tmp_path / "b.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 1, out
    assert message in out, out


def test_extra_resource_and_a_wrong_wheel_hash_are_caught(tmp_path, capsys):
    def change(record, members):
        record["resources"].append(dict(record["resources"][0], path="data/extra.parquet"))
        wheel = next(r for r in record["resources"] if r["role"] == "download")
        wheel["sha256"] = "0" * 64

    pack(tmp_path / "b.tar.gz", edited(change))
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 1
    assert "resources: other roles: expected ['download', 'train', 'validation'], got ['download', 'train', 'train', 'validation']" in out
    assert "(the lock's wheel): expected 'bcc81830" in out
    assert "bundled manifest: files (equal to run.json's resources)" in out


@pytest.mark.parametrize("text, message", [
    ('{"a": 1, "a": 2}', "not acceptable JSON (duplicate key 'a')"),
    ("[" * 5000 + "]" * 5000, "not acceptable JSON (nested too deeply)"),
    ('{"x": ' + "9" * 5000 + "}", "not acceptable JSON (Exceeds the limit (4300 digits)"),
    ('{"x": NaN}', "not acceptable JSON (NaN is not a JSON number)"),
])
def test_malformed_json_exits_2_naming_the_file(tmp_path, capsys, text, message):
    members = members_of(REFERENCE)
    members["run.json"] = text.encode()
    pack(tmp_path / "b.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 2, out
    assert "run.json: " + message in one_paragraph(out)


def _signed_zero(record):
    question = record["questions"][63]
    question["official_scores"][0], question["independent_scores"][0] = 0.0, -0.0


@pytest.mark.parametrize("change, message", [
    (_signed_zero, "candidate ' negative' score: independent == official: expected 0.0, got -0.0"),
    (lambda r: r["questions"][0]["official_scores"].__setitem__(0, -7), ".questions[0].scores.official[0]: expected float, got int"),
    (lambda r: r.__setitem__("schema_version", True), "schema_version must be an integer, got True"),
    (lambda r: r["questions"][0].__setitem__("idx", "9"), ".questions[0].idx: expected int, got str"),
    (lambda r: r["split"].__setitem__("dev_ids", {}), ".split.dev_ids: expected list, got dict"),
])
def test_typed_records_refuse_wrong_types_and_signed_zero(tmp_path, capsys, change, message):
    members = members_of(REFERENCE)
    record = json.loads(members["run.json"])
    change(record)
    members["run.json"] = json.dumps(record).encode()
    pack(tmp_path / "b.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == (1 if change is _signed_zero else 2), out
    assert message in out, out


def test_lm_eval_samples_and_invalid_utf8_exit_2(tmp_path, capsys):
    members = members_of(REFERENCE)
    lines = members["lm_eval_samples.public.jsonl"].splitlines()
    sample = json.loads(lines[2])
    del sample["resps"]
    members["lm_eval_samples.public.jsonl"] = b"\n".join(lines[:2] + [json.dumps(sample).encode()] + lines[3:])
    pack(tmp_path / "b.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only")
    assert code == 2 and "lm_eval_samples.public.jsonl:3: lm-eval sample lacks fields ['resps']" in one_paragraph(out)
    members = members_of(REFERENCE)
    members["environment.json"] = b'{"versions": "\xff"}'
    pack(tmp_path / "c.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "c.tar.gz", "--arithmetic-only")
    assert code == 2 and "environment.json: not valid UTF-8 (byte 14)" in one_paragraph(out)


def test_records_that_are_links_or_fifos_exit_2_without_hanging(full_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(full_run / "out", run)
    (run / "environment.json").unlink()
    (run / "environment.json").symlink_to("/dev/zero")
    code, out = audit(capsys, "--out", run, "--arithmetic-only")
    assert code == 2 and f"{run / 'environment.json'}: expected a regular file, got a symbolic link." in one_paragraph(out)
    (run / "environment.json").unlink()
    os.mkfifo(run / "environment.json")
    code, out = audit(capsys, "--out", run, "--arithmetic-only")
    assert code == 2 and f"{run / 'environment.json'}: expected a regular file, got a named pipe." in one_paragraph(out)


def test_run_refuses_nested_or_equal_record_folders_and_unsafe_names(embedded_cache, tmp_path):
    for out, private in ((tmp_path / "x", tmp_path / "x"), (tmp_path / "x", tmp_path / "x" / "p"),
                         (tmp_path / "p" / "x", tmp_path / "p")):
        done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                          "--out", out, "--private", private)
        assert done.returncode == 2
        assert "must be different folders, neither inside the other" in one_paragraph(done.stderr)
    done = run_script("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke", "--run-name", "../up")
    assert done.returncode == 2 and "--run-name '../up': expected letters, digits" in one_paragraph(done.stderr)
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("path", ["../outside.json", "/etc/passwd", "a/./b.json", "a//b.json", ""])
def test_lock_paths_must_be_relative_and_normalized(tmp_path, path):
    raw = json.loads(LOCK.read_text())
    raw["profiles"]["glue-sst2"]["model"]["files"][0]["path"] = path
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    done = run_script("prepare.py", "--lock", lock, "--cache", tmp_path / "c")
    assert done.returncode == 2
    assert "files[0].path: expected a relative, normalized path inside the resource" in one_paragraph(done.stderr)
    assert not (tmp_path / "c").exists()


def test_a_manifest_pin_edited_to_null_does_not_bypass_the_lock(embedded_cache, tmp_path):
    cache = tmp_path / "cache"
    shutil.copytree(embedded_cache, cache)
    manifest = json.loads((cache / "manifest.json").read_text())
    entry = next(f for f in manifest["files"] if f["path"] == "model/model.safetensors")
    entry["locked_sha256"] = None
    (cache / "manifest.json").write_text(json.dumps(manifest))
    done = run_script("run.py", "--profile", "embedded", "--cache", cache, "--smoke", "--out", tmp_path / "o",
                      "--private", tmp_path / "p")
    assert done.returncode == 1
    assert "model/model.safetensors records the lock pin None, but" in one_paragraph(done.stderr)
    assert not (tmp_path / "o").exists()


def test_no_record_publishes_a_local_folder_and_bundle_refuses_an_absolute_one(tmp_path, embedded_cache, capsys):
    lock = local_lock(tmp_path, embedded_cache)  # absolute folders, as a quick local lock would have them
    cache = tmp_path / "c"
    assert run_script("prepare.py", "--lock", lock, "--profile", "mine", "--cache", cache).returncode == 0
    done = run_script("run.py", "--lock", lock, "--profile", "mine", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "local")
    assert done.returncode == 0, done.stderr[-2000:]
    for record in (tmp_path / "out").iterdir():
        assert str(embedded_cache) not in record.read_text(errors="replace"), record.name
    code, out = audit(capsys, "--lock", lock, "--out", tmp_path / "out", "--cache", cache,
                      "--bundle", "--results", tmp_path / "results")
    assert code == 2, out
    assert (f"{lock}: profiles.mine.data.path is the absolute folder '{embedded_cache / 'data'}'; a bundle carries "
            "the lock as it is and would publish it.") in " ".join(out.split())
    assert not (tmp_path / "results" / "local.tar.gz").exists()


# what describes the running machine, not the measurement: shown, held by nothing (timings.total is held: the sum)
RUN_DESCRIPTIVE = ("peak_rss_bytes", "processes", "resources.*.size", "resources.*.source", *(
    f"timings.{step}" for step in ("checks", "imports", "independent", "model_load", "official", "verify")))


def test_every_field_of_a_run_record_is_held_or_descriptive(full_run, embedded_cache, tmp_path, capsys):
    """Each leaf of a full run's run.json (its first two questions and split entries) changed alone and the folder
    audited (structural): exit 1 or 2, but for what describes the running machine (RUN_DESCRIPTIVE): exit 4. An
    edit nobody notices rides along unchecked: a resource's lock pin did, before this test."""
    from support.json_paths import every_leaf_held
    from sst2_audit.cli import audit_main

    run = tmp_path / "run"
    shutil.copytree(full_run / "out", run)
    common = ["--out", str(run), "--cache", str(embedded_cache), "--structural"]
    counted = every_leaf_held(run / "run.json", lambda: (audit_main(common), capsys.readouterr().out),
                              RUN_DESCRIPTIVE, skip=lambda path: any(isinstance(key, int) and key > 1
                                                                     for key in path[:3]))
    assert counted["held"] > 150 and counted["descriptive"] >= 12, counted
