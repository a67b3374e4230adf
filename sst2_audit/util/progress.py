"""Console progress on stderr (or the terminal saved by console.captured), so stdout stays for summaries.

Lines are written whole, under a lock: the two scoring paths report from two threads and their
lines never interleave. --quiet silences them.
"""

import sys
import threading
import time
from contextlib import contextmanager

# at import: no import machinery (and its locks) on the path a Ctrl-C interrupts
from sst2_audit.util.sanitize import printable

_LOCK = threading.Lock()
_STREAM = None  # None: sys.stderr at the time of writing
_QUIET = False


def set_stream(stream):
    """Where progress goes from now on; returns the previous stream."""
    global _STREAM
    previous, _STREAM = _STREAM, stream
    return previous


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = quiet


def say(message: str) -> None:
    if _QUIET:
        return
    with _LOCK:
        stream = _STREAM or sys.stderr
        stream.write(printable(message) + "\n")  # one line, whatever a field in it holds
        stream.flush()


def say_wrapped(tag: str, message: str, width: int = 128) -> None:
    """A long progress message as whole lines of at most `width` characters, wrapped between words (one say)."""
    lines, line = [], f"[{tag}]"
    for word in message.split(" "):
        if len(line) + 1 + len(word) > width and line.strip() != f"[{tag}]":
            lines.append(line)
            line = " " * (len(tag) + 2)
        line += " " + word
    for whole in lines + [line]:
        say(whole)


@contextmanager
def phase(name: str, timings: dict | None = None, key: str | None = None, announce: bool = False):
    """Time a step and report it when done; a long step (announce=True) is also announced at its start."""
    if announce:
        say(f"[{name}] ...")
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    if timings is not None:
        timings[key or name] = round(elapsed, 3)
    say(f"[{name}] done in {elapsed:.1f} s")


class Ticker:
    """A row counter for a long loop: `[name] k/n rows` at most every `every` seconds (a loop done sooner says
    nothing more than its phase's lines)."""

    def __init__(self, name: str, total: int, every: float = 10.0):
        self.name, self.total, self.every = name, total, every
        self.last = time.perf_counter()

    def tick(self, done: int) -> None:
        now = time.perf_counter()
        if now - self.last >= self.every and done < self.total:
            self.last = now
            say(f"[{self.name}] {done}/{self.total} rows")
