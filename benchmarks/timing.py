"""What the benchmarks share: a whole process timed (wall clock) with its peak RSS from the kernel (wait4), and
the medians and peaks of repeated rounds."""

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def measure(command: list, cwd: Path, env: dict | None = None, codes=(0,)) -> tuple:
    """(wall seconds, peak RSS bytes, stdout) of one process; another exit code stops the benchmark, named."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall, out = time.perf_counter() - start, process.stdout.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code not in codes:
        sys.exit(f"benchmark command failed ({code}): {' '.join(map(str, command))}\n{out[-1500:]}"
                 f"{process.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss * 1024, out


def medians_and_peaks(results: dict) -> tuple:
    """({key: median wall}, {key: largest peak RSS}) of {key: [(wall, rss), ...]}, keys with rounds only."""
    results = {key: runs for key, runs in results.items() if runs}
    return ({key: statistics.median(w for w, *_ in runs) for key, runs in results.items()},
            {key: max(r for _, r, *_ in runs) for key, runs in results.items()})
