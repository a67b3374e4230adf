"""The evaluated split's rows as run, identity and rescore all take them: the cache verified against the
lock first (hash before read), then the parquet read, the rows by position, and the lock's split rule."""

from dataclasses import dataclass
from pathlib import Path

from .dataset import columns_of, read_parquet
from .manifest import read_manifest, require_matching, verify_files
from .split import Split, make_split


@dataclass(frozen=True)
class SplitRows:
    manifest: object  # the cache's manifest, matched to the lock's profile
    by_idx: dict  # position -> dataset.Row
    split: Split


def matching_manifest(lock, profile, cache):
    """The cache's manifest, refused unless it was prepared for this lock's profile."""
    return require_matching(read_manifest(cache), Path(cache), lock, profile)


def verified_rows(lock, profile, spec, cache, roles, manifest=None) -> SplitRows:
    """Raises CheckFailed when a file of `roles` differs from the manifest."""
    manifest = manifest or matching_manifest(lock, profile, cache)
    verify_files(cache, manifest, roles=roles)
    rows = read_parquet(Path(cache) / manifest.file(spec.eval_split).path, columns=columns_of(profile.data))
    by_idx = {row.idx: row for row in rows}
    split = make_split(list(by_idx), lock.split.salt, lock.split.dev_rows, lock.split.confirm_rows,
                       spec.eval_split)
    return SplitRows(manifest, by_idx, split)
