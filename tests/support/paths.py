"""Where the suite's inputs are: the checkout, its locks, the suite's own caches, the installed command."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
LOCK = REPO / "resources.lock.json"
DEMOS = REPO / "demos.lock.json"  # the few-shot demo profiles (scripts/make_demo_lock.py)
TEST_CACHE = REPO / ".test-cache"
VENV_BIN = Path(sys.executable).parent  # the installed command's folder (pip install -e .)
REFERENCE_MODE = json.loads(LOCK.read_text())["run_settings"]["numeric_mode"]
# The embedded profile's data columns, as the lock states them (lock.py's upgrade from version 3).
EMBEDDED_COLUMNS = (("sentence", "string"), ("label", "int64"), ("idx", "int32"))


def _release_lock() -> Path:
    from sst2_audit.formats.releases import installed_version

    return {"0.4.9.2": LOCK, "0.4.13": REPO / "lm-eval-0.4.13.lock.json"}[installed_version()]


RELEASE_LOCK = _release_lock()  # the lock of this environment's lm-eval release (same pins as LOCK's)


def load_lock_json() -> dict:
    return json.loads(LOCK.read_text())
