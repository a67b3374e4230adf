"""The committed reference run (results/) passes its audit on every CI run."""

import tarfile

from conftest import REPO
from sst2_audit.cli import audit_main

BUNDLE = REPO / "results" / "embedded-full-reference.tar.gz"


def test_reference_bundle_passes_arithmetic(capsys):
    assert audit_main(["--bundle-file", str(BUNDLE), "--arithmetic-only"]) == 0
    out = capsys.readouterr().out
    assert "bundle SHA256SUMS: PASS" in out and "arithmetic: PASS" in out
    assert "run embedded-full-reference, profile embedded, 64 rows, lock from bundle" in out


def test_reference_bundle_passes_identity_with_the_embedded_cache(embedded_cache, capsys):
    assert audit_main(["--bundle-file", str(BUNDLE), "--cache", str(embedded_cache)]) == 0
    assert "identity: PASS" in capsys.readouterr().out


def test_reference_card_states_the_measurement():
    with tarfile.open(BUNDLE) as archive:
        card = archive.extractfile("embedded-full-reference/CARD.md").read().decode()
    assert "accuracy 42/64 = 0.6562 (stderr 0.0598), max abs diff between the paths 0.0" in card
    assert "| evaluator | lm-eval 0.4.9.2 (commit ad3f4d0cad1cfcdb815f1e795f7947e49ed9f2e9) |" in card
    assert "| profile | embedded (EMBEDDED DEMO, not a GLUE SST-2 measurement) |" in card
