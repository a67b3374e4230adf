"""The one interface every source implements.

A source puts the files of one lock resource into a staging folder and says
where each came from. It never writes into the cache itself: prepare verifies
every staged file against the lock and only then moves it in.
"""

from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.lock import Lock, LockedFile, Resource


@dataclass(frozen=True)
class StagedFile:
    cache_path: str  # where it will live, relative to the cache folder
    role: str  # "model", "train", "validation" or "download"
    staged: Path
    source: str
    locked: LockedFile | None  # the lock entry this file must match, if any


@dataclass(frozen=True)
class FetchContext:
    lock: Lock
    staging: Path
    cache: Path
    import_dir: Path | None = None  # --from DIR: files copied from a connected machine
    weights: bool = True  # False: prepare --no-weights (the model's weight files are neither fetched nor staged)


def cache_path_for(resource: Resource, locked: LockedFile) -> tuple:
    """Cache layout: model files by name under model/, data as data/<split>.parquet."""
    if resource.kind == "model":
        return f"model/{Path(locked.path).name}", "model"
    return f"data/{locked.split}.parquet", locked.split
