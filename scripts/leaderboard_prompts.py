"""Which lm-eval release's leaderboard YAMLs give the Open LLM Leaderboard v2's prompts (issue 62, item 2).

Compares, task by task, everything in a leaderboard task's merged YAML that decides its prompts, requests, filters and
metrics (PROMPT_FIELDS; a `!function` hook by the source of the function it names) between an older lm-eval wheel
from the registry (never installed: its files are read from the zip) and the installed, pinned release:

    .venv/bin/python scripts/leaderboard_prompts.py --version 0.4.4 [--wheel PATH] [--out FILE]

Prints one line per task and the counts per status: `equal` (every field the same), `differs` (the fields named),
`only-old` / `only-new`. The written mapping holds sha256s and field names only, no task text;
tests/task/test_tasks.py holds the installed release's side of `data/leaderboard-prompts.json` to the installed YAMLs.
"""

import argparse
import ast
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.task.yaml_file import read  # noqa: E402
from sst2_audit.util.errors import AuditError  # noqa: E402

LEADERBOARD = "lm_eval/tasks/leaderboard"
PROMPT_FIELDS = ("dataset_path", "dataset_name", "test_split", "validation_split", "training_split", "fewshot_split",
                 "process_docs", "doc_to_text", "doc_to_target", "doc_to_choice", "description", "target_delimiter",
                 "fewshot_delimiter", "fewshot_config", "num_fewshot", "output_type", "generation_kwargs",
                 "filter_list", "metric_list", "gen_prefix", "process_results")


def _function_source(root: Path, files: list, name: str) -> str:
    """What a `!function module.name` computes, conservatively: the function's name and the syntax tree of its whole
    module (the helpers and constants it may read; formatting and implicit string joins do not count), from the
    module beside the YAML files read. A change anywhere in the module is a difference: `equal` is never claimed
    for a hook whose code changed."""
    module, _, function = name.rpartition(".")
    for folder in dict.fromkeys(str(Path(f).parent) for f in files):
        path = root / folder / f"{module.replace('.', '/')}.py"
        if path.is_file():
            tree = ast.parse(path.read_text(encoding="utf-8"))
            named = any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == function for n in tree.body)
            return f"{function}\n{ast.dump(tree)}" if named else f"<{module}.py has no {function}>"
    return f"<no {module}.py>"


def _plain(value, root: Path, files: list):
    """A config value as JSON can hold it: a `!function` node by the source of its function."""
    if hasattr(value, "tag") and hasattr(value, "value"):  # the safe reader keeps `!function` as its node
        return {"!function": value.value, "source": _function_source(root, files, str(value.value))}
    if isinstance(value, dict):
        return {str(k): _plain(v, root, files) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, root, files) for v in value]
    return value


def field_hashes(root: Path) -> dict:
    """{task: {field: sha256 of its canonical JSON}} for every leaderboard task YAML under root/lm_eval."""
    tasks: dict = {}
    for path in sorted((root / LEADERBOARD).rglob("*.yaml")):
        relative = str(path.relative_to(root))
        try:
            reading = read(root, relative, None, "leaderboard YAML")
        except AuditError:
            continue  # not a YAML the safe reader takes (none in the releases compared): left out, not guessed
        config = reading.config
        if not isinstance(config, dict) or not isinstance(config.get("task"), str) or "group" in config and \
                isinstance(config.get("task"), list):
            continue  # a group's YAML: its subtasks are compared one by one
        plain = {name: _plain(config.get(name), root, reading.files) for name in PROMPT_FIELDS}
        tasks[config["task"]] = {name: hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=True,
                                                                 default=str).encode()).hexdigest()
                                 for name, value in plain.items()}
    return tasks


def compare(old: dict, new: dict) -> dict:
    out = {}
    for task in sorted(set(old) | set(new)):
        if task not in new or task not in old:
            out[task] = {"status": "only-old" if task in old else "only-new", "fields": []}
            continue
        fields = [name for name in PROMPT_FIELDS if old[task][name] != new[task][name]]
        out[task] = {"status": "differs" if fields else "equal", "fields": fields}
    return out


def _wheel(version: str, given: Path | None, folder: Path) -> Path:
    if given is not None:
        return given
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", "-d",
                    str(folder), f"lm-eval=={version}"], check=True)
    return next(folder.glob("lm_eval-*.whl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True, help="the older lm-eval release, e.g. 0.4.4")
    parser.add_argument("--wheel", type=Path, help="its wheel (else pip downloads it)")
    parser.add_argument("--out", type=Path, help="write the mapping here (never overwritten)")
    args = parser.parse_args()
    from sst2_audit.formats.releases import installed_version
    from sst2_audit.task.evaluator_pin import installed_root

    with tempfile.TemporaryDirectory() as scratch:
        wheel = _wheel(args.version, args.wheel, Path(scratch))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(Path(scratch) / "old", [n for n in archive.namelist() if n.startswith("lm_eval/")])
        old = field_hashes(Path(scratch) / "old")
        wheel_sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    new = field_hashes(installed_root())
    tasks = compare(old, new)
    counts: dict = {}
    for task, found in tasks.items():
        counts[found["status"]] = counts.get(found["status"], 0) + 1
        print(f"{task}: {found['status']}" + (f" ({', '.join(found['fields'])})" if found["fields"] else ""))
    print("counts:", json.dumps(counts, sort_keys=True))
    if args.out is not None:
        if args.out.exists():
            sys.exit(f"{args.out} exists; it is never overwritten.")
        mapping = {"kind": "sst2-audit/leaderboard-prompts", "old": {"version": args.version, "wheel": wheel.name,
                                                                        "sha256": wheel_sha256},
                   "new": {"version": installed_version()}, "fields": list(PROMPT_FIELDS), "counts": counts,
                   "tasks": {task: dict(found, new=new.get(task), old=old.get(task)) for task, found in tasks.items()}}
        args.out.write_text(json.dumps(mapping, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
