"""Real plain `lm_eval` console runs of the embedded demo on a tiny model, and adopt / audit of them: what the
adoption tests of every room share (the `plain` fixture, tests/conftest.py, builds them once a test run)."""

import json
import os
from pathlib import Path

from support.builders import prepare_cache, tiny_model_lock
from support.lm_eval_files import copy_run
from support.paths import LOCK, VENV_BIN
from support.processes import lm_eval_console, run_script

ROWS = 16  # the first dev rows in hash order
# what in an adopted record describes the adopting machine, not the measurement: shown, held by nothing (each
# every-field test adds what its record kind names of the files it adopted)
ADOPTING_MACHINE = ("run_name", "bits_required", "rescore.seed", "rescore.processes", "resources.*.size",
                    "resources.*.source", "platform.", "versions.", "timings.")
ADOPT = str(VENV_BIN / "sst2-audit")  # the installed command, run as a script (forked from the warm interpreter)


def task_yaml(lock: Path, cache: Path, target: Path, profile: str = "embedded") -> list:
    """The profile's official task YAML with only its data fields pointed at the verified cache (what run's official
    path hands lm-eval; the CLI takes a YAML path as --tasks); returns the first ROWS dev ids in hash order."""
    import yaml

    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    reviewer = load_lock(lock)
    spec = spec_for(reviewer, reviewer.profile(profile).task)
    files = {split: str(cache / "data" / f"{split}.parquet") for split in spec.splits}
    target.write_text(yaml.safe_dump(data_config(spec, files, callables=False), sort_keys=False))
    data = verified_rows(reviewer, reviewer.profile(profile), spec, cache, roles=())
    return list(data.split.dev_ids[:ROWS])


def plain_lm_eval(folder: Path, name: str, ids: list, dtype: str = "float32", task: str = "sst2",
                  seed: str | None = "94", num_fewshot: int | None = None, max_length: int = 512,
                  datasets: str | None = None, extra: tuple = (), model: Path | None = None) -> Path:
    """The real lm_eval console entry point, as a user runs it on folder/<task>.yaml and folder/cache/model: float32,
    eager attention, batch 1, the lock's seed (None: lm-eval's defaults), in the lock's numeric mode (this process set
    it, conftest.py): what gives bits on this CPU. datasets: the run whose datasets cache it reads (default its own).
    extra: more lm_eval arguments (the chat settings); model: another model folder than the cache's."""
    out = folder / name
    argv = ["--model", "hf", "--model_args",
            f"pretrained={model or folder / 'cache' / 'model'},dtype={dtype},max_length={max_length},"
            "attn_implementation=eager",
            "--tasks", str(folder / f"{task}.yaml"), "--samples", json.dumps({task: ids}), "--log_samples",
            "--output_path", str(out), "--device", "cpu", "--batch_size", "1", *(["--seed", seed] if seed else []),
            *(["--num_fewshot", str(num_fewshot)] if num_fewshot is not None else []), *extra]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(folder / f"datasets-{datasets or name}")}
    done = lm_eval_console(argv, env, folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def build_plain_runs(folder: Path, embedded_cache: Path, lock: Path = LOCK, bf16: bool = True) -> None:
    """`lock` on a tiny model, its cache, and real lm_eval CLI runs of this environment's release: the first ROWS
    dev ids sorted, unsorted (hash order: lm-eval pairs docs and ids wrongly, #4084) and, with bf16, in bfloat16."""
    lock = tiny_model_lock(lock, folder, embedded_cache)
    cache = prepare_cache(lock, "embedded", folder)
    ids = task_yaml(lock, cache, folder / "sst2.yaml")
    plain_lm_eval(folder, "sorted", sorted(ids))
    plain_lm_eval(folder, "unsorted", ids)
    if bf16:
        plain_lm_eval(folder, "bf16", sorted(ids), dtype="bfloat16")
    (folder / "ids.json").write_text(json.dumps(ids))


def adopt(plain: Path, output, *args, cwd: Path, lock: str = LOCK.name):
    return run_script(ADOPT, "adopt", output, "--lock", plain / lock, "--profile", "embedded",
                      "--cache", plain / "cache", *args, cwd=cwd)


def audit(plain: Path, *args, cwd: Path, lock: str = LOCK.name):
    return run_script(ADOPT, "audit", "--lock", plain / lock, "--cache", plain / "cache", *args, cwd=cwd)


def copy_sorted(plain: Path, target: Path) -> tuple:
    return copy_run(plain / "sorted", target)


def task_yamls(lock: Path, profiles: list, base: Path, rows: int = 8) -> dict:
    """Each profile prepared into base/cache (one cache, many profiles) and its task YAML with only the data fields
    pointed at the cache (and the lock's n-shot): {task: (its YAML path, its first `rows` dev ids, sorted)}."""
    import yaml

    from sst2_audit.formats.lock import load_lock
    from sst2_audit.formats.manifest import cache_for
    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    reviewer, found = load_lock(lock), {}
    for profile in profiles:
        done = run_script("prepare.py", "--lock", lock, "--profile", profile, "--cache", base / "cache")
        assert done.returncode == 0, done.stderr
        cache = cache_for(base / "cache", profile)
        spec = spec_for(reviewer, reviewer.profile(profile).task)
        config = data_config(spec, {split: str(cache / "data" / f"{split}.parquet") for split in spec.splits},
                             callables=False)
        shots = reviewer.settings_for(profile, spec)["num_fewshot"]
        config.update({"num_fewshot": shots} if shots else {})
        path = base / "tasks" / f"{spec.name}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        found_rows = verified_rows(reviewer, reviewer.profile(profile), spec, cache, roles=())
        found[spec.name] = (path, sorted(found_rows.split.dev_ids[:rows]))
    return found


def lm_eval_tasks(base: Path, tasks: list, ids: dict, name: str = "out", more: tuple = ()) -> Path:
    """The real lm_eval console entry point over several tasks (YAML paths), float32, eager, batch 1, seed 94."""
    (base / "samples.json").write_text(json.dumps(ids))
    model = next((base / "cache").glob("**/model/config.json")).parent
    argv = ["--model", "hf", "--model_args",
            f"pretrained={model},dtype=float32,max_length=512,attn_implementation=eager", "--tasks", ",".join(tasks),
            "--samples", str(base / "samples.json"), "--log_samples", "--output_path", str(base / name),
            "--device", "cpu", "--batch_size", "1", "--seed", "94", *more]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(base / "datasets")}
    done = lm_eval_console(argv, env, base)
    assert done.returncode == 0, done.stderr[-3000:]
    return base / name


def every_adopted_field_held(folder: Path, lock: Path, cache: Path, capsys, descriptive: tuple, skip) -> dict:
    """Each leaf of an adopted folder's adopted.json changed alone and the folder audited (structural) in this
    process: support/json_paths.py::every_leaf_held."""
    from sst2_audit.cli import audit_main
    from support.json_paths import every_leaf_held

    command = ["--lock", str(lock), "--cache", str(cache), "--structural", "--out", str(folder)]
    return every_leaf_held(folder / "adopted.json", lambda: (audit_main(command), capsys.readouterr().out),
                           descriptive, skip)
