"""lm-eval 0.4.13, in its own environment (`.ci/run` builds `.venv-0.4.13` and runs this file there; the main
suite skips it): SOURCE_MAP-0.4.13.md holds against the installed release, the embedded run and its audit pass
bit for bit under lm-eval-0.4.13.lock.json, the hook demos under its demos twin, #4084 still mislabels unsorted
ids, what the release is not supported for is refused, and a bundle of one release audited in the other's environment is a refusal naming
both (exit 2), never a FAIL. SST2_AUDIT_OTHER_PYTHON names the Python of the 0.4.9.2 environment."""

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.builders import _exclusive, built_once, prepare_and_run_group, prepare_run_audit, tiny_model_lock
from support.paths import REPO, TEST_CACHE
from support.processes import one_paragraph, run_script
from sst2_audit.formats.releases import installed_version

pytestmark = pytest.mark.skipif(installed_version() != "0.4.13",
                                reason="needs the lm-eval 0.4.13 environment (.ci/run builds .venv-0.4.13)")
LOCK = REPO / "lm-eval-0.4.13.lock.json"
PASS = "VERDICT: PASS: every level passed and every scored row was rescored bit for bit"


@pytest.fixture(scope="session")  # the session's: tests of other modules run between this module's
def cache() -> Path:
    """The embedded cache, prepared (or re-verified) under the 0.4.13 lock: its profile pins are the same."""
    folder = TEST_CACHE / "embedded"
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", LOCK, "--profile", "embedded", "--cache", folder)
    assert done.returncode == 0, done.stderr
    return folder


def test_the_0413_source_map_holds_against_the_installed_release():
    from sst2_audit.task import source_map
    from sst2_audit.task.evaluator_pin import installed_root

    rows, problems = source_map.check((REPO / "SOURCE_MAP-0.4.13.md").read_text(), installed_root(),
                                      name="SOURCE_MAP-0.4.13.md")
    assert problems == [] and len(rows) == 99
    assert {row.file for row in rows if row.step.startswith(("6 ", "41 "))} == {
        "lm_eval/config/task.py", "lm_eval/tasks/_yaml_loader.py"}


def test_the_run_s_task_index_logs_the_task_s_yaml_as_lm_eval_s_default_index_does(cache, caplog):
    """Step 40 under 0.4.13: `_log_selected_tasks` names each task's YAML from the index it is given ("N/A" when
    the name is not in it); the run's one-entry index (scoring/official.py::task_index) gives TaskManager()'s line."""
    import logging

    from lm_eval.api.task import ConfigurableTask
    from lm_eval.evaluator_utils import _log_selected_tasks
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.formats.manifest import read_manifest
    from sst2_audit.scoring.official import data_files_of, task_config, task_index
    from sst2_audit.task.spec import spec_for

    spec = spec_for(load_lock(LOCK), "sst2")
    task = ConfigurableTask(config=task_config(spec, data_files_of(cache, read_manifest(cache), spec)))
    manager = task_index(spec)
    loaded = manager.load([task])
    assert manager.all_tasks == [] and list(loaded["tasks"]) == ["sst2"] and not loaded["groups"]
    with caplog.at_level(logging.INFO):
        _log_selected_tasks(loaded["tasks"], loaded["groups"], manager)
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith("Task: ")] == [
        "Task: sst2 (glue/sst2/default.yaml)"]


def test_the_embedded_run_audits_and_bundles_bit_for_bit_under_0413(cache, tmp_path):
    done = run_script("run.py", "--lock", LOCK, "--profile", "embedded", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "s413")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "official (lm-eval 0.4.13)" in done.stdout and "4/4 candidate scores bit for bit" in done.stdout
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["evaluator"]["version"] == "0.4.13" and record["versions"]["lm_eval"] == "0.4.13"
    results = json.loads((tmp_path / "out" / "lm_eval_results.json").read_text())
    # 0.4.13 counts the scored documents as effective (0.4.9.2 counted the split): no correcting note needed
    assert results["n-samples"]["sst2"]["effective"] == 2 and results["group_subtasks"] == {}
    assert [note["field"] for note in record["lm_eval_notes"]] == ["config.model_revision", "git_hash"]
    done = run_script("audit.py", "--lock", LOCK, "--out", tmp_path / "out", "--cache", cache, "--bundle",
                      "--results", tmp_path / "results")
    assert done.returncode == 0 and done.stdout.startswith(PASS), done.stdout + done.stderr
    bundle = tmp_path / "results" / "s413.tar.gz"
    assert bundle.is_file()
    # the other release's environment and lock: refusals naming both releases, exit 2, never a FAIL
    other = os.environ.get("SST2_AUDIT_OTHER_PYTHON")
    if other:
        done = subprocess.run([other, str(REPO / "audit.py"), "--bundle-file", str(bundle), "--cache", str(cache)],
                              capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 2 and one_paragraph(done.stderr) == (
            f"error: {bundle}: the run was made with lm-eval 0.4.13, but the reviewer's lock "
            f"{REPO / 'resources.lock.json'} pins lm-eval 0.4.9.2; audit it with a lock and an environment of the "
            "release it was made with."), done.stdout + done.stderr
        done = subprocess.run([other, str(REPO / "audit.py"), "--bundle-file", str(bundle), "--lock", str(LOCK),
                               "--cache", str(cache)], capture_output=True, text=True, cwd=REPO)
        assert done.returncode == 2 and "names lm-eval 0.4.13, but this environment holds lm-eval 0.4.9.2" in \
            one_paragraph(done.stderr), done.stderr
    reference = REPO / "results" / "embedded-full-reference.tar.gz"
    done = run_script("audit.py", "--bundle-file", reference, "--lock", LOCK, "--cache", cache)
    assert done.returncode == 2 and one_paragraph(done.stderr) == (
        f"error: {reference}: the run was made with lm-eval 0.4.9.2, but the reviewer's lock {LOCK} pins lm-eval "
        "0.4.13; audit it with a lock and an environment of the release it was made with."), done.stderr
    done = run_script("audit.py", "--bundle-file", reference, "--cache", cache)
    assert done.returncode == 2 and "names lm-eval 0.4.9.2, but this environment holds lm-eval 0.4.13" in \
        one_paragraph(done.stderr), done.stderr


def test_unsorted_ids_are_still_mislabelled_by_0413(cache, tmp_path):
    """Upstream #4084 is not fixed in 0.4.13: the identity check stops the run, exit 1."""
    done = run_script("run.py", "--lock", LOCK, "--profile", "embedded", "--cache", cache, "--rows", "8",
                      "--unsorted-ids", "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "lm-eval was given the dev ids in hash order (--unsorted-ids: reproducing upstream issue #4084" in \
        done.stderr
    failure = json.loads((tmp_path / "out" / "failure.json").read_text())
    assert failure["check"] == "identity" and len(failure["mismatches"]) >= 1


@pytest.mark.parametrize("seed", range(6))
def test_the_0413_sampler_is_re_derived_draw_for_draw(seed):
    """Generated pools with copies of the evaluated doc (the case 0.4.13 resamples), both samplers, with and
    without the evaluated doc passed: our positions give lm-eval 0.4.13's own docs, in order, on one generator
    shared across questions as the task shares it."""
    import random

    from lm_eval.api.samplers import ContextSampler, FirstNSampler

    from sst2_audit.task.fewshot import ShotRule, draws

    chosen = random.Random(seed)
    pool = [{"text": f"row {chosen.randrange(6)}"} for _ in range(chosen.randrange(8, 14))]
    evaluated = [(n, chosen.choice(pool) if chosen.random() < 0.7 else {"text": "not in the pool"})
                 for n in range(25)]
    n = chosen.randrange(1, 5)
    for sampler, upstream in (("default", ContextSampler), ("first_n", FirstNSampler)):
        for extra_draw in (True, False):
            rule = ShotRule("train", sampler, extra_draw, "\n\n")
            if sampler == "first_n" and extra_draw and any(
                    sum(d != doc for d in pool) < n for _, doc in evaluated):
                continue  # lm-eval itself stops there (an assertion); ours refuses with exit 2
            ours = draws(rule, n, seed, pool, evaluated, resamples=True)
            theirs = upstream(pool, rnd=seed)
            for idx, doc in evaluated:
                expected = theirs.sample(n, eval_doc=doc if extra_draw else None)
                assert [pool[p] for p in ours[idx]] == list(expected), (sampler, extra_draw, idx)


def test_few_shot_runs_and_audits_under_0413(cache, tmp_path):
    """sst2 at 2 shots (shots from train, one extra draw as fewshot_split == test_split): identity of every
    prompt with its shots, both paths bit for bit, the audit PASS. The release is the point: a tiny model."""
    lock = tiny_model_lock(LOCK, tmp_path, cache)  # with the demo profile's files beside it
    raw = json.loads(lock.read_text())
    raw["profiles"]["embedded"]["settings"] = {"num_fewshot": 2}
    lock.write_text(json.dumps(raw))
    cache = tmp_path / "cache"
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", lock, "--profile", "embedded", "--cache", cache)
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", lock, "--profile", "embedded", "--cache", cache, "--rows", "8",
                      "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 0 and "16/16 candidate scores bit for bit" in done.stdout, done.stderr[-3000:]
    assert "identity              8/8" in done.stdout
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", cache)
    assert done.returncode == 0 and done.stdout.startswith(PASS), done.stdout + done.stderr


def test_every_0413_task_yaml_reads_as_its_own_loader_reads_it():
    """The one safe reader gives 0.4.13's merged config for all 13,986 installed YAMLs (`!function` compared by
    the name it gives; 0.4.13 writes it as a path beside the file that names it): nothing refused."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    from sst2_audit.task.evaluator_pin import installed_root
    from sst2_audit.task.yaml_file import read

    root = installed_root()

    def plain(value):
        if isinstance(value, yaml.Node):
            return ("function", value.value) if value.tag == "!function" else ("node", value.tag)
        if isinstance(value, str) and value.startswith(str(root)):
            return ("function", value.split("/")[-1])
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    paths = sorted((root / "lm_eval" / "tasks").rglob("*.yaml"))
    assert len(paths) == 13986
    differing = [p for p in paths if plain(read(root, p.relative_to(root).as_posix()).config)
                 != plain(load_yaml(p, resolve_func=False))]
    assert differing == [], differing[:5]


@pytest.fixture(scope="session")
def tiny_lock_0413(cache, tmp_path_factory) -> Path:
    """The 0.4.13 lock on a tiny model (tiny_model_lock), shared by the tests that only read it."""
    return tiny_model_lock(LOCK, tmp_path_factory.mktemp("tiny-0413"), cache)


@pytest.mark.parametrize("profile", ["embedded-rte", "embedded-inverse-scaling"])
def test_the_other_pinned_tasks_run_and_audit_under_0413(profile, tiny_lock_0413, tmp_path):
    """RTE (two inputs) and inverse_scaling_redefine_math (its YAML includes another file): prepared, run and
    audited under the 0.4.13 lock (on a tiny model: the release is the point), both paths bit for bit."""
    lock = tiny_lock_0413
    done = run_script("prepare.py", "--lock", lock, "--profile", profile, "--cache", tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", lock, "--profile", profile, "--cache", tmp_path / "cache", "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "s")
    assert done.returncode == 0 and "4/4 candidate scores bit for bit" in done.stdout, done.stderr[-3000:]
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", tmp_path / "cache")
    assert done.returncode == 0 and done.stdout.startswith(PASS), done.stdout + done.stderr


DEMOS_0413 = REPO / "demos-lm-eval-0.4.13.lock.json"


@pytest.fixture(scope="session")
def tiny_demos_0413(cache, tmp_path_factory) -> Path:
    """The 0.4.13 demos lock on a tiny model: these tests are about the release, not the model (the embedded run
    above is the real model's under 0.4.13)."""
    return tiny_model_lock(DEMOS_0413, tmp_path_factory.mktemp("tiny-demos-0413"), cache)


@pytest.mark.parametrize("profile, hooks", [
    ("embedded-copa", "doc_to_text (lm_eval/tasks/super_glue/copa/utils.py::doc_to_text), doc_to_target "
                      "(lm_eval/tasks/super_glue/copa/utils.py::doc_to_target), doc_to_choice "
                      "(lm_eval/tasks/super_glue/copa/utils.py::doc_to_choice)"),
    ("embedded-hellaswag-10shot", "process_docs (lm_eval/tasks/hellaswag/utils.py::process_docs)"),
])
def test_hook_demos_run_audit_and_bundle_under_0413(profile, hooks, tiny_demos_0413, tmp_path):
    """Tasks whose doc_to_* or process_docs hooks run as pinned shared code (COPA's three; HellaSwag's process_docs
    at 10 shots), under the 0.4.13 twin of demos.lock.json: both paths bit for bit, the audit PASS naming the shared
    code, the bundle's audit too. 0.4.13 logs the hooks fewshot_config inherits as str() (hooks.nested)."""
    cache = tmp_path / "cache"
    with _exclusive("store"):
        done = run_script("prepare.py", "--lock", tiny_demos_0413, "--profile", profile, "--cache", cache)
    assert done.returncode == 0, done.stderr
    done = run_script("run.py", "--lock", tiny_demos_0413, "--profile", profile, "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--run-name", "h413")
    assert done.returncode == 0 and "candidate scores bit for bit" in done.stdout, done.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    fewshot = record["task_config"]["effective"]["fewshot_config"]
    inherited = {key: value for key, value in fewshot.items() if str(value).startswith("<function")}
    assert inherited == {key: f"<function {key} at 0x...>" for key in re.findall(r"(\w+) \(lm_eval", hooks)}
    done = run_script("audit.py", "--lock", tiny_demos_0413, "--out", tmp_path / "out", "--cache", cache, "--bundle",
                      "--results", tmp_path / "results")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{PASS}; shared pinned code, not re-derived: {hooks}; exit 0")
    done = run_script("audit.py", "--lock", tiny_demos_0413, "--bundle-file", tmp_path / "results" / "h413.tar.gz",
                      "--cache", cache, "--structural")
    assert done.returncode == 4 and "VERDICT: FAIL" not in done.stdout, done.stdout + done.stderr


def test_0413_group_aggregation_is_re_derived_bit_for_bit_on_generated_groups():
    """0.4.13's Group.aggregate: an entry without weight_by_size weighs by size (AggMetricConfig's default), and an
    unweighted mean's stderr is unweighted_mean_stderr: 300 generated groups against lm-eval's own functions."""
    import random

    from lm_eval.api.metrics import aggregate_subtask_metrics, mean_stderr, pooled_sample_stderr, \
        unweighted_mean_stderr
    from lm_eval.config.group import AggMetricConfig

    from sst2_audit.formats.releases import release_of
    from sst2_audit.task import group

    release = release_of("0.4.13")
    assert AggMetricConfig(metric="acc").weight_by_size is release.group_weight_by_size_default is True
    assert AggMetricConfig(metric="acc").filter_list is None  # discovered: a multiple_choice task logs only "none"
    rng = random.Random(70)
    for _ in range(300):
        sizes = [rng.randint(2, 300) for _ in range(rng.randint(1, 60))]
        members = []
        for n in sizes:
            right = [float(rng.random() < 0.4) for _ in range(n)]
            members.append({"acc": sum(right) / n, "acc_stderr": mean_stderr(right)})
        for weighted in (True, False):
            spec = group.GroupSpec(None, (), (("acc", weighted),), (), (), release.group_unweighted_stderr)
            stderrs = [m["acc_stderr"] for m in members]
            expected = {"acc": aggregate_subtask_metrics([m["acc"] for m in members], sizes, weighted),
                        "acc_stderr": float(pooled_sample_stderr(stderrs, sizes) if weighted
                                            else unweighted_mean_stderr(stderrs))}
            assert group.numbers(spec, members, sizes) == expected
            assert group.numbers(spec, members, sizes, group.official_functions(spec)) == expected


def test_the_mmlu_group_runs_audits_and_bundles_under_0413(tiny_demos_0413, tmp_path):
    """The MMLU demo group (three 5-shot subjects, 4 rows each) under demos-lm-eval-0.4.13.lock.json (a tiny model): every
    subtask both paths bit for bit, the group's number lm-eval 0.4.13's aggregation and ours bit for bit, the
    audit and the bundle's audit PASS."""
    cache, out, record, runs = prepare_and_run_group(tiny_demos_0413, "mmlu-demo", tmp_path, "g413")
    assert {r["evaluator"]["version"] for r in runs} == {"0.4.13"} and all(r["max_abs_diff"] == 0.0 for r in runs)
    correct = sum(r["summaries"]["official"]["acc"]["correct"] for r in runs)
    assert record["aggregate"] == [{"metric": "acc", "weight_by_size": True}]
    assert record["official"] == record["independent"] and abs(record["official"]["acc"] - correct / 12) < 1e-15
    done = run_script("audit.py", "--lock", tiny_demos_0413, "--out", out, "--cache", cache, "--bundle", "--results",
                      tmp_path / "results")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS: every subtask's audit passed with every scored row rescored bit for "
                                  "bit and the group record was checked, its numbers re-derived; exit 0")
    done = run_script("audit.py", "--lock", tiny_demos_0413, "--bundle-file", tmp_path / "results" / "g413.tar.gz",
                      "--cache", cache, "--structural")
    assert done.returncode == 4 and "group: PASS" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("profile, metrics", [
    ("embedded-cola", ["mcc"]), ("embedded-mrpc", ["acc", "f1"]), ("embedded-truthfulqa-mc2", ["mc2"])])
def test_corpus_and_hook_metrics_run_audit_and_bundle_under_0413(profile, metrics, tiny_demos_0413, tmp_path):
    """mcc and f1 (corpus metrics, their bootstrap stderr) and TruthfulQA's mc2 (its process_results hook, pinned
    shared code) under the 0.4.13 demos lock: both paths and lm-eval's reported numbers bit for bit, the default
    audit PASS, the bundle's structural audit finds no problem (conftest.prepare_run_audit)."""
    record = prepare_run_audit(tiny_demos_0413, profile, tmp_path, bundle=True)
    assert record["metrics"] == metrics and record["evaluator"]["version"] == "0.4.13"
    assert record["max_abs_diff"] == 0.0  # every candidate score bit for bit
    for metric in metrics:
        official, independent = (record["summaries"][path][metric] for path in ("official", "independent"))
        assert official == independent, (metric, official, independent)


def test_the_task_listing_under_0413_applies_its_scope_and_it_refuses_no_installed_task():
    """`run --list-tasks` under a 0.4.13 lock says what run and --pin would do: the release's scope applies to
    the listing too. Of 0.4.13's installed multiple_choice tasks, those within the protocol use no fewshot_config
    key beyond its sampler and no multi-file include, so the scope refuses none of them."""
    from sst2_audit.task.support import list_installed

    found = list_installed("*", "0.4.13")
    assert len(found) == 8384 and sum(reason is None for _, _, reason in found) == 6186
    assert [entry for entry in found if entry[2] and "scope" in entry[2]] == []


@pytest.fixture(scope="session")
def plain_0413(cache, tmp_path_factory) -> Path:
    """Real `lm_eval` CLI runs of 0.4.13 (its `run` command through the legacy form users type) on a tiny model: the
    folder tests/audit/test_adopt_soundness.py's `plain` fixture builds under this release (the same lock and cache),
    built once for both (it was built twice: 12.6 s of a worker more)."""
    from support.plain_runs import build_plain_runs
    return built_once(tmp_path_factory, f"plain-lm-eval-{installed_version()}",
                      lambda folder: build_plain_runs(folder, cache, LOCK))


def test_a_plain_0413_run_is_adopted_and_its_unsorted_twin_is_caught(plain_0413, tmp_path):
    """0.4.13's output format (model_args logged as a dict, metadata.config_source added, the YAML's tag dropped by
    its task factory, fewshot_as_multiturn None): adopted bit for bit, the adopted folder's and the bundle's audit
    PASS; the unsorted-ids run (#4084, not fixed in 0.4.13) named row by row."""
    from support.plain_runs import adopt, audit
    done = adopt(plain_0413, plain_0413 / "sorted", "--run-name", "p413", "--bundle", cwd=tmp_path, lock=LOCK.name)
    assert done.returncode == 0 and done.stdout.startswith(PASS), done.stdout + done.stderr
    assert "  lm-eval 0.4.13's task factory dropped tag from the logged config (the pinned YAML's value is taken); " \
        "logged metadata.config_source 'inline' (a claim)" in done.stdout.splitlines(), done.stdout
    adopted = tmp_path / "runs" / "p413"
    public = (adopted / "lm_eval_results.json").read_text()  # the path, and model_name_sanitized's '__' form of it
    assert plain_0413.name not in public and json.loads(public)["model_name_sanitized"] == "<path>"
    done = audit(plain_0413, "--out", adopted, cwd=tmp_path, lock=LOCK.name)
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith(PASS), done.stdout + done.stderr
    done = audit(plain_0413, "--bundle-file", tmp_path / "results" / "p413.tar.gz", cwd=tmp_path, lock=LOCK.name)
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith(PASS), done.stdout + done.stderr
    done = adopt(plain_0413, plain_0413 / "unsorted", cwd=tmp_path, lock=LOCK.name)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (identity); exit 1"), done.stdout
    assert sum("(mislabelled: lm-eval #4084)" in line for line in done.stdout.splitlines()) >= 8
