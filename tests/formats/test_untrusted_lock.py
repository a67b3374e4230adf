"""Issue 28: a lock from someone else is input, not trust; so is the working directory.

Every attack plants a marker payload (a YAML tag that would run `touch MARKER` under a loader that
builds Python objects) and asserts that the marker never appears, the command exits 1 or 2 with a
named finding, and nothing is written outside the given folders.
"""

import hashlib
import json
import os
import random
from pathlib import Path

import pytest

from support.paths import DEMOS, load_lock_json, LOCK
from support.processes import one_paragraph, run_script
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.formats.lock import load_lock
from sst2_audit.task.spec import spec_for
from sst2_audit.formats.fields import safe_relative
from sst2_audit.task.yaml_file import confined, parse, read
from support.bundles import CURRENT, members_of, pack


def _payload(marker: Path) -> str:
    return (f"task: sst2\noutput_type: multiple_choice\ndoc_to_choice: ['a', 'b']\n"
            f"marker: !!python/object/apply:os.system ['touch {marker}']\n")


def _evil(tmp_path) -> tuple:
    marker = tmp_path / "MARKER"
    evil = tmp_path / "evil.yaml"
    evil.write_text(_payload(marker))
    return evil, marker, hashlib.sha256(evil.read_bytes()).hexdigest()


def _path_shapes(evil: Path) -> dict:
    """Every shape of an evaluator path that leaves the installed lm_eval package (generated from the file)."""
    root = installed_root()
    climbing = os.path.relpath(evil, root)
    return {
        "absolute": str(evil),
        "climbing from site-packages": climbing,
        "climbing from inside lm_eval": "lm_eval/" + os.path.relpath(evil, root / "lm_eval"),
        "/proc/self/cwd": "/proc/self/cwd/" + os.path.relpath(evil, Path.cwd()),
        "drive letter": "C:/evil.yaml",
        "drive letter inside": "lm_eval/C:/evil.yaml",
        "backslash": "lm_eval\\tasks\\evil.yaml",
        "URL": "http://example.invalid/lm_eval/evil.yaml",
        "file URL": "file://" + str(evil),
        "dot part": "lm_eval/./tasks/glue/sst2/default.yaml",
        "empty part": "lm_eval//tasks/glue/sst2/default.yaml",
        "dot-dot inside": "lm_eval/tasks/../tasks/glue/sst2/default.yaml",
        "hidden file": "lm_eval/tasks/.evil.yaml",
        "trailing newline": "lm_eval/tasks/glue/sst2/default.yaml\n",
        "home": "~/evil.yaml",
        "not under lm_eval": "lm_eval_evil/tasks/evil.yaml",
        "NUL": "lm_eval/tasks/evil\0.yaml",
    }


def _lock_with(tmp_path, field: str, path: str, sha: str) -> Path:
    raw = load_lock_json()
    evaluator = raw["evaluator"]
    evaluator["files"][path] = sha
    if field in ("tasks", "task_yaml"):
        evaluator["tasks"]["sst2"] = path
        evaluator["task_yaml"] = path
    lock = tmp_path / f"{field}.lock.json"
    lock.write_text(json.dumps(raw))
    return lock


@pytest.mark.parametrize("field", ["files", "tasks"])
def test_every_evaluator_path_shape_outside_the_package_is_refused_before_any_read(tmp_path, field):
    """Generated: each shape through the lock's evaluator.files (a pinned file) and evaluator.tasks /
    task_yaml (the YAML parsed): exit 2 naming the field, the marker never written."""
    evil, marker, sha = _evil(tmp_path)
    for shape, path in _path_shapes(evil).items():
        lock = _lock_with(tmp_path, field, path, sha)
        with pytest.raises(InputError) as refused:
            spec_for(load_lock(lock), "sst2")
        assert "expected a relative POSIX path inside the lm_eval package" in str(refused.value), (shape, refused.value)
        assert "evaluator.files key" in str(refused.value) or "evaluator.task_yaml" in str(refused.value), shape
        assert not marker.exists(), shape


def test_each_command_that_reads_a_lock_refuses_the_escape_and_runs_nothing(tmp_path, embedded_cache):
    """The commands the issue names, as a reviewer runs them with a submitter's lock: exit 2, one paragraph
    naming the lock's field, no marker, nothing written."""
    evil, marker, sha = _evil(tmp_path)
    lock = _lock_with(tmp_path, "tasks", str(evil), sha)
    commands = [
        ("audit.py", "--lock", lock, "--bundle-file", CURRENT, "--structural", "--cache", embedded_cache),
        ("audit.py", "--lock", lock, "--bundle-file", CURRENT, "--arithmetic-only"),
        ("prepare.py", "--lock", lock, "--profile", "embedded", "--cache", tmp_path / "cache"),
        ("run.py", "--lock", lock, "--profile", "embedded", "--cache", embedded_cache, "--out", tmp_path / "out",
         "--private", tmp_path / "private"),
        ("run.py", "--lock", lock, "--list-tasks", "sst2"),
    ]
    for command in commands:
        done = run_script(*command, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "evaluator.files key: expected a relative POSIX path inside the lm_eval package" in one_paragraph(done.stderr)
        assert not marker.exists() and not (tmp_path / "cache").exists() and not (tmp_path / "out").exists()


def test_a_bundle_carrying_an_escaping_lock_is_refused_even_when_trusted(tmp_path):
    """--trust-bundle-lock: the lock the bundle carries is still read as untrusted data."""
    evil, marker, sha = _evil(tmp_path)
    members = members_of(CURRENT)
    members["resources.lock.json"] = _lock_with(tmp_path, "tasks", str(evil), sha).read_bytes()
    pack(tmp_path / "b.tar.gz", members)
    for trust in ([], ["--trust-bundle-lock"]):
        done = run_script("audit.py", "--bundle-file", tmp_path / "b.tar.gz", "--arithmetic-only", *trust, cwd=tmp_path)
        assert done.returncode == 2 and "resources.lock.json: evaluator.files key: expected a relative POSIX path" in \
            done.stderr, (trust, done.stdout, done.stderr)
        assert not marker.exists()


def test_a_symlink_on_the_way_into_the_package_is_refused(tmp_path):
    """A tree shaped like the package, with a link at each depth in turn: never followed."""
    (tmp_path / "outside").mkdir()
    evil, marker, _ = _evil(tmp_path / "outside")
    for depth, parts in enumerate([["lm_eval"], ["lm_eval", "tasks"], ["lm_eval", "tasks", "glue"]]):
        root = tmp_path / f"root{depth}"
        real = root.joinpath(*parts[:-1])
        real.mkdir(parents=True, exist_ok=True)
        (real / parts[-1]).symlink_to(evil.parent, target_is_directory=True)
        relative = "/".join(parts + ["evil.yaml"])
        with pytest.raises(InputError, match="is a symbolic link"):
            confined(root, relative, "evaluator.files")
        with pytest.raises(InputError, match="is a symbolic link"):
            read(root, relative)
    file_root = tmp_path / "file-root"
    (file_root / "lm_eval").mkdir(parents=True)
    (file_root / "lm_eval" / "x.yaml").symlink_to(evil)
    with pytest.raises(InputError, match="is a symbolic link"):
        read(file_root, "lm_eval/x.yaml")
    assert not marker.exists()


def test_generated_paths_are_accepted_exactly_when_they_are_plain_parts_under_lm_eval():
    """Fuzz: random strings from a hostile alphabet; accepted only as lm_eval/<plain parts>."""
    rng = random.Random(28)
    alphabet = list("abAB09_-.+() /\\:~\n\t\0%$*?") + ["..", "lm_eval", "//", "\u202e", "é"]
    both = {True: 0, False: 0}
    for _ in range(3000):
        path = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        if rng.random() < 0.5:
            path = "lm_eval/" + path
        parts = path.split("/")
        plain = (len(parts) >= 2 and parts[0] == "lm_eval" and all(
            part and part[0] not in ". " and all(c.isascii() and (c.isalnum() or c in "_.+() -") for c in part)
            and part[0] not in ")+-" for part in parts[1:]))
        try:
            safe_relative(path, "x")
            accepted = True
        except InputError:
            accepted = False
        assert accepted == plain, repr(path)  # exactly: never more than plain parts, and every plain path
        both[accepted] += 1
        if accepted:
            assert ".." not in parts and "" not in parts and "\\" not in path and ":" not in path
    assert both == {True: 83, False: 2917}  # both directions exercised (the seed fixes the draw)


def _plain(config: dict) -> dict:
    """A config with each `!function` node as (tag, value): YAML nodes compare by identity."""
    import yaml

    return {key: (value.tag, value.value) if isinstance(value, yaml.Node) else value for key, value in config.items()}


def _include_names() -> set:
    """The file name of every include of every task the shipped locks pin."""
    names = set()
    for lock_path in (LOCK, DEMOS):
        lock = load_lock(lock_path)
        for task in lock.evaluator.tasks:
            names.update(Path(f).name for f in spec_for(lock, task).yaml_files[1:])
    return names


def test_a_file_in_the_working_directory_never_replaces_a_pinned_include(tmp_path, monkeypatch):
    """Generated from the pinned tasks' includes: a planted file of the same name (with the payload) in the
    working directory is never read; every spec is the one read from the repository."""
    marker = tmp_path / "MARKER"
    names = _include_names()
    assert "_inverse_scaling_mc_yaml" in names and len(names) >= 4, names
    expected = {task: spec_for(load_lock(lock_path), task) for lock_path in (LOCK, DEMOS)
                for task in load_lock(lock_path).evaluator.tasks}
    planted = tmp_path / "work"
    planted.mkdir()
    for name in names:
        (planted / name).write_text(_payload(marker))
    monkeypatch.chdir(planted)
    for lock_path in (LOCK, DEMOS):
        lock = load_lock(lock_path)
        for task in lock.evaluator.tasks:
            assert _plain(spec_for(lock, task).official) == _plain(expected[task].official), task
    assert not marker.exists()
    done = run_script("run.py", "--list-tasks", "inverse_scaling*", cwd=planted)
    assert done.returncode == 0 and "inverse_scaling_redefine_math" in done.stdout, done.stderr
    assert not marker.exists()


def _installed_include_names() -> set:
    """Every relative include an installed task YAML names, as the one safe reader parses it."""
    names = set()
    for path in (installed_root() / "lm_eval" / "tasks").rglob("*.yaml"):
        config = parse(path.read_bytes(), str(path))
        include = config.get("include") if isinstance(config, dict) else None
        names.update([include] if isinstance(include, str) else include or [])
    return {name for name in names if not name.startswith(("/", ".."))}


def test_a_run_reads_no_file_planted_in_the_working_directory(tmp_path, embedded_cache):
    """Generated from every relative include of the installed task YAMLs: a file of each name with the payload,
    planted in the working directory, is never read by a run. simple_evaluate's default TaskManager read every
    installed YAML with lm-eval 0.4.9.2's loader, which looks an include up there first and ran the payload
    (SOURCE_MAP step 34, H8); the run now hands it an index of its one task (scoring/official.py::task_index)."""
    marker = tmp_path / "MARKER"
    names = _installed_include_names()
    assert len(names) > 300 and {"_default_template_yaml", "_inverse_scaling_mc_yaml"} <= names, len(names)
    planted = tmp_path / "work"
    for name in names:
        (planted / name).parent.mkdir(parents=True, exist_ok=True)
        (planted / name).write_text(_payload(marker))
    done = run_script("run.py", "--lock", LOCK, "--profile", "embedded", "--cache", embedded_cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private", "--quiet", cwd=planted)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert sorted(p.name for p in planted.iterdir()) == sorted({name.split("/")[0] for name in names})  # no output


def test_the_safe_reader_refuses_object_tags_in_an_installed_shape(tmp_path):
    """Even inside a package-shaped tree with no lock, a YAML tag that builds objects is bad input, never run."""
    marker = tmp_path / "MARKER"
    root = tmp_path / "root"
    (root / "lm_eval" / "tasks").mkdir(parents=True)
    (root / "lm_eval" / "tasks" / "t.yaml").write_text(_payload(marker))
    with pytest.raises(InputError, match="not a YAML task config this tool reads"):
        read(root, "lm_eval/tasks/t.yaml")
    (root / "lm_eval" / "tasks" / "inc.yaml").write_text("include: ../../../outside.yaml\n")
    with pytest.raises(InputError, match="leaves the lm_eval package"):
        read(root, "lm_eval/tasks/inc.yaml")
    pins = {"lm_eval/tasks/t.yaml": "0" * 64}
    with pytest.raises(CheckFailed, match="expected sha256 0000"):
        read(root, "lm_eval/tasks/t.yaml", pins)  # the bytes are checked before they are parsed
    assert not marker.exists()


def test_every_installed_task_yaml_reads_as_lm_evals_own_loader_reads_it():
    """The one safe reader gives lm-eval's merged config for every installed YAML (run from the repository, where
    no planted file shadows an include): nothing lm-eval reads differently, and nothing refused."""
    import yaml
    from lm_eval.utils import load_yaml_config

    def plain(value):
        if isinstance(value, yaml.Node):
            return ("node", value.tag, value.value if isinstance(value.value, str) else None)
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    root = installed_root()
    paths = sorted((root / "lm_eval" / "tasks").rglob("*.yaml"))
    assert len(paths) == 12444
    differing = [p for p in paths if plain(read(root, p.relative_to(root).as_posix()).config)
                 != plain(load_yaml_config(str(p), mode="simple"))]
    assert differing == [], differing[:5]
