"""lm-eval's TaskConfig as data: the effective config a run logs and its differences from the official YAML.

The run's official path hands lm-eval a config whose data-loading fields point at the verified cached
parquet; lm-eval logs `TaskConfig(**config).to_dict()`. The audit rebuilds that dict without importing
lm-eval (lm_eval.api.task pulls torch, transformers and scikit-learn in through `evaluate`: 4.5 s): the
field names and defaults are read with `ast` from the pinned, hash-checked file that declares TaskConfig in the
lock's release (lm_eval/api/task.py in 0.4.9.2, lm_eval/config/task.py in 0.4.13), and to_dict's rule (every
field in declaration order, None dropped; 0.4.13 fills fewshot_config first) is applied here (SOURCE_MAP step 47).
"""

import ast
import copy
import functools
from pathlib import Path

from sst2_audit.formats.releases import release_of
from sst2_audit.task import hook_check
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.task.hooks import nested
from sst2_audit.util.errors import CheckFailed
from sst2_audit.util.hashing import sha256_file

# FewshotConfig's fields in declaration order, and the TaskConfig field each inherits when the YAML does not set it
# (releases that fill fewshot_config: lm_eval/config/task.py, FewshotConfig.from_dict)
FEWSHOT_FIELDS = ("sampler", "split", "process_docs", "fewshot_indices", "samples", "doc_to_text", "doc_to_choice",
                  "doc_to_target", "gen_prefix", "fewshot_delimiter", "target_delimiter")
FEWSHOT_INHERITS = {"split": "fewshot_split", "process_docs": "process_docs", "fewshot_delimiter": "fewshot_delimiter",
                    "target_delimiter": "target_delimiter", "gen_prefix": "gen_prefix", "doc_to_text": "doc_to_text",
                    "doc_to_choice": "doc_to_choice", "doc_to_target": "doc_to_target"}
DATA_FIELDS = ("dataset_path", "dataset_name", "dataset_kwargs")  # the only fields a run may change


@functools.lru_cache(maxsize=4)
def _defaults(path: str) -> tuple:
    tree = hook_check.parsed(Path(path).read_text(encoding="utf-8"))
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "TaskConfig")
    return tuple((node.target.id, ast.literal_eval(node.value)) for node in cls.body
                 if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None)


def taskconfig_defaults(lock) -> dict:
    """TaskConfig's fields and defaults, in declaration order, from the installed file the lock pins (the file
    that declares TaskConfig in the lock's release)."""

    module = release_of(lock.evaluator.version).task_config_module
    path = installed_root() / module
    pinned = lock.evaluator.files.get(module)
    if pinned is None or sha256_file(path) != pinned:
        raise CheckFailed(f"{path}: not the lm-eval file the lock pins ({module} sha256 {pinned}); the effective "
                          "task config cannot be rebuilt from it.")
    return dict(_defaults(str(path)))


def nested_hooks(spec) -> dict:
    """{config field: what lm-eval logs for its hook inside fewshot_config} (hooks.nested)."""
    return {hook.key: nested(hook) for hook in spec.hooks if hook.key in FEWSHOT_INHERITS.values()}


def filled_fewshot(fewshot_config, top: dict, hooks: dict | None = None) -> dict:
    """The fewshot_config a release that fills it logs: the YAML's own keys over the task's inherited fields (an
    inherited hook as `hooks` renders it), sampler "default" unless set, every FewshotConfig field present (None
    kept: only top-level None is dropped)."""
    hooks = hooks or {}
    merged = {name: hooks.get(field, top.get(field)) for name, field in FEWSHOT_INHERITS.items()}
    merged.update(fewshot_config or {})
    merged.setdefault("sampler", "default")
    return {name: copy.deepcopy(merged.get(name)) for name in FEWSHOT_FIELDS}


def data_config(spec, data_files: dict, callables: bool = True, random_seed: int | None = None) -> dict:
    """The official config with only its data-loading fields pointed at the cached parquet files; its hooks
    as the pinned functions (to run it; random_seed: simple_evaluate's) or as their logged source (to rebuild what
    lm-eval logs)."""
    config = spec.config(callables, random_seed)
    config.update(dataset_path="parquet", dataset_kwargs={"data_files": {k: str(v) for k, v in data_files.items()}})
    config.pop("dataset_name", None)
    return config


def effective(config: dict, defaults: dict, release, hooks: dict | None = None) -> dict:
    """TaskConfig(**config).to_dict() for a multiple_choice config (no callables, no generation_kwargs), as the
    lock's release builds it; `hooks`: nested_hooks(spec), for a release that fills fewshot_config."""
    unknown = sorted(set(config) - set(defaults))
    if unknown or config.get("generation_kwargs") is not None:
        raise CheckFailed("the task config has fields TaskConfig does not rebuild here: "
                          f"{unknown or 'generation_kwargs'}.")
    merged = {name: copy.deepcopy(config.get(name, default)) for name, default in defaults.items()}
    if release.fills_fewshot_config:
        merged["fewshot_config"] = filled_fewshot(merged.get("fewshot_config"), merged, hooks)
    return {name: value for name, value in merged.items() if value is not None}


def differences(spec, effective_config: dict, num_fewshot: int, defaults: dict, release) -> dict:
    """Every field whose effective value is not the official YAML's (or TaskConfig's default, or what the
    release fills in)."""
    official, found = spec.config(callables=False), {}
    if release.fills_fewshot_config:
        official["fewshot_config"] = filled_fewshot(official.get("fewshot_config"), {**defaults, **official},
                                                    nested_hooks(spec))
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
