"""The committed reference run (results/) passes its audit on every CI run, on any x86-64 CPU.

It was made in the lock's pinned numeric mode (ATEN_CPU_CAPABILITY=avx2, MKL_CBWR=AVX2,STRICT):
a run on any machine whose probe gives the lock's pinned digest reproduces it bit for bit;
elsewhere a run must stay within the drift bound with identical predictions (sst2_audit/protocol/drift.py).
The reference made before the strict mode (tests/data/amd-avx2-mode-reference.tar.gz, MKL_CBWR=AVX2
on an AMD EPYC) is a user's older bundle: it passes, the verdict naming its mode.
"""

import collections
import json
import pathlib
import tarfile

from support.paths import REPO
from support.processes import run_script
from sst2_audit.cli import audit_main
from sst2_audit.formats import manifest
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.protocol.numeric import numeric_key

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


def _counting(monkeypatch) -> dict:
    """Wrappers that count (and then call) the real reads: the reviewer's lock, each cache file's hash, the
    tokenizer's load."""
    counts = {"lock reads": 0, "hashed": collections.Counter(), "tokenizer loads": 0}
    lock, read_bytes = (REPO / "resources.lock.json").resolve(), pathlib.Path.read_bytes
    from transformers import PreTrainedTokenizerBase

    hash_file, from_pretrained = manifest.sha256_file, PreTrainedTokenizerBase.from_pretrained.__func__

    def counted_read(path):
        counts["lock reads"] += pathlib.Path(path).resolve() == lock
        return read_bytes(path)

    def counted_hash(path, stop=None):
        counts["hashed"][pathlib.Path(path).name] += 1
        return hash_file(path, stop)

    def counted_tokenizer(cls, *args, **kwargs):  # every tokenizer load, whichever module calls it
        counts["tokenizer loads"] += 1
        return from_pretrained(cls, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "read_bytes", counted_read)
    monkeypatch.setattr(manifest, "sha256_file", counted_hash)
    monkeypatch.setattr(PreTrainedTokenizerBase, "from_pretrained", classmethod(counted_tokenizer))
    return counts


def test_the_default_audit_rescores_the_reference_as_the_avx2_only_machine_scored_it(embedded_cache, capsys,
                                                                                       monkeypatch):
    """Made on an AVX-512 machine in the pinned mode; measured on an AVX2-only EPYC (Zen 3). The default
    audit rescores every row here, in the lock's mode, and must find the reference's scores bit for bit;
    those are the AVX2-only machine's. Its inputs are built once: one read of the lock, one hash of each
    cache file, one tokenizer, for the identity level and the rescore together."""
    counts = _counting(monkeypatch)
    assert audit_main(["--bundle-file", str(BUNDLE), "--cache", str(embedded_cache)]) == 0
    assert counts["lock reads"] == 1 and counts["tokenizer loads"] == 1
    assert "model.safetensors" in counts["hashed"] and set(counts["hashed"].values()) == {1}
    out = capsys.readouterr().out
    assert "identity: PASS" in out and "scores: 0 of 128 differ, max abs diff 0" in out
    machine = json.loads(AVX2_MACHINE.read_text())["modes"]
    reference = {str(q["idx"]): q["scores"]["independent"] for q in _reference()["questions"]}
    assert reference == machine["avx2-pinned"]["scores"] == machine["native"]["scores"] and len(reference) == 64


def test_reference_card_states_the_measurement():
    """The card today's code renders from the reference's records, as their schema (4) wrote it: what the audit
    compares the bundled one with. The same records at schema 5 get today's card: the platform as a claim."""
    from sst2_audit.formats import records
    from sst2_audit.pages.card import render
    from sst2_audit.formats.lock import load_lock

    raw = _reference()
    record = records.from_dict(records.RunRecord, raw, "run.json")
    assert raw["schema_version"] == 4
    card = render(record, load_lock(REPO / "resources.lock.json"), raw["schema_version"])
    today = render(record, load_lock(REPO / "resources.lock.json"))
    assert "Claimed by the submitter's machine, not verified by an audit:" in today
    assert "Claimed by the submitter's machine" not in card
    with tarfile.open(BUNDLE) as archive:
        assert archive.extractfile("embedded-full-reference/CARD.md").read().decode() == card
    assert "accuracy 42/64 = 0.6562 (stderr 0.0598), max abs diff between the paths 0.0" in card
    assert "| evaluator | lm-eval 0.4.9.2 (commit ad3f4d0cad1cfcdb815f1e795f7947e49ed9f2e9) |" in card
    assert "| profile | embedded (EMBEDDED DEMO, not a GLUE SST-2 measurement) |" in card
    assert r"capability AVX2; MKL 2024.2 (build 20240605), oneDNN 3.12.0; 1 thread(s); mode ATEN\_CPU\_CAPABILITY=avx2 " \
           r"MKL\_CBWR=AVX2,STRICT ONEDNN\_MAX\_CPU\_ISA=AVX2 (in effect)" in card


def _within_bound(fresh: dict, reference: dict) -> None:
    for new, old in zip(fresh["questions"], reference["questions"]):
        assert new["idx"] == old["idx"] and new["predictions"]["official"]["acc"] == old["predictions"]["official"]["acc"]
        assert max(abs(a - b) for a, b in zip(new["scores"]["official"], old["scores"]["official"])) <= DRIFT_BOUND


def test_a_fresh_run_reproduces_the_reference(full_run):
    reference = _reference()
    fresh = json.loads((full_run / "out" / "run.json").read_text())
    same_platform = numeric_key(fresh["platform"]) == numeric_key(reference["platform"])
    # A machine whose probe gives the lock's pinned digest runs the mode: then the mode, not the CPU, decides the bits.
    pinned = fresh["platform"]["probe_sha256"] == json.loads((REPO / "resources.lock.json").read_text())[
        "run_settings"]["numeric_probe_sha256"]
    if same_platform or pinned:
        assert [q["scores"]["official"] for q in fresh["questions"]] == [q["scores"]["official"] for q in reference["questions"]]
    else:
        _within_bound(fresh, reference)
    assert [q["prompt_hash"] for q in fresh["questions"]] == [q["prompt_hash"] for q in reference["questions"]]

    def pins(resources):  # where a file came from is prose; what it is, is its hash
        return [(r["path"], r["size"], r["sha256"]) for r in resources]

    assert pins(fresh["resources"]) == pins(reference["resources"]) and fresh["settings"] == reference["settings"]
    done = run_script("audit.py", "--compare", BUNDLE, full_run / "out")
    assert done.returncode in ((0,) if same_platform or pinned else (0, 4)), done.stderr
    verdict = done.stdout.splitlines()[-2]  # the scores line; the comparison verdict closes the output
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
    assert done.returncode == 4, done.stderr  # within the drift bound only
    lines = done.stdout.splitlines()
    assert any(line.startswith("numeric platform: not recorded (a run made before the numeric platform was recorded) -> ")
               for line in lines)
    assert lines[-2] == ("scores: 127 of 128 differ, max abs diff 3.29e-05 at row idx 127 candidate 0; "
                         "0 prediction flip(s); verdict: platform drift within the bound "
                         "(different numeric platform: drift bound 0.0001 per score)")
    # the verdict opens and closes the comparison, as it does an audit
    assert lines[0] == lines[-1] == ("comparison verdict: platform drift within the bound "
                                     "(different numeric platform: drift bound 0.0001 per score)")


OLD_MODE = REPO / "tests" / "data" / "amd-avx2-mode-reference.tar.gz"
OLD_MODE_WORDS = ("the run was made in numeric mode ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2, "
                  "the lock you gave pins ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT ONEDNN_MAX_CPU_ISA=AVX2")


def test_a_bundle_made_in_the_earlier_mode_passes_and_the_verdict_names_the_mode(embedded_cache, capsys):
    """Made on an AMD EPYC in MKL_CBWR=AVX2 (without STRICT), with the lock of its day: genuine, so it must not
    FAIL; its lock differs from the reviewer's in the numeric mode only, which the lock level and the verdict say.
    Its page (record schema 3's design, no longer rendered) is labelled the submitter's claim: a limit, exit 4."""
    assert audit_main(["--bundle-file", str(OLD_MODE), "--cache", str(embedded_cache)]) == 4
    out = capsys.readouterr().out
    assert "lock: PASS" in out and "the run's lock pins another numeric mode: run ATEN_CPU_CAPABILITY=avx2 " \
        "MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2; yours ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2,STRICT" in out
    assert "scores: 0 of 128 differ, max abs diff 0" in out
    assert out.strip().splitlines()[-1] == (
        "VERDICT: PASS WITH LIMITS: report.html is of page design 0, not this version's (1): not regenerated, so its "
        f"text is the submitter's claim; `audit --report FILE` writes the page of the checked records; {OLD_MODE_WORDS}; "
        "exit 4")


def test_a_forged_bundle_in_the_earlier_mode_never_passes(embedded_cache, tmp_path, capsys):
    """Scores moved by 2e-5 in a bundle of the earlier mode: that mode is not reproducible across CPUs, so the
    best it gets is the drift verdict (exit 4, the mode named); moved by 2e-4 it is FAIL."""
    from support.bundles import forge_every_row, members_of, pack, regenerate_card

    # every row is moved: the FAIL case needs no more than a drawn sample of rows to be caught
    for delta, code, head, sample in ((2e-5, 4, "VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: ", []),
                                      (2e-4, 1, "VERDICT: FAIL (rescore", ["--rescore", "8", "--seed", "1"])):
        members = members_of(OLD_MODE)
        record = json.loads(members["run.json"])
        forge_every_row(delta, lambda platform: platform.update(cpu_vendor="GenuineIntel"))(record, members)
        members["run.json"] = json.dumps(record, indent=2).encode()
        regenerate_card(members)
        pack(tmp_path / f"forged-{delta}.tar.gz", members)
        assert audit_main(["--bundle-file", str(tmp_path / f"forged-{delta}.tar.gz"), "--cache", str(embedded_cache),
                           *sample]) == code
        verdict = capsys.readouterr().out.strip().splitlines()[-1]
        assert verdict.startswith(head), verdict
        if code == 4:
            assert OLD_MODE_WORDS in verdict and "the run was made in numeric mode ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2 " \
                "ONEDNN_MAX_CPU_ISA=AVX2, not the lock's" in verdict, verdict
