"""Make a real lighteval run (issue 62; tests/data/lighteval-0.13.0 and lighteval-0.10.0 are its output): lighteval
from the package registry, installed into a scratch environment with this environment's torch and transformers, run
on the embedded SmolLM2 model and the embedded profile's demo data with a custom task of our own whose prompt is the
pinned sst2 YAML's, in a model config of the lock's dtype and attention on the CPU. It runs in a scratch folder with
the model and data named by relative paths (`model`, `data`), so its files name no machine path:

    .venv/bin/python scripts/make_lighteval_run.py --cache .test-cache/embedded --out tests/data/lighteval-0.13.0
    .venv/bin/python scripts/make_lighteval_run.py --cache .test-cache/embedded --out tests/data/lighteval-0.10.0 \
        --release 0.10.0 --venv /tmp/lighteval-0.10.0

Found on the way (2026-12-06): lighteval 0.13.0 downloads tinyBenchmarks.pkl from a code host while it loads its task
registry (unreachable here: an empty file is put where it looks first); with xxhash 4 its details logger fails
("Strings must be encoded before hashing": it hashes str), so xxhash < 4 is installed; it writes its response cache
into the model folder, so the model is copied, never linked from the cache. Its details are parquet in the post-0.11
schema (doc / model_response / metric structs), logprobs rounded to 10 digits by that cache. lighteval 0.10.0 (the
flat schema, full floats) pins numpy 1.26, so its scratch environment also takes `pyarrow<19` and `datasets<4`.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TASK = '''from lighteval.metrics.metrics import Metrics
from lighteval.tasks.lighteval_task import LightevalTaskConfig
from lighteval.tasks.requests import Doc


def sst2_prompt(line, task_name=None):
    return Doc(task_name=task_name, query=f"{line['sentence']}\\nQuestion: Is this sentence positive or negative?\\nAnswer:",
               choices=[" negative", " positive"], gold_index=int(line["label"]))


TASKS_TABLE = [LightevalTaskConfig(name="sst2demo", prompt_function=sst2_prompt, hf_repo="data", hf_subset="default",
                                   hf_avail_splits=["train", "validation"], evaluation_splits=["validation"],
                                   few_shots_split="train", few_shots_select="sequential",
                                   metrics=[Metrics.loglikelihood_acc], version=0)]
'''
# before 0.11 a task names its suite and its metrics as `metric`, and a task is named suite|task|shots|truncate
TASK_FLAT = TASK.replace("metrics=[", 'suite=["custom"], metric=[')
RELEASES = {"0.13.0": (TASK, "custom|sst2demo|0"), "0.10.0": (TASK_FLAT, "custom|sst2demo|0|0")}


def scratch_environment(venv: Path, release: str) -> Path:
    lighteval = venv / "bin" / "lighteval"
    if not lighteval.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = [f"{name}=={metadata.version(name)}" for name in ("torch", "transformers", "tokenizers")]
        older = ["pyarrow<19", "datasets<4"] if release == "0.10.0" else []  # numpy 1.26, which lighteval 0.10 pins
        subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"lighteval=={release}", "xxhash<4", *pins,
                        *older], check=True)
    for site in (venv / "lib").glob("python3*/site-packages/lighteval/tasks/tasks"):  # 0.13.0's registry folder
        (site / "tinyBenchmarks.pkl").touch()  # its registry downloads this at load otherwise
    return lighteval


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="a prepared cache of the lock's embedded profile")
    parser.add_argument("--out", type=Path, required=True, help="where lighteval's results and details go")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "sst2-audit-lighteval")
    parser.add_argument("--rows", type=int, default=16, help="lighteval's --max-samples")
    parser.add_argument("--release", choices=sorted(RELEASES), default="0.13.0")
    args = parser.parse_args()
    lighteval = scratch_environment(args.venv, args.release)
    task, name = RELEASES[args.release]
    settings = json.loads((REPO / "resources.lock.json").read_text())["run_settings"]
    with tempfile.TemporaryDirectory(prefix="sst2-audit-lighteval-") as scratch:
        folder = Path(scratch)
        shutil.copytree(args.cache / "data", folder / "data")
        shutil.copytree(args.cache / "model", folder / "model")
        (folder / "tasks.py").write_text(task)
        # the lock's numeric mode, dtype and attention, on the CPU: what the reviewer's rescore computes
        (folder / "model.yaml").write_text(
            "model_parameters:\n  model_name: model\n  dtype: float32\n  batch_size: 1\n  device: cpu\n"
            f"  model_loading_kwargs:\n    attn_implementation: {settings['attention']}\n")
        env = {**os.environ, **settings["numeric_mode"], "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
        done = subprocess.run([str(lighteval), "accelerate", "model.yaml",
                               name, "--custom-tasks", "tasks.py", "--output-dir", "out",
                               "--save-details", "--max-samples", str(args.rows)],
                              cwd=str(folder), env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        shutil.rmtree(folder / "out" / "cache", ignore_errors=True)
        shutil.copytree(folder / "out", args.out, dirs_exist_ok=False)
    print(f"lighteval {args.release}: {', '.join(str(p) for p in sorted(args.out.rglob('*.*')))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
