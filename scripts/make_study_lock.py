"""Writes study.lock.json: the shipped lock's evaluator, split rule and settings, and the embedded profile with
three few-shot variants of it (2 shots from the demo's train split under the lock's seed, seed 2 and seed 3),
for the worked example of docs/confirmation.md (a study on dev, a pre-registration, its confirmation).

    .venv/bin/python scripts/make_study_lock.py   # refuses to overwrite

Every variant is the embedded DEMO (data written for sst2-audit, a de-quantized model), never a measurement;
the variants differ only in their settings, so a study may pair them question by question.
"""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.formats.lock import parse_lock  # noqa: E402
from sst2_audit.util import atomic  # noqa: E402
from sst2_audit.util.hashing import sha256_text  # noqa: E402

VARIANTS = {"embedded": {}, "embedded-2shot": {"num_fewshot": 2},
            "embedded-2shot-seed2": {"num_fewshot": 2, "seed": 2}, "embedded-2shot-seed3": {"num_fewshot": 2, "seed": 3}}


def study_lock(raw: dict) -> dict:
    embedded = raw["profiles"]["embedded"]
    words = {"embedded": "0 shots", "embedded-2shot": "2 shots from its train split, the lock's seed",
             "embedded-2shot-seed2": "2 shots from its train split, seed 2",
             "embedded-2shot-seed3": "2 shots from its train split, seed 3"}
    raw = dict(raw, profiles={name: dict(embedded, settings=settings,
                                         description=f"{embedded['description']} (study variant: {words[name]})")
                              for name, settings in VARIANTS.items()})
    raw.pop("groups", None)
    return raw


def main() -> int:
    target = REPO / "study.lock.json"
    raw = study_lock(json.loads((REPO / "resources.lock.json").read_text()))
    text = json.dumps(raw, indent=2, sort_keys=True) + "\n"
    parse_lock(json.loads(text), target, sha256_text(text))  # the lock reader's own checks, before anything is written
    atomic.write_text(target, text)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
