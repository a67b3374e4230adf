"""prepare --lm-eval-files DIR: what a plain `lm_eval` run needs for `adopt` to find it bit for bit with a profile:
the task's official YAML with only its data fields pointed at the verified cache (and its pinned hook files beside it,
each `!function` naming its module there), the profile's first dev rows in
hash order as a --samples file (sorted by id: lm-eval 0.4.9.2 mislabels unsorted ids, #4084), and the exact command
line: the lock's numeric mode as environment variables, its dtype, max_length and attention in model_args, batch 1 on
the CPU, its seed and shots. Three choices a user had to find alone before (issue 60). `run` of a generate_until or
loglikelihood_rolling profile runs the same files and line itself (run/plain.py)."""

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.releases import release_of
from sst2_audit.task.config import data_config
from sst2_audit.task.hooks import pinned_bytes
from sst2_audit.task.rows import verified_rows
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError

SAMPLES_FILE = "samples.json"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}  # the data is the cache's: nothing is fetched


@dataclass(frozen=True)
class LmEvalCommand:
    """The plain `lm_eval` run of a profile: its environment variables, its arguments after `lm_eval`, and how many
    dev rows its --samples file names."""

    env: dict
    argv: list
    rows: int

    def line(self) -> str:
        """As a user types it: `env K=V ... lm_eval ARGS`."""
        words = ["env", *(f"{k}={v}" for k, v in sorted(self.env.items())), "lm_eval", *self.argv]
        return " ".join(shlex.quote(word) for word in words)


def write(lock, profile, spec, cache: Path, given_cache: Path, folder: Path, rows: int | None,
          output: str) -> LmEvalCommand:
    """Writes folder/<task>.yaml and folder/samples.json; returns the `lm_eval` command (paths as given)."""
    modules = {Path(hook.path).name for hook in spec.hooks}
    if len(modules) != len({Path(hook.path) for hook in spec.hooks}) or f"{spec.name}.yaml" in modules:
        raise InputError(f"--lm-eval-files: task {spec.name}'s hooks live in files of one name in several folders; "
                         "write its YAML and hook files by hand (docs/cli.md, adopt).")
    settings = lock.settings_for(profile.name, spec)
    data = verified_rows(lock, profile, spec, cache, roles=())
    count = len(data.split.dev_ids) if rows is None else rows
    if not 0 < count <= len(data.split.dev_ids):
        raise InputError(f"--lm-eval-rows: expected 1 to {len(data.split.dev_ids)} (the profile's dev rows), got "
                         f"{count}.")
    files = {split: str(Path(given_cache) / "data" / f"{split}.parquet") for split in spec.splits}
    hooked = {hook.key for hook in spec.hooks}
    config = {key: value for key, value in data_config(spec, files, callables=False).items() if key not in hooked}
    if settings["num_fewshot"]:
        config["num_fewshot"] = settings["num_fewshot"]
    atomic.new_directory(folder, "--lm-eval-files")
    import yaml

    task_yaml, samples = Path(folder) / f"{spec.name}.yaml", Path(folder) / SAMPLES_FILE
    for hook in {hook.path: hook for hook in spec.hooks}.values():  # the pinned code beside the YAML, once a file
        atomic.write_bytes(Path(folder) / Path(hook.path).name, pinned_bytes(hook))
    tags = "".join(f"{hook.key}: !function {Path(hook.path).stem}.{hook.function}\n" for hook in spec.hooks)
    atomic.write_bytes(task_yaml, (yaml.safe_dump(config, sort_keys=False) + tags).encode())
    atomic.write_bytes(samples, (json.dumps({spec.name: sorted(data.split.dev_ids[:count])}) + "\n").encode())
    model_args = (f"pretrained={Path(given_cache) / 'model'},dtype={settings['dtype']},max_length="
                  f"{settings['max_length']},attn_implementation={settings['attention']}"
                  + (",add_bos_token=True" if settings["add_bos_token"] else ""))
    words = ["--model", "hf", "--model_args", model_args, "--tasks", str(task_yaml), "--samples", str(samples),
             "--log_samples", "--output_path", output, "--device", settings["device"], "--batch_size",
             str(settings["batch_size"]), "--seed", str(settings["seed"]), *_chat_words(settings, lock)]
    return LmEvalCommand({**settings["numeric_mode"], **OFFLINE}, words, count)


def _chat_words(settings: dict, lock) -> list:
    """The profile's chat settings as lm_eval's flags (0.4.13's CLI turns fewshot_as_multiturn on with a template
    unless told `false`)."""
    words = ["--apply_chat_template"] if settings.get("apply_chat_template") else []
    if settings.get("fewshot_as_multiturn"):
        words.append("--fewshot_as_multiturn")
    elif words and release_of(lock.evaluator.version).cli_multiturn_by_default:
        words += ["--fewshot_as_multiturn", "false"]
    if settings.get("system_instruction") is not None:
        words += ["--system_instruction", settings["system_instruction"]]
    return words
