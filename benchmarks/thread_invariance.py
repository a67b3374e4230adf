"""Measurement: are a profile's scores invariant to torch's thread count in the lock's numeric mode?

Runs run.py on the same cache and rows under copies of the lock that differ only in
run_settings.threads (each path's torch intra-op threads), and compares every candidate
score of both paths bit for bit with the first thread count's run. Prints one line per
thread count, then whether the scores were invariant. A measurement, not a test: its output
is quoted in README "Numeric platform" with the machine and date.

Usage: python benchmarks/thread_invariance.py --cache CACHE --profile P [--lock LOCK] [--rows N] [--threads 1 2]
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def scores_of(run_json: Path) -> dict:
    record = json.loads(run_json.read_text())
    return {q["idx"]: (q["scores"]["official"], q["scores"]["independent"]) for q in record["questions"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--profile", required=True)
    parser.add_argument("--lock", type=Path, default=REPO / "resources.lock.json")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    raw = json.loads(args.lock.read_text())
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for threads in args.threads:
            lock = Path(scratch) / f"threads-{threads}.lock.json"
            raw["run_settings"]["threads"] = threads
            lock.write_text(json.dumps(raw))
            out = Path(scratch) / f"run-{threads}"
            command = [sys.executable, str(REPO / "run.py"), "--lock", str(lock), "--cache", str(args.cache),
                       "--profile", args.profile, "--out", str(out), "--private", str(Path(scratch) / f"private-{threads}"),
                       "--run-name", f"threads-{threads}", "--quiet", *(["--rows", str(args.rows)] if args.rows else [])]
            start = time.perf_counter()
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"run.py failed at {threads} thread(s):\n{done.stderr[-2000:]}")
            results[threads] = scores_of(out / "run.json")
            platform = json.loads((out / "run.json").read_text())["platform"]
            print(f"{threads} thread(s): {len(results[threads])} rows, {time.perf_counter() - start:.1f} s, "
                  f"probe {platform['probe_sha256'][:12]}")
    base_threads, base = args.threads[0], results[args.threads[0]]
    invariant = True
    for threads in args.threads[1:]:
        differing = [idx for idx in base if results[threads][idx] != base[idx]]
        invariant &= not differing
        print(f"{threads} vs {base_threads} thread(s): {len(differing)} of {len(base)} rows differ"
              + (f" (first: row idx {differing[0]})" if differing else ""))
    print(f"{args.profile}: scores {'invariant' if invariant else 'NOT invariant'} to the thread count")
    return 0 if invariant else 1


if __name__ == "__main__":
    raise SystemExit(main())
