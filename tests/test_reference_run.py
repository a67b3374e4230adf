"""The committed reference run (results/) passes its audit on every CI run, on any x86-64 CPU.

It was made in the lock's pinned numeric mode (ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=AVX2):
a run on any CPU with AVX2 and FMA in that mode reproduces it bit for bit; elsewhere a run
must stay within the drift bound with identical predictions (sst2_audit/drift.py).
"""

import json
import tarfile

from conftest import REPO, run_script
from sst2_audit.cli import audit_main
from sst2_audit.drift import DRIFT_BOUND
from sst2_audit.numeric import numeric_key

BUNDLE = REPO / "results" / "embedded-full-reference.tar.gz"
AVX2_MACHINE = REPO / "tests" / "data" / "avx2-machine-scores.json"


def _reference() -> dict:
    with tarfile.open(BUNDLE) as archive:
        return json.loads(archive.extractfile("embedded-full-reference/run.json").read())


def test_reference_bundle_passes_arithmetic(capsys):
    assert audit_main(["--bundle-file", str(BUNDLE), "--arithmetic-only"]) == 4
    out = capsys.readouterr().out
    assert "bundle SHA256SUMS and members: PASS" in out and "arithmetic: PASS" in out
    assert "run embedded-full-reference, profile embedded, 64 rows" in out


def test_the_default_audit_rescores_the_reference_as_the_avx2_only_machine_scored_it(embedded_cache, capsys):
    """Made on an AVX-512 machine in the pinned mode; measured on an AVX2-only EPYC (Zen 3). The default
    audit rescores every row here, in the lock's mode, and must find the reference's scores bit for bit;
    those are the AVX2-only machine's."""
    assert audit_main(["--bundle-file", str(BUNDLE), "--cache", str(embedded_cache)]) == 0
    out = capsys.readouterr().out
    assert "identity: PASS" in out and "scores: 0 of 128 differ, max abs diff 0" in out
    machine = json.loads(AVX2_MACHINE.read_text())["modes"]
    reference = {str(q["idx"]): q["independent_scores"] for q in _reference()["questions"]}
    assert reference == machine["avx2-pinned"]["scores"] == machine["native"]["scores"] and len(reference) == 64


def test_reference_card_states_the_measurement():
    """The card today's code renders from the reference's records: what the audit compares the bundled one with."""
    from sst2_audit import records
    from sst2_audit.card import render
    from sst2_audit.lock import load_lock

    record = records.from_dict(records.RunRecord, _reference(), "run.json")
    card = render(record, load_lock(REPO / "resources.lock.json"))
    with tarfile.open(BUNDLE) as archive:
        assert archive.extractfile("embedded-full-reference/CARD.md").read().decode() == card
    assert "accuracy 42/64 = 0.6562 (stderr 0.0598), max abs diff between the paths 0.0" in card
    assert "| evaluator | lm-eval 0.4.9.2 (commit ad3f4d0cad1cfcdb815f1e795f7947e49ed9f2e9) |" in card
    assert "| profile | embedded (EMBEDDED DEMO, not a GLUE SST-2 measurement) |" in card
    assert r"capability AVX2; MKL 2024.2 (build 20240605), oneDNN 3.12.0; 1 thread(s); mode ATEN\_CPU\_CAPABILITY=avx2 " \
           r"MKL\_CBWR=AVX2 ONEDNN\_MAX\_CPU\_ISA=AVX2 (in effect)" in card


def _within_bound(fresh: dict, reference: dict) -> None:
    for new, old in zip(fresh["questions"], reference["questions"]):
        assert new["idx"] == old["idx"] and new["predictions"]["official"]["acc"] == old["official_prediction"]
        assert max(abs(a - b) for a, b in zip(new["scores"]["official"], old["official_scores"])) <= DRIFT_BOUND


def test_a_fresh_run_reproduces_the_reference(full_run):
    reference = _reference()
    fresh = json.loads((full_run / "out" / "run.json").read_text())
    same_platform = numeric_key(fresh["platform"]) == numeric_key(reference["platform"])
    # Any CPU with AVX2 + FMA runs the pinned mode: then the mode, not the CPU, decides the bits.
    pinned = fresh["platform"]["mode_in_effect"] and fresh["platform"]["torch_cpu_capability"] == "AVX2"
    if same_platform or pinned:
        assert [q["scores"]["official"] for q in fresh["questions"]] == [q["official_scores"] for q in reference["questions"]]
    else:
        _within_bound(fresh, reference)
    assert [q["prompt_hash"] for q in fresh["questions"]] == [q["prompt_hash"] for q in reference["questions"]]

    def pins(resources):  # where a file came from is prose; what it is, is its hash
        return [(r["path"], r["size"], r["sha256"]) for r in resources]

    assert pins(fresh["resources"]) == pins(reference["resources"]) and fresh["settings"] == reference["settings"]
    done = run_script("audit.py", "--compare", BUNDLE, full_run / "out")
    assert done.returncode == 0, done.stderr
    verdict = done.stdout.splitlines()[-1]
    if same_platform or pinned:
        assert verdict.startswith("scores: 0 of 128 differ, max abs diff 0; 0 prediction flip(s); verdict: identical"), verdict
    if same_platform:
        assert verdict == ("scores: 0 of 128 differ, max abs diff 0; 0 prediction flip(s); verdict: identical "
                           "(same numeric platform: bit for bit required)")
    else:
        assert verdict.endswith(("verdict: platform drift within the bound (different numeric platform: "
                                 "drift bound 0.0001 per score)",
                                 "verdict: identical (different numeric platform: drift bound 0.0001 per score)"))


def test_compare_across_platforms_reports_the_drift_and_a_verdict():
    """The pre-pin reference (schema 1, native mode of an AVX-512 machine) against the pinned one."""
    done = run_script("audit.py", "--compare", REPO / "tests" / "data" / "v1-embedded-full-reference.tar.gz", BUNDLE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("numeric platform: not recorded (a run made before the numeric platform was recorded) -> ")
               for line in lines)
    assert lines[-1] == ("scores: 127 of 128 differ, max abs diff 3.29e-05 at row idx 127 candidate 0; "
                         "0 prediction flip(s); verdict: platform drift within the bound "
                         "(different numeric platform: drift bound 0.0001 per score)")
