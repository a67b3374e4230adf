"""lm-eval's TaskConfig as data: the effective config a run logs and its differences from the official YAML.

The run's official path hands lm-eval a config whose data-loading fields point at the verified cached
parquet; lm-eval logs `TaskConfig(**config).to_dict()`. The audit rebuilds that dict without importing
lm-eval (lm_eval.api.task pulls torch, transformers and scikit-learn in through `evaluate`: 4.5 s): the
field names and defaults are read with `ast` from the pinned, hash-checked lm_eval/api/task.py, and
to_dict's rule (every field in declaration order, None dropped) is applied here (SOURCE_MAP step 47).
"""

import ast
import copy
import functools
from pathlib import Path

from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.util.errors import CheckFailed
from sst2_audit.util.hashing import sha256_file

TASK_MODULE = "lm_eval/api/task.py"
DATA_FIELDS = ("dataset_path", "dataset_name", "dataset_kwargs")  # the only fields a run may change


@functools.lru_cache(maxsize=4)
def _defaults(path: str) -> tuple:
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TaskConfig")
    return tuple((node.target.id, ast.literal_eval(node.value)) for node in cls.body
                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None)


def taskconfig_defaults(lock) -> dict:
    """TaskConfig's fields and defaults, in declaration order, from the installed file the lock pins."""

    path = installed_root() / TASK_MODULE
    pinned = lock.evaluator.files.get(TASK_MODULE)
    if pinned is None or sha256_file(path) != pinned:
        raise CheckFailed(f"{path}: not the lm-eval file the lock pins ({TASK_MODULE} sha256 {pinned}); the effective "
                          "task config cannot be rebuilt from it.")
    return dict(_defaults(str(path)))


def data_config(spec, data_files: dict, callables: bool = True) -> dict:
    """The official config with only its data-loading fields pointed at the cached parquet files; its hooks
    as the pinned functions (to run it) or as their logged source (to rebuild what lm-eval logs)."""
    config = spec.config(callables)
    config.update(dataset_path="parquet", dataset_kwargs={"data_files": {k: str(v) for k, v in data_files.items()}})
    config.pop("dataset_name", None)
    return config


def effective(config: dict, defaults: dict) -> dict:
    """TaskConfig(**config).to_dict() for a multiple_choice config (no callables, no generation_kwargs)."""
    unknown = sorted(set(config) - set(defaults))
    if unknown or config.get("generation_kwargs") is not None:
        raise CheckFailed("the task config has fields TaskConfig does not rebuild here: "
                          f"{unknown or 'generation_kwargs'}.")
    merged = {name: copy.deepcopy(config.get(name, default)) for name, default in defaults.items()}
    return {name: value for name, value in merged.items() if value is not None}


def differences(spec, effective_config: dict, num_fewshot: int, defaults: dict) -> dict:
    """Every field whose effective value is not the official YAML's (or TaskConfig's default)."""
    official, found = spec.config(callables=False), {}
    for key in sorted(set(official) | set(effective_config)):
        reference = official.get(key, defaults.get(key))
        if effective_config.get(key) != reference:
            found[key] = {"official": reference, "effective": effective_config.get(key)}
    forbidden = sorted(set(found) - set(DATA_FIELDS) - {"num_fewshot"})
    if forbidden:
        raise CheckFailed(
            f"the effective {spec.name} task config differs from the official YAML outside the data-loading "
            f"fields: {', '.join(forbidden)} ({ {k: found[k] for k in forbidden} })."
        )
    if effective_config.get("num_fewshot") != num_fewshot:
        raise CheckFailed(f"the effective {spec.name} task config has num_fewshot "
                          f"{effective_config.get('num_fewshot')!r}; the lock pins {num_fewshot}.")
    return found
