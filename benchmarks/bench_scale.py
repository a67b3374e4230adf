"""Benchmark: how run, audit and adopt grow with rows, beside lm-eval alone on the same rows.

A sentiment set in SST-2's schema is written here (original demo sentences, SIZE + 200 rows), pinned with
`prepare --pin --dev-rows all` on the embedded model (the cache's converted SmolLM2 weights), and for each size N,
on the profile's first N dev rows in hash order (never a sealed one):
  (a) the real `lm_eval` console run of the task on those rows, float32, batch 1, --log_samples: lm-eval alone;
  (b) `sst2-audit adopt` of that output, every row rescored by the independent path;
  (c) `sst2-audit run --rows N`: both paths, every check;
  (d) `sst2-audit audit` of (c)'s folder, the default audit (every row rescored).
Each is a whole process (wall clock, peak RSS from wait4). Prints a line per size, each over (a), and the
least-squares slope (seconds per row) and intercept of each against N: linear growth is a slope that explains the
sizes.

Usage: python benchmarks/bench_scale.py [--cache .test-cache/embedded] [--sizes 64,256,1024]
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
from timing import measure  # noqa: E402

BIN = Path(sys.executable).parent
WORDS = ["bright", "dull", "warm", "cold", "kind", "harsh", "calm", "noisy", "clear", "murky"]


def demo_rows(count: int) -> list:
    """Sentences written here for the benchmark (a demo, no third-party text)."""
    return [{"sentence": f"demo line {n} : the {WORDS[n % 10]} morning felt {WORDS[(n * 7) % 10]} to me .",
             "label": (n * 3) % 2, "idx": n} for n in range(count)]


def fit(points: list) -> tuple:
    """Least-squares slope and intercept of (x, y) points."""
    n, sx, sy = len(points), sum(x for x, _ in points), sum(y for _, y in points)
    sxx, sxy = sum(x * x for x, _ in points), sum(x * y for x, y in points)
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return slope, (sy - slope * sx) / n


def prepared(scratch: Path, cache: Path, largest: int, env: dict) -> tuple:
    """(lock, cache, the profile's dev ids in hash order): the demo set pinned and prepared, the task YAML written."""
    import yaml

    from sst2_audit.task.config import data_config
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    data = scratch / "data"
    data.mkdir()
    for split, rows in (("train", demo_rows(8)), ("validation", demo_rows(largest + 200))):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    lock_path, pinned = scratch / "scale.lock.json", scratch / "cache"
    for command in ([str(BIN / "sst2-audit"), "prepare", "--pin", "scale", "--task", "sst2", "--model",
                     str(cache / "model"), "--data", str(data), "--new-lock", str(lock_path), "--dev-rows", "all"],
                    [str(BIN / "sst2-audit"), "prepare", "--lock", str(lock_path), "--profile", "scale", "--cache",
                     str(pinned)]):
        measure(command, scratch, env)
    lock = load_lock(lock_path)
    spec = spec_for(lock, "sst2")
    rows = verified_rows(lock, lock.profile("scale"), spec, pinned, roles=())
    files = {name: str(pinned / "data" / f"{name}.parquet") for name in spec.splits}
    (scratch / "sst2.yaml").write_text(yaml.safe_dump(data_config(spec, files, callables=False), sort_keys=False))
    return lock_path, pinned, list(rows.split.dev_ids)


NAMES = ("(a) lm-eval alone", "(b) adopt", "(c) run", "(d) audit")


def _one_size(scratch: Path, lock: Path, cache: Path, ids: list, size: int, env: dict) -> tuple:
    """(a), (b), (c), (d) on the first `size` dev rows, each (wall, peak RSS, stdout); one line printed."""
    (scratch / f"ids{size}.json").write_text(json.dumps({"sst2": ids}))
    out = scratch / f"plain{size}"
    plain = [str(BIN / "lm_eval"), "--model", "hf", "--model_args",
             f"pretrained={cache / 'model'},dtype=float32,max_length=512,attn_implementation=eager",
             "--tasks", str(scratch / "sst2.yaml"), "--samples", str(scratch / f"ids{size}.json"),
             "--log_samples", "--output_path", str(out), "--device", "cpu", "--batch_size", "1"]
    common = ["--lock", str(lock), "--cache", str(cache)]
    adopt = [str(BIN / "sst2-audit"), "adopt", str(out), "--profile", "scale", *common, "--run-name", f"s{size}"]
    run = [str(BIN / "sst2-audit"), "run", "--profile", "scale", "--rows", str(size), *common, "--quiet",
           "--out", str(scratch / f"run{size}"), "--private", str(scratch / f"private{size}")]
    audit = [str(BIN / "sst2-audit"), "audit", "--out", str(scratch / f"run{size}"), *common]
    measured = (measure(plain, scratch, {**env, "HF_DATASETS_CACHE": str(scratch / f"hf{size}")}),
                measure(adopt, scratch, env), measure(run, scratch, env), measure(audit, scratch, env))
    (a, *_), rest = measured[0], measured[1:]
    print(f"{size:6d} rows: (a) {a:7.2f} s {measured[0][1] / 1e9:.3f} GB" + "".join(
        f"   {name[:3]} {m[0]:7.2f} s {m[1] / 1e9:.3f} GB ({m[0] / a:.3f} of a)" for name, m in zip(NAMES[1:], rest))
        + f"   [{measured[3][2].splitlines()[-1][:60]}]", flush=True)
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".test-cache" / "embedded")
    parser.add_argument("--sizes", default="64,256,1024")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    activate(load_lock(REPO / "resources.lock.json").run_settings["numeric_mode"])  # inherited by the children
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "SST2_AUDIT_SCALE_MODEL": str(args.cache.resolve() / "model")}
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        lock, cache, dev_ids = prepared(scratch, args.cache.resolve(), max(sizes), env)
        for size in sizes:
            results[size] = _one_size(scratch, lock, cache, sorted(dev_ids[:size]), size, env)
    for key, name in enumerate(NAMES):
        slope, intercept = fit([(size, results[size][key][0]) for size in sizes])
        worst = max(abs(results[size][key][0] - (slope * size + intercept)) / results[size][key][0] for size in sizes)
        print(f"{name}: {slope * 1000:.1f} ms per row + {intercept:.2f} s (largest relative residual {worst:.1%}); "
              f"peak RSS {min(results[s][key][1] for s in sizes) / 1e9:.3f} to "
              f"{max(results[s][key][1] for s in sizes) / 1e9:.3f} GB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
