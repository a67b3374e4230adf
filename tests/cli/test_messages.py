"""Messages that tell the truth: the user's environment is exit 2 naming the folder, an interrupted
run leaves nothing behind that blocks its name, and bad usage is refused before any work."""

import os
import signal
import subprocess
import sys

import pytest

from support.paths import LOCK, REPO
from support.processes import one_paragraph, run_cli
from support.bundles import REFERENCE, audit


def test_an_unwritable_out_or_private_folder_is_exit_2_and_leaves_nothing(embedded_cache, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run_cli("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                   "--out", blocker / "out", "--private", tmp_path / "private")
    assert done.returncode == 2 and f"--out {blocker / 'out'}: cannot create the folder" in one_paragraph(done.stderr)
    done = run_cli("run.py", "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                   "--out", tmp_path / "out", "--private", blocker / "private")
    assert done.returncode == 2 and f"--private {blocker / 'private'}: cannot create the folder" in one_paragraph(done.stderr)
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()  # no empty --out left


def test_ctrl_c_leaves_no_folder_that_blocks_the_run_name(embedded_cache, tmp_path):
    process = subprocess.Popen([sys.executable, str(REPO / "run.py"), "--profile", "embedded", "--cache",
                                str(embedded_cache), "--out", str(tmp_path / "out"), "--private",
                                str(tmp_path / "private")], stderr=subprocess.PIPE, text=True, cwd=REPO,
                               # as in a terminal: a suite started in the background by a non-interactive shell
                               # (`.ci/run &`) inherits SIGINT ignored, and Python then installs no handler
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # interrupt once scoring has started: both paths then run for seconds, a wide window on a loaded machine
    for line in process.stderr:
        if line.startswith("[official path") or line.startswith("[independent path"):
            process.send_signal(signal.SIGINT)
            break
    rest = process.stderr.read()
    assert process.wait() == 130 and "interrupted; nothing half-written was kept." in rest, rest[-2000:]
    assert not (tmp_path / "out").exists() and not (tmp_path / "private").exists()


def test_compare_of_two_tasks_is_refused(rte_run, capsys):
    code, out = audit(capsys, "--compare", REFERENCE, rte_run / "out")
    assert code == 2 and "--compare: A is a run of task sst2, B of task rte; a paired comparison needs the same " \
                         "questions" in one_paragraph(out)


def test_bundle_needs_the_identity_level_and_a_writable_results_folder(full_run, embedded_cache, tmp_path, capsys):
    code, out = audit(capsys, "--out", full_run / "out", "--arithmetic-only", "--bundle", "--results", tmp_path)
    assert code == 2 and "--bundle packs only a run whose identity level was checked" in out
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, out = audit(capsys, "--out", full_run / "out", "--cache", embedded_cache, "--structural", "--bundle",
                      "--results", blocker / "results")
    # refused before the audit's work: no verdict line that names an exit code the process does not return
    assert code == 2 and one_paragraph(out) == (f"error: --results {blocker / 'results'}: cannot create the folder "
                                                f"({blocker} is a file). Choose a folder you can write to."), out
    assert "VERDICT" not in out


def test_every_output_folder_is_checked_writable_before_any_work(embedded_cache, tmp_path, capsys):
    from sst2_audit.cli import prepare_main

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, out = audit(capsys, "--compare", REFERENCE, REFERENCE, "--report", blocker / "cmp.html")
    assert code == 2 and one_paragraph(out) == (f"error: --report {blocker}: expected a folder, got a file. Choose a "
                                                "folder you can write to."), out
    code = prepare_main(["--profile", "embedded", "--cache", str(blocker / "cache")])
    out = capsys.readouterr().err
    assert code == 2 and one_paragraph(out) == (f"error: --cache {blocker / 'cache'}: cannot create the folder "
                                                f"({blocker} is a file). Choose a folder you can write to."), out
    code = prepare_main(["--pin", "mine", "--task", "rte", "--model", str(embedded_cache / "model"), "--data",
                         str(tmp_path), "--new-lock", str(blocker / "locks" / "mine.lock.json")])
    out = capsys.readouterr().err
    assert code == 2 and one_paragraph(out) == (f"error: --new-lock {blocker / 'locks'}: cannot create the folder "
                                                f"({blocker} is a file). Choose a folder you can write to."), out
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]  # nothing written anywhere


def test_one_check_is_not_checks(capsys):
    from sst2_audit.audit.findings import LevelResult

    assert LevelResult("x", checks=1).lines() == ["x: PASS (1 check)"]
    assert LevelResult("x", checks=2).lines() == ["x: PASS (2 checks)"]


def test_output_piped_into_a_reader_that_stops_is_not_called_our_bug():
    """`audit.py ... | head -1`: the reader goes away while the audit still writes (SIGPIPE ignored, as
    under many shells' job control and in Python's own default), which is no bug: 141, SIGPIPE's code (not 1, a
    failed check), no message."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    process = subprocess.Popen([sys.executable, str(REPO / "audit.py"), "--bundle-file", str(REFERENCE),
                                "--arithmetic-only"], stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO)
    os.close(write)
    _, err = process.communicate()
    assert process.returncode == 141 and err == "", err


def test_a_data_resource_without_columns_is_refused_before_any_model_file(tmp_path):
    """Only an sst2 profile's data may leave its columns out (lock.IMPLIED): another task's is
    refused when it is prepared, naming the field, and no cache is left."""
    import json
    import shutil

    from support.paths import load_lock_json

    shutil.copytree(REPO / "data" / "demo", tmp_path / "data" / "demo")
    raw = load_lock_json()
    raw["profiles"]["embedded-rte"]["data"].pop("columns")
    (tmp_path / "lock.json").write_text(json.dumps(raw))
    done = run_cli("prepare.py", "--lock", tmp_path / "lock.json", "--profile", "embedded-rte",
                   "--cache", tmp_path / "c")
    assert done.returncode == 2, done.stderr
    assert "lock: data.columns is missing: a data resource states its columns" in one_paragraph(done.stderr)
    assert not (tmp_path / "c" / "manifest.json").exists() and not (tmp_path / "c" / "model").exists()


def test_the_installed_command_runs_each_entry_point_with_the_venvs_python():
    """`sst2-audit prepare|run|audit` (pyproject's [project.scripts]): no bare `python` that lacks lm-eval."""
    import subprocess
    from pathlib import Path

    command = Path(sys.executable).parent / "sst2-audit"
    done = subprocess.run([str(command), "run", "--list-tasks", "sst2"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.splitlines()[1].split()[:2] == ["sst2", "pinned"], done.stdout
    done = subprocess.run([str(command), "bogus"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.startswith("usage: sst2-audit COMMAND [options]")
    assert done.stderr.rstrip().endswith("error: unknown command 'bogus'")
    done = subprocess.run([str(command), "adpot"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.rstrip().endswith("error: unknown command 'adpot' (did you mean "
                                                                  "'adopt'?)")
    done = subprocess.run([str(command), "--help"], capture_output=True, text=True)
    commands = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert done.returncode == 0 and commands == ["prepare", "run", "audit", "adopt", "corpus"], done.stdout
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True)
    from sst2_audit.formats.releases import installed_version

    assert done.returncode == 0 and done.stdout == (
        f"sst2-audit 0.1.0; default lock resources.lock.json pins lm-eval 0.4.9.2; this environment has lm-eval "
        f"{installed_version()}\n"), done.stdout


@pytest.mark.slow
def test_sigterm_stops_a_run_as_ctrl_c_does_and_the_rerun_is_not_refused(embedded_cache, tmp_path):
    """A plain `kill` of a one-process run while it scores: exit 143, no run or private folder left behind, and
    the same command then runs (issue 60)."""
    import signal
    import subprocess
    import time
    from pathlib import Path

    command = [str(Path(sys.executable).parent / "sst2-audit"), "run", "--cache", str(embedded_cache), "--out",
               str(tmp_path / "runs" / "r"), "--private", str(tmp_path / "private" / "r"), "--rows", "64"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    for line in process.stderr:  # the model is loaded and both paths score: the moment a user gives up
        if "[independent path: own forward passes on" in line:
            break
    time.sleep(1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "error: terminated (SIGTERM); nothing half-written was kept." in err
    assert not (tmp_path / "runs" / "r").exists() and not (tmp_path / "private" / "r").exists()
    done = subprocess.run(command[:-2] + ["--smoke"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("wrapper", ["RuntimeError", "AuditError"])
def test_a_signal_that_lands_inside_an_import_is_still_a_stop_not_a_bug(wrapper):
    """CI caught SIGTERM arriving while lm-eval imported lazily: Python wrapped it ("RuntimeError: Error calling
    __set_name__ ..."), and the run said exit 3, "a bug in sst2-audit". The chain is read: exit 143 and 130."""
    import subprocess

    for stop, code in (("Terminated", 143), ("KeyboardInterrupt", 130)):
        program = (
            "import sys\n"
            "from sst2_audit.cli import _guarded\n"
            "from sst2_audit.util.errors import AuditError, Terminated\n"
            "def body(argv):\n"
            "    try:\n"
            f"        raise {stop}\n"
            "    except BaseException as error:\n"
            f"        raise {wrapper}('Error calling __set_name__') from error\n"
            "sys.exit(_guarded(body, []))\n")
        done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
        assert done.returncode == code, done.stderr
        assert "nothing half-written was kept." in done.stderr and "internal error" not in done.stderr


def test_a_mistyped_option_profile_or_task_gets_a_did_you_mean(tmp_path):
    """Issue 60: the names that exist are the suggestions (util/suggest.py), for an option, a profile and a task."""
    import subprocess
    from pathlib import Path

    command = str(Path(sys.executable).parent / "sst2-audit")
    done = subprocess.run([command, "run", "--smok"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.rstrip().endswith(
        "unrecognized arguments: --smok (--smok: did you mean '--smoke'?)"), done.stderr
    done = subprocess.run([command, "run", "--profile", "embeded", "--smoke"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2 and "unknown profile 'embeded' (did you mean 'embedded'?); this lock defines " \
        "embedded, " in done.stderr, done.stderr
    done = subprocess.run([command, "run", "--profile", "embedded", "--task", "sst", "--smoke", "--threads", "1"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--task sst: profile embedded holds data for task sst2" in done.stderr
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.spec import spec_for
    from sst2_audit.util.errors import InputError

    with pytest.raises(InputError, match=r"task 'sts2' is not pinned \(did you mean 'sst2'\?\)"):
        spec_for(load_lock(LOCK), "sts2")
    done = subprocess.run([command, "audit", "--out", "x", "--threads", "0"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2 and "--threads: expected a number of cores >= 1, got 0." in done.stderr


def test_a_long_rescore_counts_its_rows_and_a_short_one_says_nothing_more():
    """util/progress.py::Ticker, as the audit's and adopt's rescores use it: a line at most every `every` seconds,
    never for the last row (the phase's own line says done)."""
    import io

    from sst2_audit.util import progress

    for every, expected in ((0.0, "[rescore] 1/3 rows\n[rescore] 2/3 rows\n"), (3600.0, "")):
        buffer = io.StringIO()
        previous = progress.set_stream(buffer)
        try:
            ticker = progress.Ticker("rescore", 3, every=every)
            for number in (1, 2, 3):
                ticker.tick(number)
        finally:
            progress.set_stream(previous)
        assert buffer.getvalue() == expected


def test_lm_eval_files_refuse_what_they_cannot_write(embedded_cache, tmp_path):
    """prepare --lm-eval-files (issue 60): --lm-eval-rows alone, more rows than the profile has, a folder that is
    not new: exit 2 naming the option, and nothing written."""
    import subprocess
    from pathlib import Path

    command = [str(Path(sys.executable).parent / "sst2-audit"), "prepare", "--profile", "embedded", "--cache",
               str(embedded_cache)]
    done = subprocess.run(command + ["--lm-eval-rows", "3"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--lm-eval-rows goes with --lm-eval-files" in done.stderr
    done = subprocess.run(command + ["--lm-eval-files", "f", "--lm-eval-rows", "65"], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2 and "--lm-eval-rows: expected 1 to 64 (the profile's dev rows), got 65." in done.stderr
    assert not (tmp_path / "f").exists()
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "x").write_text("mine")
    done = subprocess.run(command + ["--lm-eval-files", "f"], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2 and "--lm-eval-files f already exists and is not empty" in done.stderr
    assert sorted(p.name for p in (tmp_path / "f").iterdir()) == ["x"]


@pytest.mark.parametrize("argv, words", [
    (("--group", "mmlu", "--smoke"), "--group runs the lock's profiles for the group; leave out --profile, --task, "
                                     "--smoke, --rows, --unsorted-ids"),
    (("--study", "s", "--profile", "embedded"), "--study runs its --variant profiles; leave out --profile, --task, "
                                                "--smoke, --rows, --unsorted-ids, --group"),
    (("--preregister", "p.json", "--group", "mmlu"), "--preregister and --confirm take the profiles of their dev "
                                                     "runs; leave out --profile, --task, --smoke, --rows, "
                                                     "--unsorted-ids, --group"),
    (("--list-tasks", "--format", "json"), "--format json gives the verdict of one run"),
])
def test_run_s_modes_refuse_a_one_run_option_in_one_rule(argv, words):
    done = run_cli("run.py", *argv)
    assert done.returncode == 2 and words in one_paragraph(done.stderr), done.stderr


@pytest.mark.parametrize("record", ["adopted.json", "adopted-run.json"])
def test_an_adopted_record_s_name_held_by_a_folder_is_named_as_such(embedded_cache, tmp_path, record):
    """A folder someone sent whose adopted.json (or adopted-run.json) is a folder or a link: the audit names the entry
    and what it is (exit 2), not "not a finished run" as if it were a run folder without run.json."""
    for kind in ("folder", "link"):
        sent = tmp_path / kind
        sent.mkdir()
        if kind == "folder":
            (sent / record).mkdir()
        else:
            (tmp_path / "elsewhere.json").write_text("{}")
            (sent / record).symlink_to(tmp_path / "elsewhere.json")
        done = run_cli("audit.py", "--out", sent, "--cache", embedded_cache)
        assert done.returncode == 2, done.stdout + done.stderr
        got = "a folder" if kind == "folder" else "a symbolic link"
        assert one_paragraph(done.stderr) == f"error: {sent / record}: expected a regular file, got {got}."


def test_a_reader_that_goes_away_is_exit_141_never_a_failed_check_and_nothing_is_kept(embedded_cache, tmp_path):
    """`sst2-audit adopt ... | head -1` where head has gone: the verdict cannot be written, so the command stops as
    SIGPIPE stops a process (141, what a pipeline with pipefail reads as such), not 1 (a failed check), and the
    adopted folder it had not written yet is not half there."""
    from support.paths import VENV_BIN

    out = tmp_path / "adopted"
    command = subprocess.Popen([str(VENV_BIN / "sst2-audit"), "adopt", REPO / "tests" / "data" / "lm-eval-0.4.4",
                                "--profile", "embedded", "--cache", embedded_cache, "--structural", "--out", out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    command.stdout.close()  # the reader went away before the first line
    said = command.stderr.read().decode()
    assert command.wait(timeout=300) == 141, said
    assert "Traceback" not in said and not out.exists()
