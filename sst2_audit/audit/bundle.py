"""The reviewer bundle: a deterministic tar.gz of public records, with SHA256SUMS and a card.

It never carries a sentence, a prompt or a token id of the data. Extraction refuses
absolute paths, `..`, links and devices, and writes nothing outside its target.
"""

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

from .. import atomic, records
from ..environment import scrub_paths
from ..errors import CheckFailed, InputError
from ..hashing import sha256_file
from ..manifest import MANIFEST_NAME, read_manifest
from . import card
from .loading import BUNDLE_LOCK, BUNDLE_MANIFEST

SUMS = "SHA256SUMS"
CARD = "CARD.md"
PUBLIC_FILES = (records.RUN_FILE, records.FAILURE_FILE, records.LM_EVAL_RESULTS_FILE, records.LM_EVAL_SAMPLES_FILE,
                records.ENVIRONMENT_FILE)


def bundle_contents(run, cache: Path) -> dict:
    """{name: bytes} of everything the bundle holds, SHA256SUMS last."""
    contents = {}
    for name in PUBLIC_FILES:
        if (run.path / name).exists():
            contents[name] = (run.path / name).read_bytes()
    contents[BUNDLE_LOCK] = run.lock.path.read_bytes()
    manifest = read_manifest(cache)
    if manifest is None:
        raise InputError(f"{cache}: no {MANIFEST_NAME}; the bundle needs the manifest of the cache the run used (--cache).")
    if run.record is not None:
        used = {entry["path"]: entry["sha256"] for entry in run.record.resources}
        here = {entry.path: entry.sha256 for entry in manifest.files}
        if used != here:
            raise InputError(f"{cache}/{MANIFEST_NAME} does not describe the resources run {run.name} used; "
                             "pass the --cache the run was made with.")
    scrub = {str(Path(cache).resolve()): "<cache>", str(Path.cwd()): "<cwd>", str(Path.home()): "<home>"}
    contents[BUNDLE_MANIFEST] = (json.dumps(scrub_paths(manifest.to_dict(), scrub), indent=2, sort_keys=True) + "\n").encode()
    if run.record is not None:
        contents[CARD] = card.render(run.record, run.lock).encode()
    contents[SUMS] = "".join(f"{hashlib.sha256(body).hexdigest()}  {name}\n"
                             for name, body in sorted(contents.items())).encode()
    return contents


def pack(run, cache: Path, results: Path) -> Path:
    target = Path(results) / f"{run.name}.tar.gz"
    if target.exists():
        raise InputError(f"{target} already exists; a bundle is never overwritten. Move it away first.")
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name, body in sorted(bundle_contents(run, cache).items()):
            info = tarfile.TarInfo(f"{run.name}/{name}")
            info.size, info.mode, info.mtime = len(body), 0o644, 0  # deterministic: same run, same bytes
            archive.addfile(info, io.BytesIO(body))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as compressed:
        compressed.write(raw.getvalue())
    atomic.write_bytes(target, packed.getvalue())
    return target


def safe_extract(bundle: Path, target: Path) -> Path:
    """Extract into target; returns the run folder inside it. Refuses anything but plain files."""
    bundle = Path(bundle)
    try:
        archive = tarfile.open(bundle, mode="r:gz")
    except (OSError, tarfile.TarError) as error:
        raise InputError(f"{bundle}: not a readable tar.gz bundle ({error}).") from None
    with archive:
        members = archive.getmembers()
        tops = set()
        for member in members:
            name = member.name
            parts = Path(name).parts
            if name.startswith(("/", "\\")) or Path(name).is_absolute() or ".." in parts or not parts:
                raise CheckFailed(f"{bundle}: refusing member {name!r}: absolute path or '..' in a bundle.")
            if not (member.isfile() or member.isdir()):
                kind = "link" if (member.issym() or member.islnk()) else "device or special file"
                raise CheckFailed(f"{bundle}: refusing member {name!r}: a {kind} in a bundle.")
            tops.add(parts[0])
        if len(tops) != 1:
            raise CheckFailed(f"{bundle}: expected one top-level run folder, found {sorted(tops)}.")
        root = Path(target).resolve()
        for member in members:
            destination = (root / member.name).resolve()
            if root not in destination.parents and destination != root:
                raise CheckFailed(f"{bundle}: refusing member {member.name!r}: it would land outside the target.")
            if member.isdir():
                destination.mkdir(parents=True, exist_ok=True)
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.extractfile(member) as source:
                destination.write_bytes(source.read())
    return root / tops.pop()


def check_sums(folder: Path) -> list:
    """SHA256SUMS first: every file listed, every listed file present and unchanged."""
    sums_file = Path(folder) / SUMS
    if not sums_file.exists():
        return [f"{SUMS} is missing from the bundle"]
    problems, listed = [], set()
    for number, line in enumerate(sums_file.read_text(encoding="utf-8").splitlines(), start=1):
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            problems.append(f"{SUMS}:{number}: malformed line {line!r}")
            continue
        listed.add(name)
        path = Path(folder) / name
        if not path.is_file():
            problems.append(f"{name}: listed in {SUMS} but missing")
            continue
        actual = sha256_file(path)
        if actual != digest:
            problems.append(f"{name}: sha256 expected {digest} (SHA256SUMS), got {actual}")
    for path in sorted(Path(folder).rglob("*")):
        if path.is_file() and path.name != SUMS and str(path.relative_to(folder)) not in listed:
            problems.append(f"{path.relative_to(folder)}: in the bundle but not listed in {SUMS}")
    return problems
