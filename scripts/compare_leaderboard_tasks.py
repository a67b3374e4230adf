"""Which lm-eval release's leaderboard task configs give the Open LLM Leaderboard v2's prompts (issue 62): the
leaderboard's details were written by a fork of about lm-eval 0.4.3; its tasks first ship in a release as 0.4.4's
`lm_eval/tasks/leaderboard/` (none in 0.4.2 or 0.4.3). This compares each leaderboard subtask's effective config in
one release's wheel with another's: the YAML with its `include` chain merged as lm-eval merges it (the included file
first, the task's own keys over it, a shallow update), every `!function module.name` replaced by that function's
source text, and the module's other code noted. A subtask whose effective config and functions are equal renders
the same prompts from the same rows (the prompt is doc_to_text, doc_to_choice, target_delimiter, fewshot_config
and description of the same docs); the first differing field is named otherwise.

    .venv/bin/python scripts/compare_leaderboard_tasks.py --wheels DIR [--base 0.4.4] [--against 0.4.9.2,0.4.13]

The wheels are fetched with `pip download --no-deps lm-eval==X -d DIR` where missing (the package registry only).
Prints one line per subtask and release, the counts per status, and `--json` the same as an object.
"""

import argparse
import ast
import json
import subprocess
import sys
import zipfile
from pathlib import PurePosixPath

import yaml

ROOT = "lm_eval/tasks/leaderboard/"


class _Loader(yaml.SafeLoader):
    """lm-eval's YAML with `!function module.name` kept as ("!function", "module.name")."""


_Loader.add_constructor("!function", lambda loader, node: ["!function", loader.construct_scalar(node)])


def wheel(folder: str, release: str) -> zipfile.ZipFile:
    path = f"{folder}/lm_eval-{release}-py3-none-any.whl"
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"lm-eval=={release}",
                        "-d", folder], check=True)
        return zipfile.ZipFile(path)


def _files(archive: zipfile.ZipFile) -> dict:
    return {name[len(ROOT):]: archive.read(name).decode() for name in archive.namelist() if name.startswith(ROOT)}


def _definitions(tree: ast.Module) -> dict:
    """{name: node} of a module's top-level functions, classes and assignments."""
    found: dict = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def _function(files: dict, folder: PurePosixPath, reference: str) -> str:
    """`module.name` in the task's folder as what it computes: the AST (not the text: `"a" "b"` and `"ab"`, `i+1` and
    `i + 1` are the same code) of it and of every top-level name of its module it reaches, transitively."""
    module, _, name = reference.rpartition(".")
    source = files.get(str(folder / f"{module.replace('.', '/')}.py"))
    if source is None:
        return f"<no module {module}>"
    definitions = _definitions(ast.parse(source))
    if name not in definitions:
        return f"<no {name} in {module}>"
    seen, todo = {}, [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in definitions:
            continue
        seen[current] = ast.dump(definitions[current], include_attributes=False)
        todo += [node.id for node in ast.walk(definitions[current]) if isinstance(node, ast.Name)]
    return json.dumps(seen, sort_keys=True)


def _resolved(value, files: dict, folder: PurePosixPath):
    if isinstance(value, list) and len(value) == 2 and value[0] == "!function":
        return {"!function": value[1], "source": _function(files, folder, value[1])}
    if isinstance(value, dict):
        return {key: _resolved(item, files, folder) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, files, folder) for item in value]
    return value


def _config(files: dict, path: str) -> dict:
    folder = PurePosixPath(path).parent
    raw = yaml.load(files[path], Loader=_Loader) or {}
    included = raw.pop("include", None)
    config = _config(files, str(folder / included)) if included else {}
    config.update(_resolved(raw, files, folder))
    return config


def tasks(files: dict) -> dict:
    """{task name: (its file, its effective config)} of every leaderboard subtask (a `task:` that is a name)."""
    found = {}
    for path in sorted(files):
        if path.endswith((".yaml", "_yaml")) and not PurePosixPath(path).name.startswith("_"):
            config = _config(files, path)
            if isinstance(config.get("task"), str):
                found[config["task"]] = (path, config)
    return found


# what makes a prompt: the docs (their source, split and processing), their rendering and the shots
PROMPT_FIELDS = ("dataset_path", "dataset_name", "dataset_kwargs", "test_split", "validation_split", "fewshot_split",
                 "training_split", "process_docs", "doc_to_text", "doc_to_choice", "doc_to_target", "target_delimiter",
                 "fewshot_delimiter", "description", "num_fewshot", "fewshot_config", "output_type", "use_prompt")


def _differences(a: dict, b: dict) -> list:
    """The top-level fields whose effective value differs, prompt fields first."""
    fields = [key for key in set(a) | set(b) if a.get(key, "<absent>") != b.get(key, "<absent>")]
    return sorted(fields, key=lambda key: (key not in PROMPT_FIELDS, PROMPT_FIELDS.index(key)
                                           if key in PROMPT_FIELDS else 0, str(key)))


def compare(base: dict, other: dict) -> dict:
    """{task: status}: "same", "same prompts (other fields: ...)", "prompts differ: fields...", or absent."""
    status = {}
    for name in sorted(set(base) | set(other)):
        if name not in other or name not in base:
            status[name] = "only in the base" if name not in other else "not in the base"
            continue
        fields = _differences(base[name][1], other[name][1])
        prompt = [key for key in fields if key in PROMPT_FIELDS]
        status[name] = ("same" if not fields else f"prompts differ: {', '.join(prompt)}" if prompt
                        else f"same prompts (other fields: {', '.join(map(str, fields))})")
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", required=True, help="a folder holding (or to hold) lm_eval-X-py3-none-any.whl")
    parser.add_argument("--base", default="0.4.4", help="the release the leaderboard-era prompts are taken from")
    parser.add_argument("--against", default="0.4.9.2,0.4.13", help="the releases compared with it")
    parser.add_argument("--json", action="store_true", help="print the statuses as one JSON object")
    args = parser.parse_args()
    base = tasks(_files(wheel(args.wheels, args.base)))
    found = {release: compare(base, tasks(_files(wheel(args.wheels, release))))
             for release in args.against.split(",")}
    if args.json:
        print(json.dumps({"base": args.base, "subtasks": len(base), "status": found}, indent=2, sort_keys=True))
        return 0
    for release, status in found.items():
        print(f"lm-eval {release} against {args.base} ({len(base)} leaderboard subtasks):")
        for name, words in status.items():
            print(f"  {name}: {words}")
        counts: dict = {}
        for words in status.values():
            kind = words.split(" (")[0].split(":")[0]
            counts[kind] = counts.get(kind, 0) + 1
        print(f"  counts: {json.dumps(counts, sort_keys=True)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
