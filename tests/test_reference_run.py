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


def test_a_fresh_run_reproduces_the_reference_bit_for_bit(full_run):
    import json

    from conftest import run_script

    with tarfile.open(BUNDLE) as archive:
        reference = json.loads(archive.extractfile("embedded-full-reference/run.json").read())
    fresh = json.loads((full_run / "out" / "run.json").read_text())
    assert [q["official_scores"] for q in fresh["questions"]] == [q["official_scores"] for q in reference["questions"]]
    assert [q["prompt_hash"] for q in fresh["questions"]] == [q["prompt_hash"] for q in reference["questions"]]
    def pins(resources):  # where a file came from is prose; what it is, is its hash
        return [(r["path"], r["size"], r["sha256"]) for r in resources]

    assert pins(fresh["resources"]) == pins(reference["resources"]) and fresh["settings"] == reference["settings"]
    done = run_script("audit.py", "--compare", BUNDLE, full_run / "out")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == [
        "accuracy: 0.6562 -> 0.6562; 0 prediction(s) changed, 0 question(s) with different scores"]
