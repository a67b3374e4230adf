"""Imports started early in a background thread, waited for where they are needed.

An import reads files and runs C extension code while the main thread hashes files and parses
records; the step that needs the module waits for its thread first (a module that replaces itself in
sys.modules, as transformers' lazy module does, must not be imported twice at once).
"""

import importlib
import threading

_THREADS = {}


def start(module: str) -> None:
    if module not in _THREADS:
        _THREADS[module] = threading.Thread(target=_import, args=(module,), name=f"import {module}", daemon=True)
        _THREADS[module].start()


def _import(module: str) -> None:
    try:
        importlib.import_module(module)
    except BaseException:  # noqa: BLE001 - the step that needs it imports it again and reports the error
        pass


def wait(module: str) -> None:
    thread = _THREADS.get(module)
    if thread is not None:
        thread.join()
