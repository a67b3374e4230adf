"""cache/manifest.json: what prepare verified and placed in the cache.

Written last, after every file is in place, so its presence means the cache is
complete. run and audit re-hash against it before loading anything.
"""

from dataclasses import asdict, dataclass
from pathlib import Path

from sst2_audit.util import atomic
from sst2_audit.formats import strict_json
from sst2_audit.util.commands import command_line, lock_words
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file
from sst2_audit.formats.lock import Lock, Profile
from sst2_audit.formats.schema import convert

MANIFEST_SCHEMA = "sst2-audit/manifest"
MANIFEST_SCHEMA_VERSION = 1
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class ManifestFile:
    path: str  # relative to the cache folder
    role: str  # "model", "train", "validation" or "download"
    size: int
    sha256: str
    source: str  # where the bytes came from, in words
    locked_sha256: str | None  # the lock's pin, None where the lock has none


@dataclass(frozen=True)
class Manifest:
    profile: str
    demo: bool
    pins_sha256: str  # the profile's section of the lock this cache was prepared for
    lock_fully_hashed: bool
    files: tuple[ManifestFile, ...]
    schema: str = MANIFEST_SCHEMA
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def to_dict(self) -> dict:
        out = asdict(self)
        out["files"] = [asdict(f) for f in self.files]
        return out

    @classmethod
    def from_dict(cls, raw: dict, where: str) -> "Manifest":
        if not isinstance(raw, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
        if raw.get("schema") != MANIFEST_SCHEMA or raw.get("schema_version") != MANIFEST_SCHEMA_VERSION:
            raise InputError(
                f"{where}: expected schema {MANIFEST_SCHEMA!r} version {MANIFEST_SCHEMA_VERSION}, "
                f"got {raw.get('schema')!r} version {raw.get('schema_version')!r}."
            )
        return convert(cls, raw, where)  # exact fields and types (schema.py)

    def file(self, role: str) -> ManifestFile:
        return next(f for f in self.files if f.role == role)

    def model_files(self):
        return [f for f in self.files if f.role == "model"]

    @property
    def weightless(self) -> bool:
        """Prepared with --no-weights: the model's weight files are pinned here but were never fetched."""
        return any(entry.source == NOT_FETCHED for entry in self.files)


def require_folder(cache: Path) -> None:
    if Path(cache).exists() and not Path(cache).is_dir():
        raise InputError(f"--cache {cache}: expected a cache folder (or a new path), got an existing "
                         "file that is not a folder.")


def read_manifest(cache: Path) -> Manifest | None:
    require_folder(cache)
    path = Path(cache) / MANIFEST_NAME
    if not path.exists():
        return None
    return Manifest.from_dict(strict_json.read(path), str(path))


def write_manifest(cache: Path, manifest: Manifest, *, overwrite: bool = False) -> None:
    atomic.write_json(Path(cache) / MANIFEST_NAME, manifest.to_dict(), overwrite=overwrite)


def require_matching(manifest: Manifest | None, cache: Path, lock: Lock, profile: Profile) -> Manifest:
    """The cache must have been prepared for exactly this profile and lock."""
    if manifest is None:
        words = [*lock_words(lock.given or lock.path), "--profile", profile.name, "--cache", cache]
        raise InputError(f"{cache}: no {MANIFEST_NAME}; the cache is not prepared. Run: "
                         f"{command_line('prepare', *words)}")
    if manifest.profile != profile.name or manifest.pins_sha256 != profile.pins_sha256:
        fits = lock.profiles.get(manifest.profile)
        advice = (f"`--profile {manifest.profile}` (or no --profile) would use this cache as it is"
                  if fits is not None and fits.pins_sha256 == manifest.pins_sha256
                  else f"no profile of {lock.path.name} matches it")
        raise InputError(
            f"{cache}/{MANIFEST_NAME}: this cache was prepared for profile {manifest.profile!r} "
            f"with pins sha256 {manifest.pins_sha256[:12]}…, expected profile {profile.name!r} "
            f"as pinned by {lock.path} (pins sha256 {profile.pins_sha256[:12]}…). {advice[0].upper() + advice[1:]}; "
            f"for profile {profile.name!r} use another --cache folder."
        )
    # the cache layout (sources/interface.py)
    pins = {f"model/{Path(f.path).name}": f.sha256 for f in profile.model.files}
    for entry in manifest.files:  # a pin edited to null in the manifest must not bypass the lock
        if entry.role == "model" and entry.locked_sha256 != pins.get(entry.path):
            raise CheckFailed(f"{cache}/{MANIFEST_NAME}: {entry.path} records the lock pin {entry.locked_sha256!r}, "
                              f"but {lock.path} pins {pins.get(entry.path)!r}. Remove the cache folder and prepare "
                              "again.")
    return manifest


WEIGHTS_SUFFIXES = (".safetensors", ".safetensors.index.json")  # what only a model load reads
NOT_FETCHED = "not fetched (prepare --no-weights)"  # a weight file's source in a cache prepared without weights


def is_weight_file(path: str) -> bool:
    return path.endswith(WEIGHTS_SUFFIXES)


def is_weights(entry: ManifestFile) -> bool:
    return entry.role == "model" and is_weight_file(entry.path)


def verify_files(cache: Path, manifest: Manifest, roles=None, weights: bool = True, stop=None) -> None:
    """Re-hash cached files against the manifest and the lock; any changed byte fails. weights=False leaves out
    the model's weights, for a command that never loads them (a structural audit): they are not read at all.
    stop: a threading.Event that stops the hashing (util/hashing.Cancelled) once nobody will load what it verifies."""
    problems = []
    if weights and manifest.weightless and (roles is None or "model" in roles):
        raise InputError(f"{cache}: prepared with --no-weights, so it holds no model weights to load. adopt runs "
                         "every level but the rescore with it by itself, audit with --structural (exit 4 at best); "
                         "run cannot score. To score or rescore, prepare the profile into another --cache without "
                         "--no-weights.")
    for entry in manifest.files:
        if roles is not None and entry.role not in roles or not weights and is_weights(entry):
            continue
        path = Path(cache) / entry.path
        if not path.is_file():
            problems.append(f"{entry.path} is missing")
            continue
        actual = sha256_file(path, stop)
        if actual != entry.sha256:
            problems.append(f"{entry.path}: expected sha256 {entry.sha256}, got {actual}")
        elif entry.locked_sha256 and actual != entry.locked_sha256:
            problems.append(f"{entry.path}: lock pins sha256 {entry.locked_sha256}, got {actual}")
    if problems:
        raise CheckFailed(
            f"{cache}: the cache no longer matches {MANIFEST_NAME}: " + "; ".join(problems)
            + ". Remove the cache folder and prepare again."
        )


# --- one cache, many profiles: the first profile prepared at the top, each other in <cache>/<profile>/ ----------------
# (a group's subtasks and a study's variants were already prepared that way); the model files of profiles that pin the
# same model are hard links to one stored copy (resources/store.py), so a second profile costs its data only.

def cache_for(cache, profile: str) -> Path:
    """Where a profile's prepared cache is: <cache>/<profile> when prepared there, else <cache>."""
    nested = Path(cache) / profile
    return nested if (nested / MANIFEST_NAME).is_file() else Path(cache)


def prepare_target(cache, profile: str) -> Path:
    """Where `prepare` puts a profile: where it already is, else <cache> when that holds no other profile's manifest,
    else <cache>/<profile>."""
    found = cache_for(cache, profile)
    if found != Path(cache):
        return found
    top = Path(cache) / MANIFEST_NAME
    if not top.is_file():
        return Path(cache)
    try:
        other = read_manifest(cache)
    except InputError:
        return Path(cache)  # an unreadable manifest: prepare says so as it did
    return Path(cache) if other is None or other.profile == profile else Path(cache) / profile


def disk_use(cache) -> tuple:
    """(profiles prepared in the cache, bytes on disk with each hard-linked file counted once, bytes the files would
    take as copies)."""
    profiles, seen, linked, copies = [], set(), 0, 0
    for manifest in sorted(Path(cache).glob(f"**/{MANIFEST_NAME}")):
        try:
            found = read_manifest(manifest.parent)
        except InputError:
            continue
        if found is not None:
            profiles.append(found.profile)
    for item in Path(cache).rglob("*"):
        if item.is_file() and not item.is_symlink():
            info = item.stat()
            copies += info.st_size
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                linked += info.st_size
    return profiles, linked, copies
