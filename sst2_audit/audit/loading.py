"""Read a finished run, from its folder or from an extracted bundle."""

import json
from dataclasses import dataclass
from pathlib import Path

from .. import records
from ..errors import InputError
from ..lock import Lock, load_lock

BUNDLE_LOCK = "resources.lock.json"
BUNDLE_MANIFEST = "manifest.json"


@dataclass
class RunFolder:
    path: Path
    record: records.RunRecord | None
    failure: records.FailureRecord | None
    lm_eval_results: dict | None
    lm_eval_samples: list | None
    lock: Lock
    lock_source: str  # "bundle" or the --lock path

    @property
    def name(self) -> str:
        if self.record:
            return self.record.run_name
        return self.failure.run_name if self.failure else self.path.name


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: cannot read ({error.strerror}).") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}).") from None


def _jsonl(path: Path) -> list:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not valid JSON ({error.msg}).") from None
    return rows


def load_run(path: Path, fallback_lock: Path) -> RunFolder:
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a run folder (expected the --out folder of run.py).")
    run_file, failure_file = path / records.RUN_FILE, path / records.FAILURE_FILE
    if not run_file.exists() and not failure_file.exists():
        raise InputError(f"{path}: holds neither {records.RUN_FILE} nor {records.FAILURE_FILE}; not a finished run.")
    record = records.read(run_file, records.RunRecord) if run_file.exists() else None
    failure = records.read(failure_file, records.FailureRecord) if failure_file.exists() else None
    results_file, samples_file = path / records.LM_EVAL_RESULTS_FILE, path / records.LM_EVAL_SAMPLES_FILE
    bundled_lock = path / BUNDLE_LOCK
    lock_path = bundled_lock if bundled_lock.exists() else fallback_lock
    return RunFolder(
        path, record, failure,
        _json(results_file) if results_file.exists() else None,
        _jsonl(samples_file) if samples_file.exists() else None,
        load_lock(lock_path), "bundle" if bundled_lock.exists() else str(lock_path),
    )
