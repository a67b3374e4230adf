"""Build or re-verify the cache for one profile of the lock."""

import json
import os
import shutil
import tempfile
from pathlib import Path

from sst2_audit.formats.fields import columns_of
from sst2_audit.formats.lock import load_lock, Lock, Profile
from sst2_audit.formats.manifest import (
    is_weight_file,
    Manifest,
    ManifestFile,
    NOT_FETCHED,
    read_manifest,
    require_folder,
    require_matching,
    verify_files,
    write_manifest,
)
from sst2_audit.resources.sources import fetch, FetchContext
from sst2_audit.resources.sources.interface import cache_path_for
from sst2_audit.resources.store import share
from sst2_audit.task.dataset import read_parquet
from sst2_audit.util import atomic
from sst2_audit.util.errors import CheckFailed, InputError, mismatch
from sst2_audit.util.hashing import sha256_file
from sst2_audit.util.progress import phase, say

STAGING_PREFIX = ".staging-"


def _check_staged(staged, profile, needed: dict) -> ManifestFile:
    """Hash, and for a data split its columns, rows, and at least the rows the split rule needs."""
    actual = sha256_file(staged.staged)
    pinned = staged.locked.sha256 if staged.locked else None
    if pinned and actual != pinned:
        raise CheckFailed(mismatch(f"{staged.cache_path} ({staged.source}): sha256", pinned, actual,
                                   "Nothing was written to the cache."))
    if staged.role in {f.split for f in profile.data.files}:
        try:
            rows = read_parquet(staged.staged, columns_of(profile.data), staged.locked.rows if staged.locked else None)
        except InputError as error:
            raise CheckFailed(f"{staged.cache_path}: {error}") from None
        if len(rows) < needed.get(staged.role, 0):
            raise InputError(f"{staged.source}: split {staged.role!r} has {len(rows)} rows; the task scores it and "
                             f"the lock's split rule needs at least {needed[staged.role]} (dev_rows + confirm_rows). "
                             "Nothing was written to the cache.")
    return ManifestFile(staged.cache_path, staged.role, staged.staged.stat().st_size, actual, staged.source, pinned)


def _refuse_foreign_content(cache: Path) -> None:
    require_folder(cache)
    leftovers = [p.name for p in cache.iterdir() if not p.name.startswith(STAGING_PREFIX)] if cache.exists() else []
    if leftovers:
        raise InputError(
            f"{cache}: the folder holds {', '.join(sorted(leftovers)[:5])} but no manifest.json, so it is "
            "not a cache prepare made. Choose an empty or new --cache folder."
        )


def _not_fetched(resource) -> list:
    """prepare --no-weights: the model's weight files as the manifest records them, pinned, never fetched (a weight
    file the lock does not pin by sha256 cannot be left out: nothing would ever check it)."""
    found = []
    for locked in resource.files if resource.kind == "model" else ():
        if not is_weight_file(locked.path):
            continue
        if not locked.sha256:
            raise InputError(f"--no-weights: the lock pins no sha256 for {locked.path}; prepare the profile with its "
                             "weights once (prepare fills the lock's missing pins), then without.")
        cache_path, role = cache_path_for(resource, locked)
        found.append(ManifestFile(cache_path, role, 0, locked.sha256, NOT_FETCHED, locked.sha256))
    return found


def build(lock: Lock, profile: Profile, cache: Path, import_dir: Path | None = None,
          eval_split: str | None = None, weights: bool = True) -> Manifest:
    cache = Path(cache)
    _refuse_foreign_content(cache)
    cache.mkdir(parents=True, exist_ok=True)
    for leftover in cache.glob(f"{STAGING_PREFIX}*"):  # an interrupted prepare's partial downloads
        shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=cache))
    moved = []
    try:
        context = FetchContext(lock, staging, cache, import_dir, weights)
        needed = {eval_split: lock.split.dev_rows + lock.split.confirm_rows} if eval_split else {}
        staged, entries, left_out = [], [], []
        for resource in profile.resources:  # data first: its checks fail before the model is fetched or converted
            left_out += [] if weights else _not_fetched(resource)
            skipped = {entry.path for entry in left_out}
            fetched = [f for f in fetch(resource, context) if f.cache_path not in skipped]
            with phase(f"verify staged {resource.kind} files"):
                entries += [_check_staged(f, profile, needed) for f in fetched]
            staged += fetched
        for entry, f in zip(entries, staged):  # profiles that share a model keep one copy of each file
            if entry.role == "model":
                share(f.staged, entry.sha256)
        # Everything matched: only now does anything enter the cache.
        for f in staged:
            target = cache / f.cache_path
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(f.staged, target)
            moved.append(target)
        manifest = Manifest(profile.name, profile.demo, profile.pins_sha256, profile.fully_hashed,
                            tuple(entries + left_out))
        write_manifest(cache, manifest)
        return manifest
    except BaseException:
        if not (cache / "manifest.json").exists():  # never leave a cache that looks half-prepared
            for target in moved:
                target.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def prepare(lock: Lock, profile: Profile, cache: Path, import_dir: Path | None = None,
            eval_split: str | None = None, weights: bool = True) -> tuple:
    """Returns (manifest, "built" or "verified"); eval_split: the split the task scores (its size is checked).
    weights=False (--no-weights): the model's weight files are pinned in the manifest but never fetched."""
    existing = read_manifest(cache)
    if existing is None:
        return build(lock, profile, cache, import_dir, eval_split, weights), "built"
    require_matching(existing, cache, lock, profile)
    if weights and existing.weightless:
        raise InputError(f"{cache}: prepared for profile {profile.name} with --no-weights; a cache is never filled in "
                         "afterwards: prepare the profile with its weights into another --cache folder.")
    with phase("re-verify cache (offline)"):
        verify_files(cache, existing, weights=not existing.weightless)
    return existing, "verified"


def verify(lock: Lock, profile: Profile, cache: Path) -> Manifest:
    manifest = require_matching(read_manifest(cache), Path(cache), lock, profile)
    with phase("re-hash every cached file"):
        verify_files(cache, manifest, weights=not manifest.weightless)
    return manifest


def update_lock(lock: Lock, profile: Profile, cache: Path, manifest: Manifest) -> int:
    """Fill the lock's unknown sha256s from a verified cache; a known pin is never changed."""

    raw = json.loads(json.dumps(lock.raw))
    by_cache_path = {f.path: f for f in manifest.files}
    filled = set()
    for resource in profile.resources:
        raw_files = raw["profiles"][profile.name][resource.kind]["files"]
        for locked, raw_file in zip(resource.files, raw_files):
            cache_path = cache_path_for(resource, locked)[0]
            if raw_file["sha256"] is None:
                raw_file["sha256"] = by_cache_path[cache_path].sha256
                filled.add(cache_path)
    if filled:
        atomic.write_json(lock.path, raw, overwrite=True)
        new_lock = load_lock(lock.path)
        files = tuple(
            ManifestFile(f.path, f.role, f.size, f.sha256, f.source, f.sha256 if f.path in filled else f.locked_sha256)
            for f in manifest.files
        )
        new_profile = new_lock.profile(profile.name)
        write_manifest(cache, Manifest(manifest.profile, manifest.demo, new_profile.pins_sha256,
                                       new_profile.fully_hashed, files), overwrite=True)
        say(f"[prepare] filled {len(filled)} sha256 value(s) in {lock.path}")
    return len(filled)
