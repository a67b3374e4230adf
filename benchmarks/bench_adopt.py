"""Benchmark: adopting a plain lm-eval run with every row rescored, beside the run itself and one independent pass.

Each round, as whole processes on the same cache and rows (wall clock, peak RSS from wait4):
  (a) the plain run: the real `lm_eval` console command (hf model, float32, batch 1, --log_samples), the official
      task YAML with its data fields pointed at the cache, the first ROWS dev rows, as a user runs it (torch's
      default threads);
  (b) `sst2-audit adopt` of (a)'s output folder, every row rescored (the default);
  (f) the floor of (b)'s rescore: benchmarks/floor.py `passes ROWS` (imports, the model loaded, one forward pass
      per candidate, at the rescore's threads).
Prints the medians and the ratios b/f (target <= 1.1: issue 46) and b/a.
--bf16 also makes one plain run in bfloat16 and adopts it: the verdict, and how far its scores lie from this
machine's float32 rescore (the largest absolute and relative difference, the flips): the evidence for the bound
adopt derives from a claimed bfloat16 (audit/adopt_scores.py).

Usage: python benchmarks/bench_adopt.py [--cache .test-cache/embedded] [--rows 64] [--repeat 3] [--bf16]
The lock's numeric mode is set in this process before anything imports torch (the children inherit it), as a
reviewer's shell would set it for lm_eval to give bits on this CPU.
"""

import argparse
import json
import os
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


def task_yaml(lock, cache: Path, target: Path, rows: int) -> list:
    """The official task YAML with only its data fields pointed at the verified cache; the first `rows` dev ids."""
    import yaml

    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    spec = spec_for(lock, "sst2")
    files = {split: str(cache / "data" / f"{split}.parquet") for split in spec.splits}
    target.write_text(yaml.safe_dump(data_config(spec, files, callables=False), sort_keys=False))
    data = verified_rows(lock, lock.profile("embedded"), spec, cache, roles=())
    return sorted(data.split.dev_ids[:rows])


def commands(scratch: Path, cache: Path, out: Path, name: str, dtype: str = "float32") -> tuple:
    """(the plain lm_eval run writing `out`, the adoption of it as `name`)."""
    plain = [str(BIN / "lm_eval"), "--model", "hf", "--model_args",
             f"pretrained={cache / 'model'},dtype={dtype},max_length=512,attn_implementation=eager",
             "--tasks", str(scratch / "sst2.yaml"), "--samples", str(scratch / "samples.json"), "--log_samples",
             "--output_path", str(out), "--device", "cpu", "--batch_size", "1", "--seed", "94"]
    adopt = [str(BIN / "sst2-audit"), "adopt", str(out), "--profile", "embedded", "--lock", str(LOCK),
             "--cache", str(cache), "--run-name", name, "--seed", "1"]
    return plain, adopt


def bf16(scratch: Path, cache: Path, env: dict) -> None:
    plain, adopt = commands(scratch, cache, scratch / "bf16", "bf16", dtype="bfloat16")
    measure(plain, scratch, {**env, "HF_DATASETS_CACHE": str(scratch / "datasets-bf16")})
    wall, _, printed = measure(adopt, scratch, env, codes=(0, 4))
    record = json.loads((scratch / "runs" / "bf16" / "adopted.json").read_text())
    pairs = [(a, b) for q in record["questions"] if q["rescored"] for a, b in zip(q["logged"], q["rescored"])]
    largest = max(abs(a - b) for a, b in pairs)
    relative = max(abs(a - b) / abs(b) for a, b in pairs if b)
    print(f"bfloat16 run adopted in {wall:.2f} s: {printed.splitlines()[0][:160]}")
    print(f"  {len(pairs)} scores: largest |bf16 - f32| {largest:.4f} nats, largest relative {relative:.4f}; "
          f"rows by class {record['row_classes']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".test-cache" / "embedded")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bf16", action="store_true", help="also adopt one bfloat16 run and print its spread")
    args = parser.parse_args()
    lock = load_lock(LOCK)
    activate(lock.run_settings["numeric_mode"])
    cache = args.cache.resolve()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    names = {"a": "plain lm_eval run", "b": "adopt, every row rescored", "f": "floor: one independent pass"}
    results = {key: [] for key in names}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        ids = task_yaml(lock, cache, scratch / "sst2.yaml", args.rows)
        (scratch / "samples.json").write_text(json.dumps({"sst2": ids}))  # a file: 64 ids exceed a file name
        for number in range(args.repeat):
            out = scratch / f"plain{number}"
            plain, adopt = commands(scratch, cache, out, f"b{number}")
            floor = [sys.executable, str(REPO / "benchmarks" / "floor.py"), "passes", str(args.rows), str(cache)]
            round_env = {**env, "HF_DATASETS_CACHE": str(scratch / f"datasets{number}")}
            for key, command in (("a", plain), ("b", adopt), ("f", floor)):
                wall, rss, printed = measure(command, scratch, round_env, codes=(0, 4))
                results[key].append((wall, rss))
                verdict = f"  [{printed.splitlines()[0][:90]}]" if key == "b" else ""
                print(f"round {number + 1}: ({key}) {names[key]:28s} {wall:6.2f} s  peak RSS {rss / 1e9:.3f} GB"
                      f"{verdict}", flush=True)
        if args.bf16:
            bf16(scratch, cache, env)
    wall, rss = medians_and_peaks(results)
    print(f"profile embedded; the first {args.rows} dev rows in hash order, given to lm_eval sorted")
    for key in names:
        print(f"median wall ({key}) {names[key]}: {wall[key]:.2f} s; peak RSS {rss[key]:,} bytes")
    print(f"ratio b/f = {wall['b'] / wall['f']:.3f} (adopt against one independent pass; target <= 1.1)")
    print(f"ratio b/a = {wall['b'] / wall['a']:.3f} (adopt against the plain run it adopts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
