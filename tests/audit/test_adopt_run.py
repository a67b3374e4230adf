"""A run as it was made (issue 65): real `lm_eval` console runs of two tasks (sst2 + rte demo) and of a group (an
MMLU demo group of three subjects plus sst2 at 5 shots) on a tiny model, adopted by one `sst2-audit adopt OUT` with no
--profile; a tampered task, a task no profile pins, a --task selection, an edited run record. Runs under this
environment's release (.ci/run runs the file under 0.4.9.2 and 0.4.13)."""

import json
import shutil
from pathlib import Path

import pytest

from support.builders import built_once, tiny_model_lock
from support.paths import DEMOS, LOCK, REPO, TEST_CACHE, VENV_BIN
from support.processes import launched, run_script
from sst2_audit.formats.releases import installed_version
from support.lm_eval_files import edit_sample
from support.plain_runs import ADOPTING_MACHINE, lm_eval_tasks, task_yamls

ROWS = 8
RELEASE = installed_version()
LOCKS = {"0.4.9.2": (LOCK, DEMOS),
         "0.4.13": (REPO / "lm-eval-0.4.13.lock.json", REPO / "demos-lm-eval-0.4.13.lock.json")}[RELEASE]
SST2 = "sst2"


def _two_tasks(base: Path) -> None:
    lock = tiny_model_lock(LOCKS[0], base, TEST_CACHE / "embedded")
    found = task_yamls(lock, ["embedded", "embedded-rte"], base)
    lm_eval_tasks(base, [str(path) for path, _ in found.values()], {task: ids for task, (_, ids) in found.items()})


def _group(base: Path) -> None:
    """The MMLU demo group's three subjects as an inline group named mmlu (the pinned group's name, aggregated by
    size as its YAML says), plus sst2 at 5 shots outside the group (not cola: lm-eval's bootstrap of its mcc stderr
    took 90 of this fixture's 100 s of lm-eval, in each release)."""
    import yaml

    lock = tiny_model_lock(LOCKS[1], base, TEST_CACHE / "embedded")
    subjects = ["embedded-mmlu-elementary-mathematics", "embedded-mmlu-high-school-computer-science",
                "embedded-mmlu-college-mathematics"]
    found = task_yamls(lock, [*subjects, "embedded-sst2-5shot"], base)
    inline = [yaml.safe_load(path.read_text()) for task, (path, _) in found.items() if task.startswith("mmlu_")]
    group = base / "include" / "mmlu_demo_group.yaml"
    group.parent.mkdir()
    group.write_text(yaml.safe_dump({"group": "mmlu", "task": inline, "metadata": {"version": 2},
                                     "aggregate_metric_list": [{"metric": "acc", "weight_by_size": True}]}))
    # 0.4.9.2 takes the group's YAML path (its --include_path breaks the task listing it prints); 0.4.13 reads a
    # YAML path as one task's config, so the group is found by name in --include_path
    named, more = (str(group), ()) if RELEASE == "0.4.9.2" else ("mmlu", ("--include_path", str(group.parent)))
    lm_eval_tasks(base, [named, str(found["sst2"][0])], {task: ids for task, (_, ids) in found.items()}, more=more)


@pytest.fixture(scope="session")
def two_tasks(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, f"two-task-run-{RELEASE}", _two_tasks)


@pytest.fixture(scope="session")
def group_run(tmp_path_factory) -> Path:
    return built_once(tmp_path_factory, f"group-run-{RELEASE}", _group)


def sst2_audit(base: Path, *args, cwd: Path, lock: Path):
    return run_script(str(VENV_BIN / "sst2-audit"), *args, "--lock", base / lock.name, "--cache", base / "cache",
                      cwd=cwd)


def copy_sorted(base: Path, target: Path) -> Path:
    shutil.copytree(base / "out", target)
    return next(target.glob("*/results_*.json"))


def test_a_two_task_run_is_adopted_in_one_command_and_its_folder_and_bundle_pass(two_tasks, tmp_path):
    done = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--run-name", "two", "--bundle", "--seed", "1",
                      "--export-eee", tmp_path / "eee", cwd=tmp_path, lock=LOCKS[0])
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0] == lines[-5] == "VERDICT: PASS: every task's audit passed with every scored row rescored bit " \
                                    "for bit; exit 0"
    exported = {json.loads(path.read_text())["evaluation_results"][0]["evaluation_name"]: json.loads(path.read_text())
                for path in (tmp_path / "eee").rglob("*[0-9a-f].json")}
    assert sorted(exported) == ["rte", "sst2"] and [line.split(":")[0] for line in lines[-3:-1]] == ["every eval ever"] * 2
    assert {task: record["source_metadata"]["additional_details"]["sst2_audit_verdict"]
            for task, record in exported.items()} == {"rte": "PASS", "sst2": "PASS"}
    assert lines[1].startswith("rte acc: reported ") and lines[2].startswith("sst2 acc: reported ")
    table = lines[lines.index(next(line for line in lines if line.startswith("task  "))):][:3]
    assert [row.split()[:3] + row.split()[5:6] for row in table[1:]] == [["rte", "embedded-rte", "8", "0"],
                                                                         ["sst2", "embedded", "8", "0"]]
    assert "[model] the model verified and loaded for an earlier task in this process" in done.stderr
    assert done.stderr.count("rescore: verify and load the model") == 1
    record = json.loads((tmp_path / "runs" / "two" / "adopted-run.json").read_text())
    assert [(t["task"], t["profile"], t["exit_code"]) for t in record["tasks"]] == [("rte", "embedded-rte", 0),
                                                                                   ("sst2", "embedded", 0)]
    assert sorted(p.name for p in (tmp_path / "runs" / "two").iterdir()) == ["adopted-run.json", "rte", "sst2"]
    for target in (["--out", "runs/two"], ["--bundle-file", "results/two.tar.gz"]):
        done = sst2_audit(two_tasks, "audit", *target, cwd=tmp_path, lock=LOCKS[0])
        assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS: every task's audit passed"), \
            done.stdout + done.stderr
        assert done.stdout.count("adopted record: PASS") == 2 and "run record and groups: PASS" in done.stdout
    done = sst2_audit(two_tasks, "audit", "--out", "runs/two", "--structural", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 4 and done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: every task's audit found "
                                                           "no problem"), done.stdout  # the audit's own policy


def test_one_task_tampered_fails_the_run_naming_the_task_and_the_row(two_tasks, tmp_path):
    results = copy_sorted(two_tasks, tmp_path / "out")
    samples = next(results.parent.glob("samples_rte_*.jsonl"))
    idx = edit_sample(samples, 2, lambda r: r.__setitem__("doc_id", r["doc_id"] + 1))
    done = sst2_audit(two_tasks, "adopt", tmp_path / "out", "--seed", "1", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (rte); exit 1"), done.stdout + done.stderr
    assert "rte   embedded-rte  8     0.500     not rescored here  1     failed: identity" in done.stdout
    assert f"logged doc_id {idx} holds the doc of row idx [{idx - 1}]" in done.stdout and "nothing written" in done.stdout and not (tmp_path / "runs").exists()


def test_a_task_no_profile_pins_is_listed_with_its_pin_command_and_limits_the_verdict(two_tasks, tmp_path):
    results = copy_sorted(two_tasks, tmp_path / "out")
    raw = json.loads(results.read_text())
    for key in ("results", "configs", "n-shot", "n-samples", "versions", "task_hashes", "higher_is_better"):
        if SST2 in raw.get(key, {}):
            raw[key]["my_task"] = raw[key].pop(SST2)
    raw["group_subtasks"] = {("my_task" if k == SST2 else k): v for k, v in raw.get("group_subtasks", {}).items()}
    results.write_text(json.dumps(raw))
    samples = next(results.parent.glob(f"samples_{SST2}_*.jsonl"))
    samples.rename(samples.with_name(samples.name.replace(f"samples_{SST2}_", "samples_my_task_")))
    done = sst2_audit(two_tasks, "adopt", tmp_path / "out", "--seed", "1", "--run-name", "one", cwd=tmp_path,
                      lock=LOCKS[0])
    first = done.stdout.splitlines()[0]
    assert done.returncode == 4, done.stdout + done.stderr
    assert first.startswith("VERDICT: SCORES NOT VERIFIED: every task's audit found no problem but not everything "
                            "was verified (see each task); task my_task: no profile of the lock pins it, not adopted "
                            "(pin it: ")
    assert "--pin NAME --task my_task --model MODEL --data " in first and first.endswith("; exit 4")
    done = sst2_audit(two_tasks, "audit", "--out", "runs/one", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 4 and "task my_task: no profile of the lock pins it" in done.stdout.splitlines()[0]
    record = tmp_path / "runs" / "one" / "adopted-run.json"
    raw = json.loads(record.read_text())
    raw["left_out"], raw["limits"] = {}, []  # a forger hides the task the lock does not pin: exit 0 is not bought
    record.write_text(json.dumps(raw))
    done = sst2_audit(two_tasks, "audit", "--out", "runs/one", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "task my_task: in the run's results (n-samples) but neither adopted nor listed as left out" in done.stdout


def test_a_task_selection_is_named_and_a_run_of_another_task_names_what_takes_it(two_tasks, tmp_path):
    done = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--task", "rte", "--seed", "1", cwd=tmp_path,
                      lock=LOCKS[0])
    assert done.returncode == 4 and "task sst2: not selected (--task), not adopted; exit 4" in \
        done.stdout.splitlines()[0], done.stdout + done.stderr
    done = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--task", "cola", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 2 and "--task cola: the run at " in done.stderr
    assert "logged samples of task(s) rte, sst2 only." in done.stderr


def test_a_group_run_is_adopted_with_the_group_re_aggregated_and_a_forged_group_number_fails(group_run, tmp_path):
    done = sst2_audit(group_run, "adopt", group_run / "out", "--run-name", "g", "--bundle", "--seed", "1",
                      cwd=tmp_path, lock=LOCKS[1])
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0] == ("VERDICT: PASS: every task's audit passed with every scored row rescored bit for bit and the "
                        "run's groups were re-aggregated from them; exit 0")
    group = next(line for line in lines if line.startswith("mmlu acc (group): reported "))
    reported = json.loads(next((group_run / "out").glob("*/results_*.json")).read_text())["groups"]["mmlu"]
    assert group == f"mmlu acc (group): reported {reported['acc,none']:.3f} (their scores) / rescored " \
                    f"{reported['acc,none']:.3f} (yours, re-aggregated)"
    assert "groups: PASS (2 checks)" in lines
    record = json.loads((tmp_path / "runs" / "g" / "adopted-run.json").read_text())
    assert record["groups"][0]["rederived"] == {"acc": reported["acc,none"], "acc_stderr": reported["acc_stderr,none"]}
    done = sst2_audit(group_run, "audit", "--bundle-file", "results/g.tar.gz", cwd=tmp_path, lock=LOCKS[1])
    assert done.returncode == 0, done.stdout + done.stderr
    results = copy_sorted(group_run, tmp_path / "forged")
    raw = json.loads(results.read_text())
    raw["groups"]["mmlu"]["acc,none"] += 0.125
    raw["results"]["mmlu"]["acc,none"] = raw["groups"]["mmlu"]["acc,none"]
    results.write_text(json.dumps(raw))
    done = sst2_audit(group_run, "adopt", tmp_path / "forged", "--seed", "1", cwd=tmp_path, lock=LOCKS[1])
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (groups); exit 1"), done.stdout
    assert "groups.mmlu: acc,none (re-aggregated from the subtasks' re-derived numbers): expected " in done.stdout


def test_an_edited_run_record_fails_the_folder_audit(group_run, tmp_path):
    """The run record's group numbers, a task's reported number and the lock it names are each held (the task's
    number to its adopted.json's, the lock to the reviewer's): each edit alone exit 1, naming the field."""
    done = sst2_audit(group_run, "adopt", group_run / "out", "--run-name", "g", "--structural", cwd=tmp_path,
                      lock=LOCKS[1])
    assert done.returncode == 4, done.stdout + done.stderr
    edits = {"adopted-run.json: groups (re-derived here): expected ": lambda r: r["groups"][0]["rederived"].update(
                 acc=r["groups"][0]["rederived"]["acc"] + 0.125),
             "tasks.sst2: reported (its adopted.json's): expected ": lambda r: r["tasks"][-1]["reported"].update(
                 acc=r["tasks"][-1]["reported"]["acc"] + 0.125),
             "adopted-run.json: lock_sha256 (your lock's): expected ": lambda r: r.update(lock_sha256="0" * 64)}
    for number, (named, edit) in enumerate(edits.items()):
        shutil.copytree(tmp_path / "runs" / "g", tmp_path / "runs" / f"e{number}")
        record = tmp_path / "runs" / f"e{number}" / "adopted-run.json"
        raw = json.loads(record.read_text())
        edit(raw)
        record.write_text(json.dumps(raw))
        done = sst2_audit(group_run, "audit", "--out", f"runs/e{number}", "--structural", cwd=tmp_path,
                          lock=LOCKS[1])
        assert done.returncode == 1 and named in done.stdout, done.stdout + done.stderr


# what describes the adopting machine or names its files, not the measurement: shown as claims, held by nothing
DESCRIPTIVE = (*ADOPTING_MACHINE, "source.results_file", "source.samples_file", "source.samples_sha256",
               "tasks.*.exit_code")


def test_every_field_of_an_adopted_run_s_records_is_held_or_descriptive(two_tasks, tmp_path, capsys):
    """Each leaf of adopted-run.json and of a task's adopted.json (its first two rows) changed alone and the folder
    audited (structural): exit 1 or 2 naming it, but for what describes the adopting machine or names its files
    (DESCRIPTIVE): exit 4. An edit nobody notices is a field that rides along unchecked: the run record's reported
    numbers and the lock it names did, before this test."""
    from sst2_audit.cli import audit_main
    from support.json_paths import every_leaf_held

    done = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--run-name", "l", "--structural", cwd=tmp_path,
                      lock=LOCKS[0])
    assert done.returncode == 4, done.stdout + done.stderr
    folder = tmp_path / "runs" / "l"
    common = ["--lock", str(two_tasks / LOCKS[0].name), "--cache", str(two_tasks / "cache"), "--structural",
              "--out", str(folder)]
    counted = [every_leaf_held(folder / name, lambda: (audit_main(common), capsys.readouterr().out), DESCRIPTIVE,
                               skip=lambda path: path[:1] == ("questions",) and path[1] > 1)
               for name in ("adopted-run.json", "rte/adopted.json")]
    assert sum(c["held"] for c in counted) > 100 and sum(c["descriptive"] for c in counted) > 30, counted


def test_a_run_folder_with_a_task_folder_emptied_or_swapped_fails_naming_it(two_tasks, tmp_path):
    """The first task's adopted.json and results copy removed (the run's results file is then read from the task that
    passed), or a lighteval run's public copy put in a task's folder: exit 1 naming the task, never our bug. Files
    someone added beside the records are named as read by no level (the verdict unchanged)."""
    from sst2_audit.formats.lighteval_details import public_copy, read_run

    done = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--run-name", "r", "--structural", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 4, done.stdout + done.stderr
    record = json.loads((tmp_path / "runs" / "r" / "adopted-run.json").read_text())
    first, second = (member["task"] for member in record["tasks"])
    shutil.copytree(tmp_path / "runs" / "r", tmp_path / "runs" / "swapped")
    shutil.copytree(tmp_path / "runs" / "r", tmp_path / "runs" / "extra")  # files someone added: named, not read
    (tmp_path / "runs" / "extra" / "NOTES.txt").write_text("verified")
    (tmp_path / "runs" / "extra" / first / "REVIEW.md").write_text("verified")
    done = sst2_audit(two_tasks, "audit", "--out", "runs/extra", "--structural", cwd=tmp_path, lock=LOCKS[0])
    unread = "  in the folder but no part of it, so neither read nor vouched for here: "
    assert done.returncode == 4 and f"{unread}NOTES.txt" in done.stdout.splitlines(), done.stdout
    assert f"{unread}REVIEW.md" in done.stdout.splitlines() and done.stdout.count(unread) == 2, done.stdout
    for name in ("adopted.json", "lm_eval_results.json"):
        (tmp_path / "runs" / "r" / first / name).unlink()
    done = sst2_audit(two_tasks, "audit", "--out", "runs/r", "--structural", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 1 and f"  - {first}: no adopted.json in its folder" in done.stdout, \
        done.stdout + done.stderr
    for name, body in public_copy(read_run(REPO / "tests" / "data" / "lighteval-0.13.0", None)).items():
        (tmp_path / "runs" / "swapped" / second / name).write_bytes(body)
    done = sst2_audit(two_tasks, "audit", "--out", "runs/swapped", "--structural", cwd=tmp_path, lock=LOCKS[0])
    assert done.returncode == 1 and f"  - {second}: its folder holds a lighteval run's copy" in done.stdout, \
        done.stdout + done.stderr


@pytest.mark.slow
def test_two_processes_under_torchrun_adopt_every_task_with_the_one_process_records(two_tasks, tmp_path):
    """torchrun over a run of two tasks: every process takes the tasks in the run's order and rescores its share of
    each; rank 0 alone reports and writes; each task's adopted.json equals the one-process adoption's apart from
    timings, the process count and the threads."""
    one = sst2_audit(two_tasks, "adopt", two_tasks / "out", "--run-name", "one", "--seed", "3", cwd=tmp_path,
                     lock=LOCKS[0])
    assert one.returncode == 0, one.stdout + one.stderr
    two = launched("adopt", two_tasks / "out", "--lock", two_tasks / LOCKS[0].name, "--cache", two_tasks / "cache",
                   "--run-name", "two", "--seed", "3", cwd=tmp_path)
    assert two.returncode == 0 and two.stdout.count("VERDICT: PASS: every task's audit passed") == 2, \
        two.stdout + two.stderr
    assert two.stderr.count("(4 in each of 2 processes)] done in ") == 2
    for task in ("rte", "sst2"):
        records = [json.loads((tmp_path / "runs" / name / task / "adopted.json").read_text()) for name in ("one", "two")]
        assert [r["rescore"]["processes"] for r in records] == [1, 2]
        for record in records:
            for key in ("timings", "rescore", "run_name", "platform"):
                record.pop(key)
        assert records[0] == records[1]
