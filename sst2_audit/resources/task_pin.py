"""Pin a task the base lock does not pin yet: its YAML files from the installed lm-eval, each
checked against the member of the same path in the lm-eval wheel the lock pins by sha256.

A reviewer re-derives every pin the same way: the wheel's sha256 is in the lock, and a YAML's pin
is the sha256 of that wheel's member.
"""

import contextlib
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.task.spec import spec_from_yaml
from sst2_audit.task.support import installed_configs
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file


def find_yaml(name: str, root: Path) -> str:
    """The installed YAML (relative to root) that defines task `name`."""
    import glob


    found = [str(path.relative_to(root)) for path, _ in installed_configs(glob.escape(name))]  # the name, literally
    if len(found) != 1:
        raise InputError(f"--task {name}: "
                         f"{'no installed lm-eval YAML defines it' if not found else 'defined by ' + ', '.join(found)}"
                         "; `sst2-audit run --list-tasks` lists the installed tasks.")
    return found[0]


@contextlib.contextmanager
def evaluator_wheel(pin: dict, given: Path | None):
    """The pinned lm-eval wheel, checked: the one given, or downloaded from the package registry (pip, no install)
    into a temporary folder removed when the block ends (a pin left an 8 MB wheel behind each time before)."""
    with tempfile.TemporaryDirectory(prefix="sst2-audit-lm-eval-wheel-") as folder:
        if given is None:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                                   ":all:", "-d", folder, f"lm-eval=={pin['version']}"], capture_output=True, text=True)
            given = Path(folder) / pin["wheel"]["name"]
            if done.returncode != 0 or not given.is_file():
                raise InputError(f"could not download {pin['wheel']['name']} to check the task's YAML pins (pip: "
                                 f"{done.stderr.strip()[-300:]}); pass it with --evaluator-wheel PATH.")
        actual = sha256_file(given)
        if actual != pin["wheel"]["sha256"]:
            raise CheckFailed(f"{given}: sha256 {actual}, but the lock pins {pin['wheel']['name']} as "
                              f"{pin['wheel']['sha256']}.")
        yield given


def pin_task(raw: dict, name: str, wheel: Path | None) -> None:
    """Add task `name` (its YAML and every file it includes) to raw's evaluator; never change a pin."""

    root = installed_root()
    relative = find_yaml(name, root)
    spec = spec_from_yaml(name, relative, root)  # refuses what the protocol does not support, with the reason
    pin_files(raw, spec.yaml_files + spec.code_files, wheel)
    raw["evaluator"]["tasks"][name] = relative


def pin_files(raw: dict, paths, wheel: Path | None) -> None:
    """Pin installed lm-eval files (relative to the lm_eval package's folder), each checked against the member of
    the same path in the pinned wheel; never change a pin."""

    evaluator, root = raw["evaluator"], installed_root()
    with evaluator_wheel(evaluator, wheel) as checked, zipfile.ZipFile(checked) as archive:
        members = set(archive.namelist())
        for path in paths:
            installed = sha256_file(root / path)
            if path not in members:
                raise CheckFailed(f"{path}: installed, but not a member of the pinned {evaluator['wheel']['name']}.")
            in_wheel = hashlib.sha256(archive.read(path)).hexdigest()
            if installed != in_wheel:
                raise CheckFailed(f"{root / path}: sha256 {installed}, but the pinned wheel's member is {in_wheel}; "
                                  "the installed lm-eval is not the pinned one.")
            if evaluator["files"].get(path, in_wheel) != in_wheel:
                raise CheckFailed(f"evaluator.files[{path}] is pinned as {evaluator['files'][path]}, the wheel has "
                                  f"{in_wheel}.")
            evaluator["files"][path] = in_wheel
