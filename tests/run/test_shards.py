"""`run` under a launcher (issue 50): `torchrun --nproc-per-node 2 sst2-audit run ...` shares both paths' rows
among two gloo processes (lm-eval's own data-parallel evaluate for the official path, scoring/shards.py for the
independent one); rank 0 gathers, checks and writes. The records equal the one-process run's."""

import json
import os

import pytest

from support.processes import kill_rank_one, launched, run_script
from support.paths import RELEASE_LOCK

@pytest.mark.slow
def test_two_processes_run_the_embedded_profile_with_the_one_process_records(full_run, embedded_cache, tmp_path):
    """The 64 dev rows of the embedded profile in two processes: run.json equals the one-process full run's apart
    from timings, peak memory, the process count, the threads each process took and the run's name; the default
    audit of the two-process run (every row rescored) PASS."""
    done = launched("run", "--profile", "embedded", "--cache", embedded_cache, "--run-name", "two",
                     "--out", tmp_path / "out", "--private", tmp_path / "private", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("next          ") == 1, done.stdout  # rank 0 alone reports
    assert "official path: lm-eval simple_evaluate on 64 rows (32 in each of 2 processes)" in done.stderr
    one = json.loads((full_run / "out" / "run.json").read_text())
    two = json.loads((tmp_path / "out" / "run.json").read_text())
    assert (one["processes"], two["processes"]) == (1, 2)
    cores = len(os.sched_getaffinity(0))  # the lock's threads 0: the cores shared by the processes and paths
    assert [r["platform"].pop("threads") for r in (one, two)] == [max(1, cores // 2), max(1, cores // 4)]
    for record in (one, two):
        for key in ("timings", "processes", "run_name", "peak_rss_bytes", "third_party_log"):
            record.pop(key)
    assert one == two
    samples = [json.loads(line) for line in (tmp_path / "out" / "lm_eval_samples.public.jsonl").read_text().splitlines()]
    assert sorted(s["doc_id"] for s in samples) == sorted(one["split"]["scored_ids"])
    done = run_script("audit.py", "--out", tmp_path / "out", "--cache", embedded_cache)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr


def test_a_run_process_that_dies_fails_the_run_and_nothing_is_left(embedded_cache, tmp_path):
    """Rank 1 killed (SIGKILL) once torchrun started it: the launcher ends the group, exit non-zero, and neither
    the public nor the private folder is left behind."""
    launcher = launched("run", "--profile", "embedded", "--cache", embedded_cache, "--run-name", "dies",
                         "--out", tmp_path / "out", "--private", tmp_path / "private", cwd=tmp_path, wait=False)
    killed = kill_rank_one(launcher, after=10)  # most likely inside its share of the 64 rows (checked at any point)
    out, err = launcher.communicate(timeout=600)
    assert killed is not None, out + err
    assert launcher.returncode != 0 and "next          " not in out, out + err
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists(), out + err


def test_what_runs_in_one_process_is_refused_under_a_launcher(tmp_path):
    """A group, a study, a pre-registration, a confirmation and the task listing are one process's: exit 2."""
    done = launched("run", "--list-tasks", "sst2", cwd=tmp_path)
    assert done.returncode != 0
    assert "2 processes were started (WORLD_SIZE): a launcher shares the rows of one run" in done.stderr


@pytest.mark.slow
def test_uneven_shares_log_lm_evals_padding_and_the_audit_reads_the_first_response(release_cache, tmp_path):
    """3 rows in 2 processes, in both releases (.ci/run's 0.4.13 step runs it too): lm-eval pads the process with
    fewer requests and appends the padding's responses to its last request's logged resps (evaluator.py, SOURCE_MAP
    step 85); the run's checks and the audit read the first response, as lm-eval's filter does: PASS, and that
    sample holds more than one response."""
    done = launched("run", "--lock", RELEASE_LOCK, "--profile", "embedded", "--cache", release_cache, "--rows", "3",
                     "--run-name", "odd", "--out", tmp_path / "out", "--private", tmp_path / "private", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    samples = [json.loads(line) for line in (tmp_path / "out" / "lm_eval_samples.public.jsonl").read_text().splitlines()]
    padded = [s["doc_id"] for s in samples if any(len(resp) > 1 for resp in s["resps"])]
    assert len(samples) == 3 and len(padded) == 1, samples
    done = run_script("audit.py", "--lock", RELEASE_LOCK, "--out", tmp_path / "out", "--cache", release_cache)
    assert done.returncode == 0 and done.stdout.startswith("VERDICT: PASS"), done.stdout + done.stderr
