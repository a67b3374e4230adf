"""A shadow of the installed lm_eval in which one task file differs by one byte, and what a run and an audit
must then do: shared by the hook tests (test_hooks.py, test_mc2.py)."""

from support.paths import DEMOS
from support.processes import one_paragraph, run_script
from sst2_audit.task.evaluator_pin import installed_root


def shadow_lm_eval(tmp_path, folder: str, name: str, old: bytes, new: bytes):
    """A copy of the installed lm_eval in which only tasks/`folder`/`name` differs, by one byte: every other
    file is a link to the installed one. First on PYTHONPATH, it is the lm_eval a run imports."""
    root = installed_root() / "lm_eval"
    shadow = tmp_path / "shadow" / "lm_eval"
    shadow.mkdir(parents=True)
    for entry in root.iterdir():
        if entry.name != "tasks":
            (shadow / entry.name).symlink_to(entry)
    (shadow / "tasks").mkdir()
    for entry in (root / "tasks").iterdir():
        if entry.name != folder:
            (shadow / "tasks" / entry.name).symlink_to(entry)
    (shadow / "tasks" / folder).mkdir()
    for entry in (root / "tasks" / folder).iterdir():
        if entry.is_file():
            (shadow / "tasks" / folder / entry.name).write_bytes(entry.read_bytes())
    hook = shadow / "tasks" / folder / name
    changed = hook.read_bytes().replace(old, new)
    assert len(changed) == hook.stat().st_size and changed != hook.read_bytes()  # one byte differs
    hook.write_bytes(changed)
    return {"PYTHONPATH": str(shadow.parent)}


def refused_with_a_changed_hook(tmp_path, profile: str, shadow: dict, file: str, lock=DEMOS) -> None:
    """The run stops before any model call and the audit of the good run fails, both naming the file."""
    done = run_script("run.py", "--lock", lock, "--profile", profile, "--cache", tmp_path / "cache", "--smoke",
                      "--out", tmp_path / "out2", "--private", tmp_path / "private2", env=shadow)
    assert done.returncode == 1, done.stderr
    assert f"{file}: expected sha256 " in one_paragraph(done.stderr)
    assert not (tmp_path / "out2").exists()
    done = run_script("audit.py", "--lock", lock, "--out", tmp_path / "out", "--cache", tmp_path / "cache", env=shadow)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL"), done.stdout + done.stderr
    assert f"{file}: expected sha256 " in done.stdout, done.stdout
