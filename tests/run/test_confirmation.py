"""Pre-registration, the once-only confirmation run and its audit; paired protocol-sensitivity studies.

study.lock.json (the worked example's: the embedded demo and three few-shot variants of it) on fewer rows (8 dev,
16 confirmation) and a tiny model (the protocol is the point; docs/confirmation.md holds the real model's worked
example); every command runs as a user runs it (a process of its own, real exit codes)."""

import json
import random
import re
import shutil

import pytest

from support.builders import tiny_model_lock
from support.paths import REPO
from support.processes import run_script
from sst2_audit.cli import audit_main, run_main
from sst2_audit.protocol.decision import make_rule
from sst2_audit.protocol.stats import mcnemar_exact
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_file

VARIANTS = {"embedded": {}, "embedded-2shot": {"num_fewshot": 2},
            "embedded-2shot-seed2": {"num_fewshot": 2, "seed": 2}, "embedded-2shot-seed3": {"num_fewshot": 2, "seed": 3}}


def _ok(done, code=0):
    assert done.returncode == code, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def experiment(embedded_cache, tmp_path_factory):
    """The lock, one prepared cache per profile (cache/<profile>) and a full dev run of embedded and
    embedded-2shot, in a working folder as a user would have it."""
    base = tmp_path_factory.mktemp("experiment")
    lock = tiny_model_lock(REPO / "study.lock.json", base, embedded_cache)  # with the demo files beside it
    raw = json.loads(lock.read_text())  # the worked example's lock, on fewer rows
    assert {name: profile.get("settings") for name, profile in raw["profiles"].items()} == VARIANTS
    raw["split"].update(dev_rows=8, confirm_rows=16)
    lock.write_text(json.dumps(raw, indent=1))
    for name in VARIANTS:
        _ok(run_script("prepare.py", "--lock", "study.lock.json", "--profile", name, "--cache", f"cache/{name}",
                       cwd=base))
    for name, folder in (("embedded", "a"), ("embedded-2shot", "b")):
        _ok(run_script("run.py", "--lock", "study.lock.json", "--profile", name, "--cache", f"cache/{name}",
                       "--run-name", folder, "--quiet", cwd=base))
    return base


def _run(base, *args):
    return run_script("run.py", "--lock", "study.lock.json", *args, cwd=base)


def _audit(base, *args):
    return run_script("audit.py", "--lock", "study.lock.json", "--cache", "cache", *args, cwd=base)


def _accuracy(run_json) -> float:
    questions = json.loads(run_json.read_text())["questions"]
    return sum(q["predictions"]["official"]["acc"] == q["label"] for q in questions) / len(questions)


def _tickets(base) -> list:
    """The per-pre-registration tickets (the sealed rows' own tickets, sealed-*.json, apart)."""
    return sorted(path.name for path in base.glob("cache/*/confirmations/*.json") if not path.name.startswith("sealed-"))


@pytest.fixture(scope="module")
def confirmed(experiment):
    """A pre-registration over the two dev runs and its confirmation: (its sha256, the two commands' stdout)."""
    base = experiment
    preregistered = _ok(_run(base, "--preregister", "prereg.json", "--dev-run", "runs/b", "--dev-run", "runs/a",
                   "--rule", "exceeds", "--metric", "acc", "--cache", "cache"))
    confirmed = _ok(_run(base, "--confirm", "prereg.json", "--cache", "cache", "--run-name", "conf", "--quiet"))
    return sha256_file(base / "prereg.json"), preregistered, confirmed


def test_preregister_confirm_once_and_audit(experiment, confirmed, capsys):
    base = experiment
    sha, out, confirmed_out = confirmed
    assert out.splitlines()[0] == f"pre-registration prereg.json: sha256 {sha}"
    assert "  rule          the point estimate of acc of profile embedded-2shot exceeds that of profile embedded (a " \
           "point estimate, no test)" in out
    assert out.splitlines()[-1].startswith("  confirm       16 sealed rows per profile, once: ")
    assert out.splitlines()[-1].endswith(" --confirm prereg.json --lock study.lock.json")  # the default cache left out
    prereg = json.loads((base / "prereg.json").read_text())
    assert [d["path"] for d in prereg["dev_runs"]] == ["runs/b", "runs/a"]
    assert prereg["dev_runs"][0]["value"] == _accuracy(base / "runs/b/run.json")

    out = confirmed_out
    assert _tickets(base) == [f"{sha}.json", f"{sha}.json"]
    record = json.loads((base / "runs/conf/confirmation.json").read_text())
    values = {p: _accuracy(base / f"runs/conf/confirm/{p}/run.json") for p in ("embedded-2shot", "embedded")}
    assert record["outcome"]["values"] == values  # re-counted here from the questions, not taken from a summary
    assert record["outcome"]["holds"] is (values["embedded-2shot"] > values["embedded"])
    assert record["preregistration_sha256"] == sha
    for profile in ("embedded-2shot", "embedded"):
        run = json.loads((base / f"runs/conf/confirm/{profile}/run.json").read_text())
        assert run["mode"] == "confirm" and len(run["questions"]) == 16
        assert run["split"]["scored_ids"] == [c["idx"] for c in run["split"]["confirm"]]
        assert not set(run["split"]["scored_ids"]) & set(run["split"]["dev_ids"])
    assert f"  outcome       {record['outcome_line']}" in out

    done = _audit(base, "--out", "runs/conf", "--bundle", "--results", "results")
    out = _ok(done)
    assert out.splitlines()[-1] == "bundle: results/conf.tar.gz"
    out = out.rsplit("\n", 2)[0] + "\n"
    verdict = ("VERDICT: PASS: every confirmation run's audit passed with every scored row rescored bit for bit, the "
               "chain (confirmation, pre-registration, dev records, your lock) was checked and the decision rule "
               "re-evaluated; not knowable from these records: whether other confirmations of this or another "
               "pre-registration were run elsewhere (the once-only ticket lives in the submitter's cache); exit 0")
    assert out.splitlines()[0] == verdict and out.splitlines()[-1] == verdict
    assert "confirmation chain: PASS" in out and out.count("all 16 scored rows rescored") == 2

    # the bundle carries the chain: its own audit checks the same links and numbers
    done = _audit(base, "--bundle-file", "results/conf.tar.gz", "--structural")
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: every confirmation run's audit found no problem but "
                                  "not everything was verified (see each confirmation run), the chain")
    assert "confirmation bundle SHA256SUMS and members: PASS" in done.stdout
    assert "confirmation chain: PASS" in done.stdout and "(confirm-embedded.tar.gz)" in done.stdout

    # generated byte edits of the bundle: refused (exit 1 or 2, one paragraph), never a PASS or a traceback
    packed = (base / "results/conf.tar.gz").read_bytes()
    rng = random.Random(2026)
    for number in range(24):
        edited = bytearray(packed)
        position = rng.randrange(10, len(edited))  # past gzip's mtime, flags and OS bytes, which nothing reads
        edited[position] ^= 1 << rng.randrange(8)
        forged = base / f"results/forged-{number}.tar.gz"
        forged.write_bytes(bytes(edited))
        code = audit_main(["--lock", str(base / "study.lock.json"), "--cache", str(base / "cache"), "--bundle-file",
                           str(forged), "--structural"])
        captured = capsys.readouterr()
        assert code in (1, 2), (position, captured.out[-2000:], captured.err[-2000:])
        assert "Traceback" not in captured.err and captured.err.count("error:") <= 1, captured.err

    # at most once: a second attempt is refused, naming the first; nothing new is written
    done = _run(base, "--confirm", "prereg.json", "--cache", "cache", "--run-name", "conf2")
    assert done.returncode == 1, done.stderr
    assert f"error: pre-registration {sha[:12]} was already confirmed for profile embedded-2shot: run 'conf' in " \
           "'runs/conf', started " in done.stderr
    assert not (base / "runs/conf2").exists() and _tickets(base) == [f"{sha}.json", f"{sha}.json"]

    # a confirmation run audited alone, outside its chain, is refused
    done = run_script("audit.py", "--lock", "study.lock.json", "--cache", "cache/embedded", "--out",
                      "runs/conf/confirm/embedded", "--structural", cwd=base)
    assert done.returncode == 1 and "claims: FAIL" in done.stdout, done.stdout
    assert "a confirmation run (mode confirm) is audited with its confirmation folder" in done.stdout


def test_the_sealed_rows_are_confirmed_once_whatever_the_pre_registration(experiment, confirmed):
    """A new pre-registration over the same sealed rows (another rule) is refused (exit 2) naming the first
    confirmation; with --reconfirm it runs and its outcome, record and audit verdict say how often they were spent."""
    base = experiment
    _ok(_run(base, "--preregister", "prereg-again.json", "--dev-run", "runs/b", "--rule", "at-least", "--metric", "acc",
             "--threshold", "0.1"))
    done = _run(base, "--confirm", "prereg-again.json", "--cache", "cache", "--run-name", "again")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: the sealed rows of profile embedded-2shot under this lock were confirmed 1 time(s) before from " \
           "this cache (first: run 'conf', pre-registration " in done.stderr
    assert not (base / "runs/again").exists()
    done = _run(base, "--confirm", "prereg-again.json", "--cache", "cache", "--run-name", "again", "--reconfirm",
                "--quiet")
    _ok(done)
    record = json.loads((base / "runs/again/confirmation.json").read_text())
    assert record["prior_confirmations"] == {"embedded-2shot": 1}
    assert record["outcome_line"].endswith("; the sealed rows of embedded-2shot were confirmed 1 time(s) before "
                                           "from this cache")
    sealed = json.loads(next(base.glob("cache/embedded-2shot/confirmations/sealed-*.json")).read_text())
    assert [entry["run_name"] for entry in sealed] == ["conf", "again"]
    done = _audit(base, "--out", "runs/again", "--structural")
    assert done.returncode == 4 and "the record says the sealed rows of embedded-2shot were confirmed 1 time(s) " \
        "before from the submitter's cache (--reconfirm)" in done.stdout.splitlines()[0], done.stdout


def test_a_forged_decision_outcome_is_caught(experiment, confirmed):
    base = experiment
    shutil.copytree(base / "runs/conf", base / "runs/forged")
    path = base / "runs/forged/confirmation.json"
    record = json.loads(path.read_text())
    record["outcome"]["holds"] = not record["outcome"]["holds"]
    path.write_text(json.dumps(record))
    done = _audit(base, "--out", "runs/forged", "--structural")
    assert done.returncode == 1, done.stdout
    assert done.stdout.startswith("VERDICT: FAIL (confirmation chain); exit 1")
    assert "decision: outcome (re-evaluated from the confirmation runs): expected {" in done.stdout


def test_a_tampered_dev_record_is_refused_before_any_row_is_scored(experiment):
    base = experiment
    shutil.copytree(base / "runs/a", base / "runs/a2")
    _ok(_run(base, "--preregister", "prereg-t.json", "--dev-run", "runs/b", "--dev-run", "runs/a2",
             "--rule", "paired-exact", "--metric", "acc"))
    path = base / "runs/a2/run.json"
    record = json.loads(path.read_text())
    record["summaries"]["official"]["acc"]["value"] = 1.0  # a better dev number, after pre-registering
    path.write_text(json.dumps(record))
    tickets = _tickets(base)
    done = _run(base, "--confirm", "prereg-t.json", "--cache", "cache", "--run-name", "conf-t")
    assert done.returncode == 1, done.stderr
    assert re.search(r"runs/a2/run.json: sha256 [0-9a-f]{12} is not the one the pre-registration names "
                     r"\([0-9a-f]{12}\): the dev record was changed or replaced after it was pre-registered", done.stderr)
    assert _tickets(base) == tickets and not (base / "runs/conf-t").exists()


def _mutations(raw: dict, rng: random.Random) -> list:
    """Generated edits of a valid pre-registration: each changes one leaf to another value of another kind or
    the same kind, so that the bytes (and any claim in them) differ from what was written."""
    leaves = []

    def walk(value, path):
        if isinstance(value, dict):
            for key in value:
                walk(value[key], path + [key])
        elif isinstance(value, list):
            for number, item in enumerate(value):
                walk(item, path + [number])
        else:
            leaves.append(path)
    walk(raw, [])
    chosen = rng.sample(leaves, min(24, len(leaves)))
    edits = []
    for path in chosen:
        value = raw
        for key in path:
            value = value[key]
        replacement = rng.choice([None, True, -1, 0.5, "x", [], {}, "embedded",
                                  value + 1 if type(value) in (int, float) else str(value) + "!"])
        edits.append((path, replacement))
    return edits


def test_generated_edits_of_a_preregistration_never_confirm(experiment, tmp_path, capsys):
    """Every edited pre-registration is refused (exit 1 or 2, one paragraph), none claims a ticket or scores."""
    base = experiment
    original = base / "prereg-g.json"
    if not original.exists():
        _ok(_run(base, "--preregister", "prereg-g.json", "--dev-run", "runs/a", "--dev-run", "runs/b",
                 "--rule", "paired-exact", "--metric", "acc"))
    raw = json.loads(original.read_text())
    tickets = _tickets(base)
    for number, (path, replacement) in enumerate(_mutations(raw, random.Random(33))):
        edited = json.loads(json.dumps(raw))
        target = edited
        for key in path[:-1]:
            target = target[key]
        if target[path[-1]] == replacement:
            continue
        target[path[-1]] = replacement
        forged = base / f"prereg-g{number}.json"
        forged.write_text(json.dumps(edited))
        code = run_main(["--lock", str(base / "study.lock.json"), "--confirm", str(forged), "--cache",
                         str(base / "cache"), "--out", str(tmp_path / f"c{number}"), "--private",
                         str(tmp_path / f"p{number}")])
        captured = capsys.readouterr()
        assert code in (1, 2), (path, replacement, captured.out, captured.err)
        assert captured.err.count("error:") == 1 and "Traceback" not in captured.err, captured.err
        assert not (tmp_path / f"c{number}").exists()
    assert _tickets(base) == tickets


@pytest.mark.parametrize("kind, metric, profiles, threshold, message", [
    ("better", "acc", ["a", "b"], None, "--rule 'better': expected one of exceeds, at-least, paired-exact."),
    ("paired-excludes-zero", "acc", ["a", "b"], None, "--rule paired-excludes-zero: retired, it decided on a Wald "
                                                      "interval, which held where the exact McNemar p on the same line "
                                                      "was 0.125 (discordant counts 0 and 4 at 64 rows): use "
                                                      "paired-exact (a pre-registration that names it is "
                                                      "pre-registered again)."),
    ("exceeds", "acc", ["a"], None, "--rule exceeds: expected dev runs of 2 different profile(s) (--dev-run), got "
                                    "['a']."),
    ("paired-exact", "mc2", ["a", "b"], None, "--rule paired-exact: a paired test needs a per-question right or "
                                              "wrong (acc, acc_norm); mc2 has none: use exceeds."),
    ("at-least", "acc", ["a"], None, "--threshold: required with --rule at-least."),
    ("exceeds", "acc", ["a", "b"], 0.5, "--threshold: only with --rule at-least."),
    ("at-least", "acc", ["a"], 1.5, "--threshold 1.5: expected a number from 0 to 1."),
])
def test_the_rule_vocabulary_refuses_what_it_cannot_state(kind, metric, profiles, threshold, message):
    with pytest.raises(InputError) as error:
        make_rule(kind, metric, profiles, threshold)
    assert str(error.value) == message


def _paired_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith("paired over "))


def test_a_study_of_three_shot_seeds_equals_compare_of_each_pair(experiment):
    base = experiment
    names = ["embedded-2shot", "embedded-2shot-seed2", "embedded-2shot-seed3"]
    out = _ok(_run(base, "--study", "seeds", *[w for n in names for w in ("--variant", n)], "--metric", "acc",
                   "--cache", "cache", "--run-name", "seeds"))
    study = json.loads((base / "runs/seeds/study.json").read_text())
    numbers = study["numbers"]
    assert [v["profile"] for v in study["variants"]] == names and numbers["base"] == names[0]
    assert [v["settings"] for v in study["variants"]] == [VARIANTS[n] for n in names]
    for name in names[1:]:
        paired = numbers["paired"][name]
        compared = run_script("audit.py", "--lock", "study.lock.json", "--compare", f"runs/seeds/{names[0]}",
                              f"runs/seeds/{name}", cwd=base)
        assert compared.returncode == 1, compared.stdout  # other settings, other scores: "different"
        low, high = paired["interval"]
        assert _paired_line(compared.stdout) == (
            f"paired over {paired['rows']} questions: right in both {paired['both_right']}, only A "
            f"{paired['base_only']}, only B {paired['variant_only']}, wrong in both {paired['both_wrong']}; accuracy "
            f"B - A = {paired['difference']:+.4f} (95% Bonett-Price interval {low:+.4f} to {high:+.4f}); exact McNemar p = "
            f"{paired['mcnemar_p']:.4g}")
        assert paired["mcnemar_p"] == mcnemar_exact(paired["base_only"], paired["variant_only"])
        assert f"  {name:<28} {numbers['values'][name]:.4f}; variant - base {paired['difference']:+.4f}" in out
    for question in numbers["questions"]:  # margins and correctness from the records' own scores
        for name in names:
            run = json.loads((base / f"runs/seeds/{name}/run.json").read_text())
            record = next(q for q in run["questions"] if q["idx"] == question["idx"])
            scores, label = record["scores"]["official"], record["label"]
            entry = question["variants"][name]
            assert entry["margin"] == scores[label] - max(s for i, s in enumerate(scores) if i != label)
            assert entry["correct"] is (record["predictions"]["official"]["acc"] == label)
    assert numbers["spread"]["range"] == max(numbers["values"].values()) - min(numbers["values"].values())
    assert "<svg" in (base / "runs/seeds/study.html").read_text()

    done = _audit(base, "--out", "runs/seeds", "--structural")
    assert done.returncode == 4 and "study: PASS" in done.stdout, done.stdout
    assert done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: every variant's audit found no problem but not "
                                  "everything was verified (see each variant), the study record was checked and its "
                                  "numbers re-derived from the variants' records; exit 4")
    record = json.loads((base / "runs/seeds/study.json").read_text())
    record["numbers"]["values"][names[2]] += 0.125  # a better number for one variant
    (base / "runs/seeds/study.json").write_text(json.dumps(record))
    done = _audit(base, "--out", "runs/seeds", "--structural")
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (study); exit 1"), done.stdout
    assert "study numbers: values (re-derived): expected {" in done.stdout


def test_the_shipped_study_lock_is_what_its_script_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_study_lock", REPO / "scripts" / "make_study_lock.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw = module.study_lock(json.loads((REPO / "resources.lock.json").read_text()))
    assert json.dumps(raw, indent=2, sort_keys=True) + "\n" == (REPO / "study.lock.json").read_text()
