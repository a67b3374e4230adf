"""The independent path's thread: it scores every question while lm-eval runs in the main thread, on its
own share of the cores."""

import threading
import time

from sst2_audit.pages.plots import warm
from sst2_audit.util.progress import say


class IndependentWorker(threading.Thread):
    """Runs the independent forward passes; errors are re-raised by finish().

    It gets its token ids already encoded by the main thread, so the one tokenizer
    object is never used from two threads at once (fast tokenizers are not re-entrant).
    """

    def __init__(self, scorer, pairs_by_idx: dict):
        super().__init__(name="independent-path", daemon=True)
        self.scorer, self.pairs_by_idx = scorer, pairs_by_idx
        self.scores: dict = {}
        self.error = None
        self.elapsed = 0.0
        self.stop = threading.Event()

    def run(self):
        start = time.perf_counter()
        total = len(self.pairs_by_idx)
        say(f"[independent path: own forward passes on {total} rows] ...")
        try:
            for number, (idx, pairs) in enumerate(self.pairs_by_idx.items(), start=1):
                if self.stop.is_set():
                    return
                self.scores[idx] = self.scorer.score(idx, pairs)
                if number == total // 2:
                    say(f"[independent] {number}/{total} rows")
        except BaseException as error:  # handed to the main thread
            self.error = error
        finally:
            self.elapsed = round(time.perf_counter() - start, 3)
        if self.error is None and not self.stop.is_set():
            say(f"[independent path: own forward passes on {total} rows] done in {self.elapsed:.1f} s")

            warm()  # the report's plotting library loads while the official path still runs

    def finish(self):
        self.join()
        if self.error is not None and not self.stop.is_set():
            raise self.error
