"""Benchmark: adopting a plain lm-eval run of a generate_until task (every generation re-decoded) beside the run.

Setup: GSM8K-shaped word problems of our own (a demo, generated here) pinned as lm-eval's gsm8k on the embedded
model (`prepare.py --pin`, 0 shots, max_gen_toks 256 as the YAML leaves it), prepared. Each round, as whole
processes on the same cache and rows (wall clock, peak RSS from wait4), both at 1 thread (OMP_NUM_THREADS=1):
  (a) the plain run: the real `lm_eval` console command (hf, float32, batch 1, --log_samples) on the first ROWS
      dev rows, lm-eval's greedy generate_until;
  (b) `sst2-audit adopt` of (a)'s output, every generation re-decoded by the independent decoder.
Prints the medians, the ratio b/a (target <= 1.15: issue 49) and the adoption's verdict and closest call.

Usage: python benchmarks/bench_generate.py [--cache .test-cache/embedded] [--rows 16] [--repeat 1]
"""

import argparse
import json
import os
import random
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


def word_problems(count: int, seed: int, split: str) -> list:
    rng = random.Random(seed)
    return [{"question": f"(demo {split} {n}) A box holds {a} shells and {b} more are added. How many shells?",
             "answer": f"{a} + {b} = {a + b}.\n#### {a + b}"}
            for n, a, b in ((n, rng.randint(2, 40), rng.randint(2, 40)) for n in range(count))]


def setup(scratch: Path, model: Path, rows: int, env: dict) -> list:
    """The demo pinned and prepared in scratch; the task YAML for lm_eval; the first `rows` dev ids, sorted."""
    import yaml

    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    data = scratch / "data"
    data.mkdir()
    for split, count, seed in (("train", 20, 1), ("test", 400, 2)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in word_problems(count, seed, split)))
    lock = scratch / "gsm.lock.json"
    for command in (["prepare.py", "--lock", str(LOCK), "--pin", "gsm", "--task", "gsm8k", "--model", str(model),
                     "--data", str(data), "--new-lock", str(lock), "--num-fewshot", "0"],
                    ["prepare.py", "--lock", str(lock), "--profile", "gsm", "--cache", str(scratch / "cache")]):
        measure([sys.executable, str(REPO / command[0]), *command[1:]], scratch, {**env, "SST2_AUDIT_GSM_MODEL":
                                                                                   str(model)})
    reviewer = load_lock(lock)
    spec = spec_for(reviewer, "gsm8k")
    files = {split: str(scratch / "cache" / "data" / f"{split}.parquet") for split in spec.splits}
    (scratch / "gsm8k.yaml").write_text(yaml.safe_dump(data_config(spec, files, callables=False), sort_keys=False))
    split = verified_rows(reviewer, reviewer.profile("gsm"), spec, scratch / "cache", roles=()).split
    return sorted(split.dev_ids[:rows])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".test-cache" / "embedded")
    parser.add_argument("--rows", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    activate(load_lock(LOCK).run_settings["numeric_mode"])
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    names = {"a": "plain lm_eval run (generate_until)", "b": "adopt, every generation re-decoded"}
    results = {key: [] for key in names}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        ids = setup(scratch, args.cache.resolve() / "model", args.rows, env)
        (scratch / "samples.json").write_text(json.dumps({"gsm8k": ids}))
        for number in range(args.repeat):
            out = scratch / f"plain{number}"
            plain = [str(BIN / "lm_eval"), "--model", "hf", "--model_args",
                     f"pretrained={scratch / 'cache' / 'model'},dtype=float32,max_length=512,attn_implementation=eager",
                     "--tasks", str(scratch / "gsm8k.yaml"), "--samples", str(scratch / "samples.json"),
                     "--log_samples", "--output_path", str(out), "--device", "cpu", "--batch_size", "1", "--seed",
                     "94", "--num_fewshot", "0"]
            adopt = [str(BIN / "sst2-audit"), "adopt", str(out), "--profile", "gsm", "--lock",
                     str(scratch / "gsm.lock.json"), "--cache", str(scratch / "cache"), "--run-name", f"b{number}",
                     "--seed", "1"]
            round_env = {**env, "HF_DATASETS_CACHE": str(scratch / f"datasets{number}")}
            for key, command in (("a", plain), ("b", adopt)):
                wall, rss, printed = measure(command, scratch, round_env, codes=(0, 4))
                results[key].append((wall, rss))
                print(f"round {number + 1}: ({key}) {names[key]:36s} {wall:7.2f} s  peak RSS {rss / 1e9:.3f} GB",
                      flush=True)
                if key == "b":
                    print("\n".join(f"  {line}" for line in printed.splitlines()
                                    if line.startswith(("VERDICT", "  rows:", "  closest"))), flush=True)
        record = json.loads((scratch / "runs" / "b0" / "adopted.json").read_text())
        tokens = sum(row["generated_tokens"] or 0 for row in record["rows"])
    wall, rss = medians_and_peaks(results)
    print(f"gsm8k-shaped demo on the embedded model, 0 shots; the first {args.rows} dev rows; {tokens} tokens "
          "generated in all")
    for key in names:
        print(f"median wall ({key}) {names[key]}: {wall[key]:.2f} s; peak RSS {rss[key]:,} bytes")
    print(f"ratio b/a = {wall['b'] / wall['a']:.3f} (adopt against the plain run it adopts; target <= 1.15)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
