"""Groups: an lm-eval group run as its subtasks (each an ordinary run) and lm-eval's aggregation re-derived."""

import json
import random

import pytest

from support.builders import prepare_and_run_group
from support.paths import DEMOS
from support.processes import one_paragraph, run_script
from sst2_audit.formats.releases import release_of
from sst2_audit.task import group
from sst2_audit.util.errors import InputError
from sst2_audit.formats.lock import load_lock, parse_lock


def test_our_aggregation_equals_lm_eval_s_bit_for_bit_on_generated_groups():
    """300 generated groups (1-60 subtasks of 2-300 rows, accuracies k/n, stderrs as lm-eval computes them):
    aggregate_subtask_metrics and pooled_sample_stderr against ours, weighted and not."""
    from lm_eval.api.metrics import aggregate_subtask_metrics, mean_stderr, pooled_sample_stderr

    rng = random.Random(68)
    for _ in range(300):
        sizes = [rng.randint(2, 300) for _ in range(rng.randint(1, 60))]
        values, stderrs = [], []
        for n in sizes:
            right = [float(rng.random() < 0.4) for _ in range(n)]
            values.append(sum(right) / n)
            stderrs.append(mean_stderr(right))
        for weighted in (True, False):
            assert group.aggregate(values, sizes, weighted) == aggregate_subtask_metrics(values, sizes, weighted)
            # 0.4.9.2 pools the stderr of an unweighted mean too (0.4.13 does not: test_release_0413)
            spec = group.GroupSpec(None, (), (("acc", weighted),), (), (), release_of("0.4.9.2").group_unweighted_stderr)
            members = [{"acc": v, "acc_stderr": e} for v, e in zip(values, stderrs)]
            assert group.numbers(spec, members, sizes)["acc_stderr"] == float(pooled_sample_stderr(stderrs, sizes))
        assert group.pooled_stderr(stderrs, sizes) == float(pooled_sample_stderr(stderrs, sizes))


def test_the_release_s_default_weighting_is_lm_eval_s():
    """An aggregate_metric_list entry without weight_by_size takes AggMetricConfig's default: False in 0.4.9.2."""
    from lm_eval.api.group import AggMetricConfig

    assert AggMetricConfig(metric="acc").weight_by_size is release_of("0.4.9.2").group_weight_by_size_default is False
    assert group._aggregate({"aggregate_metric_list": [{"metric": "acc"}]}, "g", False) == (("acc", False),)


def test_the_mmlu_group_is_read_from_its_pinned_yamls():
    spec = group.group_spec(load_lock(DEMOS), "mmlu-demo")
    assert spec.yaml_files == tuple(f"lm_eval/tasks/mmlu/default/_mmlu{p}.yaml"
                                    for p in ("", "_stem", "_other", "_social_sciences", "_humanities"))
    assert spec.aggregate == (("acc", True),) and len(spec.leaves) == 57 and spec.pin.rows == 4
    assert [task for task, _ in spec.members] == ["mmlu_college_mathematics", "mmlu_elementary_mathematics",
                                                  "mmlu_high_school_computer_science"]


@pytest.mark.parametrize("change, message", [
    (lambda g: g.update(rows=1), "groups.mmlu-demo.rows: expected 2..64 dev rows per subtask, got 1."),
    (lambda g: g.update(profiles=["embedded-mmlu-elementary-mathematics", "nope"]),
     "groups.mmlu-demo.profiles: expected distinct profiles of this lock, got ['embedded-mmlu-elementary-mathematics', 'nope']."),
    (lambda g: g.update(yaml="lm_eval/tasks/mmlu/default/_unpinned.yaml"),
     "groups.mmlu-demo.yaml: lm_eval/tasks/mmlu/default/_unpinned.yaml is not pinned in evaluator.files."),
    (lambda g: g.update(profiles=["embedded-mmlu-elementary-mathematics", "embedded-mmlu-elementary-mathematics"]),
     "expected distinct profiles of this lock"),
])
def test_a_bad_group_entry_is_named(tmp_path, change, message):
    raw = json.loads(DEMOS.read_text())
    change(raw["groups"]["mmlu-demo"])
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_lock(raw, tmp_path / "lock.json", "")


def test_a_subtask_outside_the_group_is_refused(tmp_path):
    raw = json.loads(DEMOS.read_text())
    raw["groups"]["mmlu-demo"]["profiles"].append("embedded-mrpc")
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps(raw))
    done = run_script("prepare.py", "--lock", lock, "--group", "mmlu-demo", "--cache", tmp_path / "cache")
    assert done.returncode == 2 and "groups.mmlu-demo: mrpc is not a subtask of mmlu." in one_paragraph(done.stderr)


@pytest.mark.slow
def test_mmlu_as_a_group_of_the_demo_subjects_end_to_end(tiny_demos, tmp_path):
    """prepare and run the group (three 5-shot subjects, 4 rows each), the audit of every subtask and the group
    level PASS; a changed group number, a changed subtask record or card is named. The group is the point, not the
    model: a tiny one (the real model runs the inverse-scaling tag and the MMLU-shaped subject at five shots)."""
    import shutil

    cache, out, record, runs = prepare_and_run_group(tiny_demos, "mmlu-demo", tmp_path, "mmlu-group")
    assert [m["task"] for m in record["members"]] == ["mmlu_college_mathematics", "mmlu_elementary_mathematics",
                                                      "mmlu_high_school_computer_science"]
    assert all(r["mode"] == "first-4" and len(r["questions"]) == 4 and r["max_abs_diff"] == 0.0 for r in runs)
    correct = sum(r["summaries"]["official"]["acc"]["correct"] for r in runs)
    assert record["official"] == record["independent"] and abs(record["official"]["acc"] - correct / 12) < 1e-15
    assert record["leaves_installed"] == 57 and "3 of the group's 57 installed subtasks" in (out / "GROUP.md").read_text()
    done = run_script("audit.py", "--lock", tiny_demos, "--out", out, "--cache", cache, "--bundle", "--results",
                      tmp_path / "results")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == lines[-2] == ("VERDICT: PASS: every subtask's audit passed with every scored row rescored bit for "
                                     "bit and the group record was checked, its numbers re-derived; exit 0")
    assert lines[-1] == f"bundle: {tmp_path / 'results' / 'mmlu-group.tar.gz'}"
    done = run_script("audit.py", "--lock", tiny_demos, "--bundle-file", tmp_path / "results" / "mmlu-group.tar.gz",
                      "--cache", cache, "--structural")
    assert done.returncode == 4 and "group: PASS" in done.stdout and "its numbers re-derived; exit 4" in done.stdout, \
        done.stdout + done.stderr
    assert lines.count("--- subtask mmlu_college_mathematics: VERDICT: PASS: every level passed and every scored row "
                       "was rescored bit for bit; exit 0") == 1
    _every_field_of_the_group_record_is_held(tiny_demos, cache, out)
    for name, change, expected in (
        ("number", lambda: _edit_json(out / "group.json", lambda r: r["official"].update(acc=0.5)),
         "group numbers: official (lm-eval's aggregation of its numbers, re-derived): expected {'acc': "),
        ("run", lambda: _edit_json(out / "mmlu_college_mathematics" / "run.json", lambda r: r.update(run_name="x")),
         "subtask mmlu_college_mathematics: run.json sha256: expected"),
        ("card", lambda: (out / "GROUP.md").write_text("# Group mmlu\n"), "group: GROUP.md (regenerated from group.json)"),
        ("lock", lambda: _edit_json(out / "group.json", lambda r: r.update(lock_sha256="0" * 64)),
         "group: lock_sha256 (the reviewer's lock): expected"),
        # a member folder the reviewer's lock does not name is named, never opened
        ("path", lambda: _edit_json(out / "group.json", lambda r: r["members"][0].update(
            task="../pristine/mmlu_college_mathematics", run="../pristine/mmlu_college_mathematics")),
         "group: members (task, profile), in order: expected"),
    ):
        shutil.copytree(out, tmp_path / "pristine", dirs_exist_ok=False) if name == "number" else None
        change()
        done = run_script("audit.py", "--lock", tiny_demos, "--out", out, "--cache", cache, "--structural")
        assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL ("), done.stdout + done.stderr
        assert expected in done.stdout, done.stdout
        shutil.rmtree(out)
        shutil.copytree(tmp_path / "pristine", out)


def _every_field_of_the_group_record_is_held(lock, cache, out) -> None:
    """Each leaf of group.json (the first subtask's entry for all three) changed alone, the folder audited
    (structural): exit 1 or 2. An edit nobody notices rides along unchecked: the lock it names did, before."""
    from sst2_audit.cli import audit_main
    from support.json_paths import every_leaf_held

    command = ["--lock", str(lock), "--out", str(out), "--cache", str(cache), "--structural"]
    counted = every_leaf_held(out / "group.json", lambda: (audit_main(command), ""),
                              skip=lambda path: path[:1] == ("members",) and path[1] > 0)
    assert counted["held"] > 20, counted


def _edit_json(path, change) -> None:
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw, indent=2))


@pytest.mark.slow
def test_inverse_scaling_mc_a_tag_runs_its_tasks_and_reports_no_group_number(tmp_path):
    """lm-eval 0.4.9.2 defines inverse_scaling_mc as a tag: three of its tasks, 4 rows each, each an ordinary run;
    no group number, each subtask's acc and acc_norm in group.json and GROUP.md."""
    cache, out = tmp_path / "cache", tmp_path / "out"
    assert run_script("prepare.py", "--lock", DEMOS, "--group", "inverse-scaling-demo", "--cache", cache).returncode == 0
    done = run_script("run.py", "--lock", DEMOS, "--group", "inverse-scaling-demo", "--cache", cache, "--out", out,
                      "--private", tmp_path / "private", "--run-name", "is-group")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "no group number: lm-eval reports none for inverse_scaling_mc" in done.stdout
    record = json.loads((out / "group.json").read_text())
    assert record["aggregate"] == [] and record["official"] == record["independent"] == {}
    assert [m["task"] for m in record["members"]] == ["inverse_scaling_neqa", "inverse_scaling_quote_repetition",
                                                      "inverse_scaling_redefine_math"]
    assert all(sorted(m["official"]) == ["acc", "acc_norm", "acc_norm_stderr", "acc_stderr"] for m in record["members"])
    assert record["group_yaml_files"] == {"lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml": json.loads(
        DEMOS.read_text())["evaluator"]["files"]["lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml"]}
    done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", cache, "--structural")
    assert done.returncode == 4 and done.stdout.splitlines()[0] == (
        "VERDICT: SCORES NOT VERIFIED: every subtask's audit found no problem but not everything was verified (see "
        "each subtask) and the group record was checked; exit 4"), done.stdout
    assert "group: PASS (32 checks)" in done.stdout
    done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", cache, "--rescore", "5")
    assert done.returncode == 2 and ("--rescore 5: each subtask of group inverse-scaling-demo scores 4 rows (the "
                                     "reviewer's lock); give at most 4 or 'all'.") in one_paragraph(done.stderr)
    _group_bundle_round_trip(tmp_path, out, cache)


def _group_bundle_round_trip(tmp_path, out, cache):
    """--bundle on a group folder packs one file of group.json, GROUP.md and each subtask's run bundle; its default
    audit rescores every row of every subtask; a changed subtask bundle and an extra member are refused."""
    import tarfile

    from support.bundles import members_of, pack

    results = tmp_path / "results"
    done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", cache, "--structural", "--bundle",
                      "--results", results)
    packed = results / "is-group.tar.gz"
    assert done.returncode == 4 and done.stdout.splitlines()[-1] == f"bundle: {packed}", done.stdout + done.stderr
    done = run_script("audit.py", "--lock", DEMOS, "--out", out, "--cache", cache, "--bundle", "--results", results)
    assert done.returncode == 2 and done.stdout == "", done.stdout  # refused before the audit's work
    assert f"{packed} already exists; a bundle is never overwritten." in one_paragraph(done.stderr)
    tasks = ["inverse_scaling_neqa", "inverse_scaling_quote_repetition", "inverse_scaling_redefine_math"]
    with tarfile.open(packed) as archive:  # what GNU tar and Python's tarfile list: the same plain names
        assert archive.getnames() == [f"is-group/{name}" for name in
                                      ["GROUP.md", "SHA256SUMS", "group.json", *(f"{t}.tar.gz" for t in tasks)]]
    done = run_script("audit.py", "--lock", DEMOS, "--bundle-file", packed, "--cache", cache)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == lines[-1] == ("VERDICT: PASS: every subtask's audit passed with every scored row rescored bit "
                                     "for bit and the group record was checked; exit 0"), done.stdout
    assert sum(line.startswith("  all 4 scored rows rescored") for line in lines) == 3, done.stdout
    assert f"audit of {packed} ({tasks[0]}.tar.gz): run is-group-{tasks[0]}" in done.stdout
    done = run_script("audit.py", "--lock", DEMOS, "--bundle-file", packed, "--trust-bundle-lock")
    assert done.returncode == 2 and "a group is audited against the reviewer's lock (--lock) only" in done.stderr
    done = run_script("audit.py", "--lock", DEMOS, "--compare", packed, out)
    assert done.returncode == 2 and f"--compare {packed}: a group; compare two runs" in one_paragraph(done.stderr)
    members = members_of(packed)
    inner = members_of(_write(tmp_path / "inner.tar.gz", members[f"{tasks[0]}.tar.gz"]))
    inner["run.json"] = inner["run.json"].replace(b'"run_name": "is-group-', b'"run_name": "is-groUp-')
    pack(tmp_path / "inner.tar.gz", inner, top=tasks[0])
    members[f"{tasks[0]}.tar.gz"] = (tmp_path / "inner.tar.gz").read_bytes()
    pack(tmp_path / "changed.tar.gz", members, top="is-group")
    done = run_script("audit.py", "--lock", DEMOS, "--bundle-file", tmp_path / "changed.tar.gz", "--structural",
                      "--cache", cache)
    assert done.returncode == 1 and f"subtask {tasks[0]}: run.json sha256: expected" in done.stdout, done.stdout
    members["notes.txt"] = b"trust me\n"
    pack(tmp_path / "extra.tar.gz", members, top="is-group")
    done = run_script("audit.py", "--lock", DEMOS, "--bundle-file", tmp_path / "extra.tar.gz", "--structural",
                      "--cache", cache)
    assert done.returncode == 1 and "unexpected 'notes.txt'." in one_paragraph(done.stderr), done.stderr
    assert done.stdout.startswith("VERDICT: FAIL (group bundle SHA256SUMS and members)")


def _write(path, body):
    path.write_bytes(body)
    return path


def test_a_group_bundle_name_too_long_for_plain_ustar_names_is_refused_before_packing(tmp_path):
    from sst2_audit.formats import records
    from sst2_audit.bundle.group import bundle_target

    member = records.GroupMember("inverse_scaling_quote_repetition", "p", "inverse_scaling_quote_repetition", "0" * 64,
                                 4, {}, {})
    record = records.GroupRecord("g" * 64, "inverse-scaling-demo", "inverse_scaling_mc", True, "demo", "0" * 64, {}, [],
                                 3, 4, [member], {}, {})
    with pytest.raises(InputError, match=r"is too long for plain ustar names with its subtask bundles \(at most 60 "):
        bundle_target(record, tmp_path / "results")
    record.run_name = "g" * 60
    assert bundle_target(record, tmp_path / "results") == tmp_path / "results" / f"{'g' * 60}.tar.gz"
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_group_pinned_from_your_own_model_and_data_runs_audits_and_bundles(embedded_cache, tmp_path):
    """prepare.py --pin-group: two MMLU subjects from folders of one's own and a tiny model, one new lock with a
    profile per subtask (the model pinned once, shared), then the group's journey: prepare, run, audit, bundle,
    the bundle audited. A refusal after a subtask was pinned leaves nothing behind."""
    import shutil

    from support.builders import tiny_model_folder
    from support.paths import REPO

    model, data = tmp_path / "locks" / "my-model", tmp_path / "my-data"  # the model inside the lock's folder
    tiny_model_folder(model, 13, embedded_cache)
    subjects = ("elementary_mathematics", "college_mathematics")
    for subject in subjects:
        shutil.copytree(REPO / "data" / "demo" / "mmlu" / subject, data / subject)
    lock = tmp_path / "locks" / "mine.lock.json"
    pin = ["prepare.py", "--pin-group", "mine", "--task", "mmlu", "--model", model, "--new-lock", lock, "--rows", "3",
           *(f for subject in subjects for f in ("--subtask", f"mmlu_{subject}={data / subject}"))]
    done = run_script(*pin, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"pinned: {lock} = resources.lock.json + group mine (mmlu, "
                                  "lm_eval/tasks/mmlu/default/_mmlu.yaml, 3 dev rows per subtask) with profiles "
                                  "mine-mmlu_elementary_mathematics, mine-mmlu_college_mathematics; next: "), done.stdout
    assert "mmlu_college_mathematics: input length: longest scored input " in done.stdout  # the shared tokenizer too
    raw = json.loads(lock.read_text())
    assert raw["groups"]["mine"] == {"group": "mmlu", "yaml": "lm_eval/tasks/mmlu/default/_mmlu.yaml", "rows": 3,
                                     "profiles": ["mine-mmlu_elementary_mathematics", "mine-mmlu_college_mathematics"]}
    assert {raw["profiles"][p]["model"] for p in raw["groups"]["mine"]["profiles"]} == \
        {"mine-mmlu_elementary_mathematics"}  # one model entry, shared
    assert sorted(p.name for p in lock.parent.iterdir()) == [
        "mine-mmlu_college_mathematics-data", "mine-mmlu_elementary_mathematics-data", "mine.lock.json", "my-model"]
    cache = tmp_path / "cache"
    for step in (["prepare.py", "--lock", lock, "--group", "mine", "--cache", cache],
                 ["run.py", "--lock", lock, "--group", "mine", "--cache", cache, "--run-name", "mine-group"]):
        done = run_script(*step, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    # the audit as it must be typed: this environment's command, the cache ./cache here, the default: left out
    from sst2_audit.util.commands import command_line

    assert done.stdout.rstrip().endswith(command_line("audit", "--out", "runs/mine-group", "--lock", lock)), done.stdout
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "runs" / "mine-group", "--cache", cache,
                      "--bundle", "--results", tmp_path / "results", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
    done = run_script("audit.py", "--lock", lock, "--bundle-file", tmp_path / "results" / "mine-group.tar.gz",
                      "--cache", cache, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
    # a subtask outside the group: refused before anything is converted; a missing folder after the first pin:
    # the first subtask's data folder and the intermediate lock are removed again
    for subtask, message in (("arc_easy", "--subtask arc_easy: not a subtask of mmlu"),
                             ("mmlu_college_mathematics", "no such file or folder")):
        again = [*pin[:pin.index("--new-lock") + 1], tmp_path / "locks" / "again.lock.json", "--subtask",
                 f"mmlu_elementary_mathematics={data / subjects[0]}", "--subtask", f"{subtask}={data / 'none'}"]
        again[again.index("mine")] = "again"
        done = run_script(*again, cwd=tmp_path)
        assert done.returncode == 2 and message in one_paragraph(done.stderr), done.stderr
        assert sorted(p.name for p in lock.parent.iterdir()) == [
            "mine-mmlu_college_mathematics-data", "mine-mmlu_elementary_mathematics-data", "mine.lock.json",
            "my-model"]
