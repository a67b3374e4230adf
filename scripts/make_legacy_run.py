"""Re-make the leaderboard-era lm-eval run that tests/formats/test_legacy_writer.py adopts (issue 62): the real `lm_eval`
console entry point of an older release from the package registry (0.4.4, the first with the leaderboard's task
folder and chat-template fields; it writes the Open LLM Leaderboard v2 details' format and no lm_eval_version),
installed into a scratch environment, run on the embedded SmolLM2 model and the embedded profile's demo data:

    .venv/bin/python scripts/make_legacy_run.py --cache .test-cache/embedded [--venv /tmp/le044] [--rows 16]

The run is made the way the lock makes runs comparable (float32, eager attention, batch 1, the lock's seed, in the
lock's numeric mode: its scores are the same bits on every CPU the mode supports), from a scratch folder in which
`cache` names the prepared cache, so no path of this machine is logged. Its two files are written to
tests/data/lm-eval-0.4.4/ (our demo sentences and lm-eval's own prompt template only; about 14 KB).
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
sys.path.insert(0, str(REPO))

from sst2_audit.formats.lock import load_lock  # noqa: E402
from sst2_audit.task.config import data_config  # noqa: E402
from sst2_audit.task.spec import spec_for  # noqa: E402

LOCK = REPO / "resources.lock.json"
TARGET = REPO / "tests" / "data" / "lm-eval-0.4.4"
RELEASE = "0.4.4"


def scratch_environment(venv: Path) -> Path:
    """A venv holding lm-eval RELEASE and this environment's torch, transformers and tokenizers (the same scores)."""
    lm_eval = venv / "bin" / "lm_eval"
    if lm_eval.is_file():
        return lm_eval
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pins = [f"{name}=={metadata.version(name)}" for name in ("torch", "transformers", "tokenizers", "numpy")]
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", f"lm-eval=={RELEASE}", *pins], check=True)
    return lm_eval


def task_yaml(folder: Path) -> str:
    """The embedded profile's pinned task YAML in ./task, its data pointed at ./cache/data (relative: nothing of this
    machine is logged). 0.4.4 takes a YAML only as a folder's: a YAML file's path in --tasks is refused as "not
    found" (its __main__ compares the path with the configs it loaded)."""
    import yaml

    lock = load_lock(LOCK)
    spec = spec_for(lock, lock.profile("embedded").task)
    files = {split: f"cache/data/{split}.parquet" for split in spec.splits}
    (folder / "task").mkdir()
    (folder / "task" / f"{spec.name}.yaml").write_text(yaml.safe_dump(data_config(spec, files, callables=False),
                                                            sort_keys=False))
    return spec.name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="a prepared cache of the lock's embedded profile")
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "sst2-audit-lm-eval-0.4.4")
    parser.add_argument("--rows", type=int, default=16, help="lm-eval's --limit (0.4.4 has no --samples)")
    args = parser.parse_args()
    lm_eval = scratch_environment(args.venv)
    settings = json.loads(LOCK.read_text())["run_settings"]
    with tempfile.TemporaryDirectory(prefix="sst2-audit-legacy-") as scratch:
        folder = Path(scratch)
        (folder / "cache").symlink_to(args.cache.resolve())
        task_yaml(folder)
        env = {**os.environ, **settings["numeric_mode"], "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_CACHE": str(folder / "datasets")}
        argv = [str(lm_eval), "--model", "hf", "--model_args",
                f"pretrained=cache/model,dtype={settings['dtype']},max_length={settings['max_length']},"
                f"attn_implementation={settings['attention']}", "--tasks", "task",
                "--limit", str(args.rows), "--log_samples", "--output_path", "out", "--device", "cpu",
                "--batch_size", "1", "--seed", str(settings["seed"])]
        done = subprocess.run(argv, cwd=str(folder), env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        made = sorted((folder / "out").glob("*/*.json*"))
        shutil.rmtree(TARGET, ignore_errors=True)
        TARGET.mkdir(parents=True)
        for path in made:
            shutil.copyfile(path, TARGET / path.name)
    print(f"lm-eval {RELEASE}: {', '.join(p.name for p in made)} -> {TARGET.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
