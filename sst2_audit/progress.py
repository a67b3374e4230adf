"""Console progress on stderr, so stdout stays for summaries."""

import sys
import time
from contextlib import contextmanager


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def phase(name: str, timings: dict | None = None, key: str | None = None):
    """Announce a long step and report (and optionally record) its wall time."""
    say(f"[{name}] ...")
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    if timings is not None:
        timings[key or name] = round(elapsed, 3)
    say(f"[{name}] done in {elapsed:.1f} s")
