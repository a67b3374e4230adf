"""Benchmark (issue 65): adopting a three-task plain lm-eval run in one command against three one-task adopts of the
same run, side by side in one session (wall clock, peak RSS from wait4).

The run: the real `lm_eval` console command over three task YAMLs of resources.lock.json's embedded profiles (sst2,
rte, inverse_scaling_redefine_math: the real embedded SmolLM2-135M, float32, eager, batch 1, the first ROWS dev rows
of each), every profile prepared into one cache. Each round:
  (one)   `sst2-audit adopt OUT` (no --profile): every task, every row rescored, the model loaded once;
  (three) `sst2-audit adopt OUT --profile P` for each of the three profiles, one process each.
Prints the medians and the ratio one/three (target <= 1.0: the model loads once, the interpreter starts once).

Usage: python benchmarks/bench_adopt_run.py [--store .test-cache/store] [--rows 16] [--repeat 3]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.formats.lock import load_lock  # noqa: E402
from sst2_audit.protocol.numeric import activate  # noqa: E402
from timing import measure, medians_and_peaks  # noqa: E402

LOCK = REPO / "resources.lock.json"
BIN = Path(sys.executable).parent
PROFILES = ("embedded", "embedded-rte", "embedded-inverse-scaling")


def build(base: Path, rows: int) -> Path:
    """The three profiles prepared into base/cache and the real lm_eval run of their tasks: its --output_path."""
    import yaml

    from sst2_audit.formats.manifest import cache_for
    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    lock, tasks, ids = load_lock(LOCK), [], {}
    for profile in PROFILES:
        subprocess.run([str(BIN / "sst2-audit"), "prepare", "--profile", profile, "--cache", str(base / "cache")],
                       check=True, capture_output=True)
        cache = cache_for(base / "cache", profile)
        spec = spec_for(lock, lock.profile(profile).task)
        config = data_config(spec, {split: str(cache / "data" / f"{split}.parquet") for split in spec.splits},
                             callables=False)
        path = base / f"{spec.name}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        tasks.append(str(path))
        data = verified_rows(lock, lock.profile(profile), spec, cache, roles=())
        ids[spec.name] = sorted(data.split.dev_ids[:rows])
    (base / "samples.json").write_text(json.dumps(ids))
    model = cache_for(base / "cache", PROFILES[0]) / "model"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "HF_DATASETS_CACHE": str(base / "datasets")}
    subprocess.run([str(BIN / "lm_eval"), "--model", "hf", "--model_args",
                    f"pretrained={model},dtype=float32,max_length=512,attn_implementation=eager", "--tasks",
                    ",".join(tasks), "--samples", str(base / "samples.json"), "--log_samples", "--output_path",
                    str(base / "out"), "--device", "cpu", "--batch_size", "1", "--seed", "94"],
                   check=True, capture_output=True, env=env, cwd=str(base))
    return base / "out"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    activate(load_lock(LOCK).run_settings["numeric_mode"])  # the children inherit the lock's numeric mode
    with tempfile.TemporaryDirectory(prefix="bench-adopt-run-") as scratch:
        base = Path(scratch)
        out = build(base, args.rows)
        adopt = [str(BIN / "sst2-audit"), "adopt", str(out), "--cache", str(base / "cache"), "--seed", "1"]
        results = {"one": [], "three": []}
        for round_ in range(args.repeat):
            shutil.rmtree(base / "runs", ignore_errors=True)
            wall, rss, text = measure(adopt + ["--out", str(base / "runs" / f"one-{round_}")], base)
            assert text.startswith("VERDICT: PASS: every task's audit passed"), text[:300]
            results["one"].append((wall, rss))
            total, peak = 0.0, 0
            for profile in PROFILES:
                wall, rss, text = measure(adopt + ["--profile", profile, "--out",
                                                   str(base / "runs" / f"{profile}-{round_}")], base)
                assert text.startswith("VERDICT: PASS"), text[:300]
                total, peak = total + wall, max(peak, rss)
            results["three"].append((total, peak))
            print(f"round {round_ + 1}: one command {results['one'][-1][0]:.2f} s, three adopts {total:.2f} s",
                  flush=True)
        walls, peaks = medians_and_peaks(results)
        print(f"three tasks x {args.rows} rows, real embedded model, {os.cpu_count()} cores")
        for key in ("one", "three"):
            print(f"  {key:5s}: median {walls[key]:.2f} s, peak RSS {peaks[key] / 1e9:.2f} GB")
        print(f"  ratio one/three: {walls['one'] / walls['three']:.3f} (target <= 1.0)")


if __name__ == "__main__":
    main()
