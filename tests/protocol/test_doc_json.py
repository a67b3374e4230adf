"""lm-eval's doc_hash is the sha256 of json.dumps(doc, indent=2, ensure_ascii=False): our writer of that text
(util/json_text.py, without json's generators) must give the same text for every document, flat or not."""

import json
import random

from sst2_audit.protocol.rules import doc_hash, doc_json
from sst2_audit.util.hashing import sha256_text

TEXT = ['a', '"', '\\', '\n', '\t', '\x00', '\x1f', '\x7f', 'é', '\u2028', '\U0001f600', ' ', '\ud800', '/']


def _value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randrange(-10**20, 10**20)
    if kind == 2:
        return rng.choice([0.1, -0.0, 1e300, float("nan"), float("inf"), -float("inf"), 5e-324, rng.random()])
    if kind == 7:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    if kind == 8:
        return {"a": _value(rng, depth + 1)}
    return "".join(rng.choice(TEXT) for _ in range(rng.randrange(8)))


def test_every_generated_document_is_written_as_json_writes_it():
    rng = random.Random(62)
    flat = listed = 0
    for _ in range(5000):
        doc = {}
        for _ in range(rng.randrange(6)):
            key = rng.choice(["x", 'é"', "\n", "label", "\ud800"]) if rng.random() < 0.9 else rng.choice([3, True, 0.5])
            doc[key] = _value(rng)
        expected = json.dumps(doc, indent=2, ensure_ascii=False)
        assert doc_json(doc) == expected, doc
        if "\ud800" not in expected:
            assert doc_hash(doc) == sha256_text(expected)
        shortcut = all(type(k) is str and (not isinstance(v, (list, dict)) or type(v) is list and not any(
            isinstance(item, (list, dict)) for item in v)) for k, v in doc.items())
        flat += shortcut
        listed += shortcut and any(type(v) is list and v for v in doc.values())
    assert flat > 1000 and listed > 200  # flat docs (most datasets' rows), lists of scalars among them, were drawn
