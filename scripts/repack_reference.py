"""Re-pack a committed reference bundle after a change to what the bundle's regenerated members
(CARD.md, report.html) look like. The run's own records are carried byte for byte: the scores,
predictions and accuracy cannot change; the script refuses if any record member differs.

    .venv/bin/python scripts/repack_reference.py results/embedded-full-reference.tar.gz --cache .test-cache/embedded
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sst2_audit.bundle import run as bundle  # noqa: E402
from sst2_audit.audit.loading import load_run  # noqa: E402
from sst2_audit.cli.common import DEFAULT_LOCK  # noqa: E402
from sst2_audit.formats.lock import load_lock  # noqa: E402

CARRIED = bundle.PUBLIC_FILES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--cache", type=Path, required=True)
    args = parser.parse_args()
    _, old = bundle.read_members(args.bundle)
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = Path(scratch) / "run"
        run_dir.mkdir()
        for name in CARRIED:
            if name in old:
                (run_dir / name).write_bytes(old[name])
        run = load_run(run_dir, load_lock(DEFAULT_LOCK))
        results = Path(scratch) / "results"
        packed = bundle.pack(run, args.cache, results)
        _, new = bundle.read_members(packed)
        changed = [name for name in CARRIED if old.get(name) != new.get(name)]
        if changed:
            print(f"refused: records changed: {changed}", file=sys.stderr)
            return 1
        print("regenerated:", ", ".join(n for n in sorted(new) if old.get(n) != new.get(n)) or "nothing")
        args.bundle.write_bytes(packed.read_bytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
