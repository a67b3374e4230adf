"""Work started early in a background thread (an import, a library's set-up), waited for where it is needed.

An import reads files and runs C extension code while the main thread hashes files and parses
records; the step that needs the module waits for its thread first (a module that replaces itself in
sys.modules, as transformers' lazy module does, or one being imported by another thread at the same
time, must not be imported twice at once).
"""

import importlib
import threading

_THREADS: dict = {}


def start(key: str, work=None) -> None:
    """Run `work()` (default: import the module named `key`) in a thread, once per process."""
    if key not in _THREADS:
        _THREADS[key] = threading.Thread(target=_quietly, args=(work or (lambda: importlib.import_module(key)),),
                                         name=f"warm {key}", daemon=True)
        _THREADS[key].start()


def _quietly(work) -> None:
    try:
        work()
    except BaseException:  # noqa: BLE001 - the step that needs it does the work again and reports the error
        pass


def wait(key: str) -> None:
    thread = _THREADS.get(key)
    if thread is not None and thread is not threading.current_thread():
        thread.join()
