"""The installed lm-eval must be byte-identical to the pinned tag on the scoring path."""

from pathlib import Path

from sst2_audit.formats.records import EvaluatorRecord
from sst2_audit.formats.releases import extras_words, require_installed, supported_words
from sst2_audit.task.yaml_file import confined
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file


def installed_root() -> Path:
    """The folder that holds the lm_eval package (paths in the lock are relative to it)."""
    import importlib.util

    spec = importlib.util.find_spec("lm_eval")
    if spec is None or spec.origin is None:
        raise InputError(f"lm_eval is not installed; install the release the lock pins beside sst2-audit (the "
                         f"extra {extras_words()}; sst2-audit supports {supported_words()}).")
    return Path(spec.origin).parent.parent


TASKS_FOLDER = "lm_eval/tasks/"


def _task_config_file(path: str) -> bool:
    """A task's own file: a YAML, or a hook file in a task's folder (lm_eval/tasks/__init__.py is lm-eval's code)."""
    return path.startswith(TASKS_FOLDER) and (not path.endswith(".py") or path.count("/") >= 3)


def files_for(lock, spec) -> dict:
    """The pins a run of this task depends on: every pinned code file, and the task's own YAML
    files. Other tasks' YAMLs in the lock are not part of this measurement."""
    return {path: digest for path, digest in lock.evaluator.files.items()
            if not _task_config_file(path) or path in spec.yaml_files + spec.code_files}


def evaluator_record(lock, files: dict, spec) -> EvaluatorRecord:
    """run.json's evaluator field from the lock's pins and the {path: sha256} of the files verified.

    The run passes what verify_installed() hashed; the audit passes the lock's own pins.
    """
    pins = lock.evaluator
    record: EvaluatorRecord = {
        "package": pins.package, "version": pins.version, "commit": pins.commit, "task": spec.name,
        "task_yaml": spec.yaml_path, "task_yaml_sha256": files[spec.yaml_path],
        "task_yaml_files": {path: files[path] for path in spec.yaml_files}, "files_verified": len(files)}
    if spec.shared_hooks:  # code both paths ran, shared rather than re-derived (only a task with hooks has the key)
        record["shared_code"] = _code(spec.shared_hooks, files)
    if spec.rederived_hooks:  # a process_results hook: lm-eval's path alone runs it, the independent path re-derives
        record["rederived_code"] = _code(spec.rederived_hooks, files)
    return record


def _code(hooks, files: dict) -> list:
    return [{"step": hook.key, "file": hook.path, "function": hook.function, "sha256": files[hook.path]}
            for hook in hooks]


def verify_installed(lock, spec) -> dict:
    """Hash every pinned file of the installed evaluator this task depends on; returns {path: sha256}."""
    return verify_pinned(lock, files_for(lock, spec))


def verify_pinned(lock, pins: dict) -> dict:
    """Hash these pinned files ({path: sha256}) of the installed evaluator; returns {path: actual sha256}."""

    require_installed(lock.evaluator.version, f"{lock.path}")  # another release: a refusal, not a FAIL
    root = installed_root()
    problems, seen = [], {}
    for relative, pinned in sorted(pins.items()):
        path = confined(root, relative, "evaluator.files")  # inside the package, no symlink on the way
        if not path.is_file():
            problems.append(f"{relative} is missing")
            continue
        seen[relative] = actual = sha256_file(path)
        if actual != pinned:
            problems.append(f"{relative}: expected sha256 {pinned}, got {actual}")
    if problems:
        raise CheckFailed(
            f"the installed lm-eval under {root} is not the pinned {lock.evaluator.version} "
            f"(commit {lock.evaluator.commit[:12]}): " + "; ".join(problems) + "."
        )
    return seen
