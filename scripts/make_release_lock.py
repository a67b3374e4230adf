"""Write the lock of another supported lm-eval release: the base lock's profiles, settings and tasks, with the
evaluator section re-derived from the installed release, every file checked against its published wheel.

    python scripts/make_release_lock.py --wheel lm_eval-0.4.13-py3-none-any.whl --out lm-eval-0.4.13.lock.json
    python scripts/make_release_lock.py --wheel lm_eval-0.4.13-py3-none-any.whl --base demos.lock.json \
        --out demos-lm-eval-0.4.13.lock.json

Run it in an environment holding that release (the wheel installed, `pip install lm-eval==0.4.13`). The
evaluator pins every non-task .py file of the package and, per task of the base lock, its YAML, every file it
includes and its hook code, and per group its YAML and its subgroups', as the base lock does. The wheel's sha256
must be the registry's published one (sst2_audit/formats/releases.py). The output is never overwritten.
"""

import argparse
import hashlib
import json
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.formats.releases import installed_version, RELEASES  # noqa: E402
from sst2_audit.resources.task_pin import pin_files, pin_task  # noqa: E402
from sst2_audit.task.group import resolve  # noqa: E402
from sst2_audit.util import atomic  # noqa: E402


def code_files(wheel: Path) -> list:
    """Every .py file of the lm_eval package outside its task folders (lm_eval/tasks/__init__.py is code)."""
    with zipfile.ZipFile(wheel) as archive:
        return sorted(name for name in archive.namelist() if name.startswith("lm_eval/") and name.endswith(".py")
                      and (not name.startswith("lm_eval/tasks/") or name.count("/") == 2))


def release_lock(base: dict, wheel: Path) -> dict:
    version = installed_version()
    release = RELEASES.get(version)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if release is None or wheel.name != release.wheel or digest != release.sha256:
        raise SystemExit(f"error: {wheel}: expected the published wheel of the installed lm-eval {version} "
                         f"({release.wheel if release else 'unknown release'}), got sha256 {digest}.")
    raw = json.loads(json.dumps(base))
    old = raw["evaluator"]
    raw["evaluator"] = {
        "package": "lm-eval", "version": version,
        "commit": f"v{version} (tag; its commit id is not recorded here: the registry's wheel below pins the files)",
        "note": f"sha256 of every non-task .py file and of the YAML files of the pinned tasks (each task's own YAML "
                f"and every file it includes) of lm-eval {version}, each equal to its member in the registry's "
                "published wheel (scripts/make_release_lock.py); task and task_yaml name the default task",
        "wheel": {"name": release.wheel, "sha256": release.sha256},
        "files": {}, "tasks": {}, "task": old["task"], "task_yaml": None}
    pin_files(raw, code_files(wheel), wheel)
    for name in sorted(old["tasks"]):
        pin_task(raw, name, wheel)
    raw["evaluator"]["task_yaml"] = raw["evaluator"]["tasks"][old["task"]]
    for group in (raw.get("groups") or {}).values():  # the group's YAML and its subgroups', as pin_group pins them
        pin_files(raw, resolve(group["yaml"], group["group"])[0], wheel)
    return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, required=True, help="the release's wheel from the package registry")
    parser.add_argument("--base", type=Path, default=REPO / "resources.lock.json")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    raw = release_lock(json.loads(args.base.read_text()), args.wheel)
    atomic.write_text(args.out, json.dumps(raw, indent=2) + "\n")
    print(f"wrote {args.out}: lm-eval {raw['evaluator']['version']}, {len(raw['evaluator']['files'])} files, "
          f"tasks {', '.join(raw['evaluator']['tasks'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
