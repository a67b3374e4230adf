"""Benchmark: time to a verdict, each command beside its floor, measured side by side in one run.

  smoke run        run.py --smoke (2 rows)             vs  floor: imports (lm_eval too) + model load + 2 rows' passes, twice
  structural audit audit.py --structural (reference)   vs  floor: transformers' tokenizer + hashing the cache
  default audit    audit.py (reference, all 64 rows)   vs  floor: imports + model load + one pass over the 64 rows
  rescore threads  the 64-row pass at the machine's threads (the rescore's) vs the same at 1 thread (before issue 27)
Each command runs as a whole process, alternating with its floor, `--repeat` times; the medians and
their ratios are printed. Targets (issue 20): structural audit <= 5 s, smoke run <= 2x its floor,
default audit (= --rescore all) <= 1.2x one independent pass over the same rows.

Usage: python benchmarks/bench_verdict.py [--cache .test-cache/embedded] [--repeat 3]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / "results" / "embedded-full-reference.tar.gz"


def wall(command: list, codes=(0,)) -> float:
    env = dict(os.environ)
    if command[0] == "FLOOR_THREADS=1":  # the floor at one thread
        command, env["FLOOR_THREADS"] = command[1:], "1"
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode not in codes:
        sys.exit(f"benchmark command failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".test-cache" / "embedded")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    py, cache = sys.executable, str(args.cache)
    floor = [py, str(REPO / "benchmarks" / "floor.py")]
    with tempfile.TemporaryDirectory() as scratch:
        def smoke(n):
            return [py, str(REPO / "run.py"), "--cache", cache, "--smoke", "--quiet", "--run-name", f"s{n}",
                    "--out", f"{scratch}/o{n}", "--private", f"{scratch}/p{n}"]

        pairs = {
            "smoke run": (smoke, lambda n: floor + ["smoke", cache], (0,)),
            "structural audit": (lambda n: [py, str(REPO / "audit.py"), "--bundle-file", str(BUNDLE), "--cache", cache,
                                            "--structural"], lambda n: floor + ["structural", cache], (4,)),
            "default audit": (lambda n: [py, str(REPO / "audit.py"), "--bundle-file", str(BUNDLE), "--cache", cache],
                              lambda n: floor + ["passes", "64", cache], (0,)),
            "rescore threads": (lambda n: floor + ["passes", "64", cache],
                                lambda n: ["FLOOR_THREADS=1"] + floor + ["passes", "64", cache], (0,)),
        }
        times = {name: ([], []) for name in pairs}
        for round_number in range(args.repeat):
            for name, (command, floor_command, codes) in pairs.items():
                measured = wall(command(round_number), codes)
                floored = wall(floor_command(round_number))
                times[name][0].append(measured)
                times[name][1].append(floored)
                print(f"round {round_number + 1}: {name:17s} {measured:6.2f} s   floor {floored:6.2f} s", flush=True)
    targets = {"smoke run": "<= 2x", "structural audit": "<= 5 s", "default audit": "<= 1.2x",
               "rescore threads": "< 1: the machine's threads against 1 thread"}
    for name, (measured, floored) in times.items():
        m, f = statistics.median(measured), statistics.median(floored)
        print(f"{name:17s} median {m:6.2f} s, floor {f:6.2f} s, ratio {m / f:.2f} (target {targets[name]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
