"""Benchmark: (b) the full run.py against (a) lm-eval simple_evaluate alone, side by side.

Each is timed as a whole process (wall clock) with its peak RSS from the kernel (wait4),
alternating on the same cache and rows; prints the ratio b/a of the medians.
(a) uses the lock's settings (1 torch thread, as each of run.py's two concurrent paths);
(a2) is lm-eval alone with 2 threads, all cores of this machine, shown for a fair picture.
(bn) is the full run.py in the CPU's native numeric mode (a copy of the lock with
numeric_mode {}): b/bn is what the pinned numeric mode costs.
Targets (issue 3): ratio <= 1.25, peak RSS of b <= 1.5 GB.

Any task: the profile decides (e.g. --profile embedded-rte --cache .test-cache/embedded-rte);
--core-only measures only (a) and (b), the target's ratio.

A profile of another lock (the demo tasks: --lock demos.lock.json --profile embedded-winogrande-5shot) is
measured with --lock; --skip-native leaves out (bn).

--rows N times every variant on the first N dev rows in hash order (run.py --rows), for a task too long to time
in full (the 25-shot ARC demo).

--audit also times (c) the default audit (every row rescored) of each round's (b) run folder, and prints where
(b)'s time went, from its run.json timings (imports, verification, model load, the official path, the
independent path beside it, the checks): c/a is the audit against lm-eval alone.

Usage: python benchmarks/bench_run.py [--cache .test-cache/embedded] [--profile embedded] [--repeat 3] [--core-only]
                                      [--lock LOCK] [--skip-native] [--rows N] [--audit]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from timing import medians_and_peaks  # noqa: E402


def measure(command: list) -> tuple:
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"benchmark command failed: {' '.join(command)}\n{process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / "cache")
    parser.add_argument("--profile", default="embedded")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--core-only", action="store_true", help="only (a) and (b): the target's ratio")
    parser.add_argument("--lock", type=Path, default=REPO / "resources.lock.json")
    parser.add_argument("--skip-native", action="store_true", help="leave out (bn), the native numeric mode")
    parser.add_argument("--rows", type=int, help="the first ROWS dev rows in hash order for every variant (run.py "
                        "--rows), for a task too long to time in full")
    parser.add_argument("--audit", action="store_true", help="also time (c) the default audit of each (b) run")
    args = parser.parse_args()
    lock = str(args.lock.resolve())
    alone = [sys.executable, str(REPO / "benchmarks" / "lm_eval_alone.py"), str(args.cache), args.profile]
    rows, last = ([], []) if args.rows is None else (["--rows", str(args.rows)], [str(args.rows)])  # run.py's, alone's
    results = {"a": [], "a2": [], "b": [], "bn": [], "c": []}
    names = {"a": "lm-eval alone, lock settings", "a2": "lm-eval alone, 2 threads", "b": "full run.py",
             "bn": "full run.py, native mode", "c": "default audit of (b)"}
    with tempfile.TemporaryDirectory() as scratch:
        native_lock = Path(scratch) / "native.lock.json"  # same pins, the CPU's own numeric mode
        raw = json.loads(Path(lock).read_text())
        raw["run_settings"]["numeric_mode"] = {}
        native_lock.write_text(json.dumps(raw, indent=2))
        for round_number in range(args.repeat):
            def full(tag, *extra):
                return [sys.executable, str(REPO / "run.py"), "--profile", args.profile, "--cache", str(args.cache),
                        "--out", f"{scratch}/out{tag}{round_number}", "--private", f"{scratch}/private{tag}{round_number}",
                        *rows, *extra]
            variants = (("a", alone + ["-", lock, *last]), ("a2", alone + ["2", lock, *last]),
                        ("b", full("b", "--lock", lock)), ("bn", full("n", "--lock", str(native_lock))))
            wanted = ("a", "b") if args.core_only else ("a", "a2", "b") if args.skip_native else ("a", "a2", "b", "bn")
            audit = [sys.executable, str(REPO / "audit.py"), "--lock", lock, "--out", f"{scratch}/outb{round_number}",
                     "--cache", str(args.cache)]
            for key, command in (*(v for v in variants if v[0] in wanted), *((("c", audit),) if args.audit else ())):
                wall, rss = measure(command)
                results[key].append((wall, rss))
                print(f"round {round_number + 1}: ({key}) {names[key]:30s} {wall:6.2f} s  peak RSS {rss / 1e9:.3f} GB",
                      flush=True)
            if args.audit:
                split(Path(f"{scratch}/outb{round_number}") / "run.json")
    results = {key: runs for key, runs in results.items() if runs}
    wall, rss = medians_and_peaks(results)
    print(f"profile {args.profile}; rows: {'every dev row' if args.rows is None else f'the first {args.rows} dev rows'}")
    for key in results:
        print(f"median wall ({key}) {names[key]}: {wall[key]:.2f} s; peak RSS {rss[key]:,} bytes")
    print(f"ratio b/a  = {wall['b'] / wall['a']:.3f} (target <= 1.25)")
    if "a2" in wall:
        print(f"ratio b/a2 = {wall['b'] / wall['a2']:.3f} (against lm-eval on all cores)")
    if "bn" in wall:
        print(f"ratio b/bn = {wall['b'] / wall['bn']:.3f} (pinned numeric mode against the CPU's native mode)")
    if "c" in wall:
        print(f"ratio c/a  = {wall['c'] / wall['a']:.3f} (the default audit against lm-eval alone)")
    print(f"peak RSS of b: {rss['b'] / 1e9:.3f} GB (target <= 1.5 GB)")
    return 0


def split(run_json: Path) -> None:
    """Where (b)'s time went: the steps run.json times. The independent path runs beside the official one, so
    the steps do not add up to the total; 'other' is what no step names (pages, records, the self-audit)."""
    timings = json.loads(run_json.read_text())["timings"]
    named = ("imports", "verify", "model_load", "official", "checks")
    other = timings["total"] - sum(timings.get(key, 0.0) for key in named)
    print("  (b) split: " + ", ".join(f"{key} {timings.get(key, 0.0):.2f} s" for key in named) +
          f", other {other:.2f} s; beside the official path: independent {timings.get('independent', 0.0):.2f} s; "
          f"total {timings['total']:.2f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
