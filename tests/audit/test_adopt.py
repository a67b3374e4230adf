"""Adopting a plain lm-eval run (issue 46): real `lm_eval` console runs on a tiny model over the embedded demo
data, adopted, tampered with and mutated; the adopted folder and bundle audited."""

import json
import os
import random
import subprocess

import pytest

from support.lm_eval_files import adopt_each, edit_sample, misbehaved, mutations, rehash
from support.paths import LOCK
from support.processes import kill_rank_one, launched, run_script
from support.plain_runs import adopt, ADOPT, audit, copy_sorted, ROWS

def test_a_plain_run_is_adopted_bit_for_bit_and_its_folder_and_bundle_pass(plain, tmp_path):
    done = adopt(plain, plain / "sorted", "--run-name", "plain", "--bundle", "--seed", "5", cwd=tmp_path)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert lines[0] == lines[-3] == ("VERDICT: PASS: every level passed and every scored row was rescored bit for "
                                     "bit; exit 0")
    assert "  rows: 16 bit for bit" in lines
    record = json.loads((tmp_path / "runs" / "plain" / "adopted.json").read_text())
    assert record["row_classes"]["bit for bit"] == ROWS and record["rederived"] == record["reported"]
    assert record["bound"]["basis"] == "derived from the dtype the run claims (float32)"
    public = (tmp_path / "runs" / "plain" / "lm_eval_samples.public.jsonl").read_text()
    sentences = [json.loads(line)["doc"]["sentence"] for line in
                 next((plain / "sorted").glob("*/samples_*.jsonl")).read_text().splitlines()]
    assert not any(sentence in public for sentence in sentences)
    for name in ("adopted.json", "lm_eval_results.json", "lm_eval_samples.public.jsonl"):
        assert str(plain) not in (tmp_path / "runs" / "plain" / name).read_text(), name
    done = audit(plain, "--out", "runs/plain", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("VERDICT: PASS"), done.stdout
    assert "adopted record: PASS" in done.stdout
    done = audit(plain, "--bundle-file", "results/plain.tar.gz", "--rescore", "3", "--seed", "2", cwd=tmp_path)
    assert done.returncode == 4 and done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: 13 of 16 rows not "
                                                           "rescored (--rescore 3)"), done.stdout
    # a rescored row's tokens (its bound's sqrt(tokens)) taken out of the record: held to the tokens derived here
    question = record["questions"][5]
    counts = question["candidate_token_counts"]
    question.update(context_length=None, candidate_token_counts=None, candidate_tokens_sha256=None)
    (tmp_path / "runs" / "plain" / "adopted.json").write_text(json.dumps(record))
    done = audit(plain, "--out", "runs/plain", "--structural", cwd=tmp_path)
    assert done.returncode == 1 and (f"row idx {question['idx']}: candidate_token_counts: expected {counts}, got "
                                     "None") in done.stdout, done.stdout


def test_a_structural_adoption_imports_no_torch_and_its_folder_is_rescored_by_the_audit(plain, tmp_path):
    """`adopt --structural` (a reviewer with the data but not the model) never imports torch: its record states the
    CPU only and that nothing was scored here (no float32 bits for an audit to hold); the folder's default audit
    rescores every row itself and PASSes."""
    import sys

    probe = ("import sys\nfrom sst2_audit.cli import main\nsys.argv = ['sst2-audit', 'adopt', {run!r}, '--lock', "
             "{lock!r}, '--profile', 'embedded', '--cache', {cache!r}, '--structural', '--run-name', 'free']\n"
             "code = main()\nprint('torch imported:', 'torch' in sys.modules)\nsys.exit(code)").format(run=str(plain / "sorted"), lock=str(plain / LOCK.name), cache=str(plain / "cache"))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 4 and done.stdout.splitlines()[-1] == "torch imported: False", done.stdout + done.stderr
    record = json.loads((tmp_path / "runs" / "free" / "adopted.json").read_text())
    assert (record["platform"]["scored"], record["bits_required"]) == ("nothing: no model was loaded here", False)
    assert "probe_sha256" not in record["platform"] and record["row_classes"]["not drawn"] == ROWS
    # lm-eval logs no tokens and nothing was rescored: none derived (the verdict says so), none recorded
    assert ("  prompts not tokenized: lm-eval logs no tokens, and only a rescore reads them (each input's length "
            "against max_length and the context/continuation boundary are checked where rows are rescored)") \
        in done.stdout.splitlines()
    assert {(q["context_length"], q["candidate_token_counts"], q["candidate_tokens_sha256"])
            for q in record["questions"]} == {(None, None, None)}
    done = audit(plain, "--out", "runs/free", "--seed", "2", cwd=tmp_path)
    assert done.returncode == 0 and "adopted record: PASS" in done.stdout, done.stdout
    # tokens the record claims for a row nobody rescored are held to the tokens derived here
    claimed = dict(record, questions=[dict(q) for q in record["questions"]])
    claimed["questions"][6]["context_length"] = 1
    (tmp_path / "runs" / "free" / "adopted.json").write_text(json.dumps(claimed))
    done = audit(plain, "--out", "runs/free", "--structural", cwd=tmp_path)
    assert done.returncode == 1 and (f"row idx {record['questions'][6]['idx']}: context_length: expected "
                                     in done.stdout), done.stdout
    # a record that calls a row it never rescored "bit for bit" (its counts made to agree) is not what was found
    record["questions"][3]["row_class"] = "bit for bit"
    record["row_classes"].update({"bit for bit": 1, "not drawn": ROWS - 1})
    (tmp_path / "runs" / "free" / "adopted.json").write_text(json.dumps(record))
    done = audit(plain, "--out", "runs/free", "--seed", "2", cwd=tmp_path)
    assert done.returncode == 1 and (f"row idx {record['questions'][3]['idx']}: row_class (a row the adoption did "
                                     "not rescore): expected 'not drawn', got 'bit for bit'") in done.stdout, done.stdout


def test_unsorted_ids_are_caught_row_by_row_as_mislabelled(plain, tmp_path):
    done = adopt(plain, plain / "unsorted", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (identity); exit 1"), done.stdout
    ids = json.loads((plain / "ids.json").read_text())
    logged = [json.loads(line)["doc_id"] for line in
              next((plain / "unsorted").glob("*/samples_*.jsonl")).read_text().splitlines()]
    named = [line for line in done.stdout.splitlines() if "(mislabelled: lm-eval #4084)" in line]
    # lm-eval pairs the k-th document in dataset order with the k-th id as given: doc_id ids[k] holds sorted(ids)[k]
    truth = dict(zip(ids, sorted(ids)))
    wrong = [idx for idx in logged if truth[idx] != idx]
    assert len(wrong) >= 8 and len(named) == len(wrong)
    for idx in wrong:
        assert f"  logged doc_id {idx} holds the doc of row idx [{truth[idx]}] (mislabelled: lm-eval #4084)" in named
    assert not (tmp_path / "runs").exists()  # a failed adoption writes nothing


def test_a_bfloat16_run_is_held_to_the_derived_bound_with_its_flips_listed(plain, tmp_path):
    done = adopt(plain, plain / "bf16", "--run-name", "bf16", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: SCORES WITHIN DRIFT, NOT BIT FOR BIT: 16 rescored row(s) within the "
                                  "bound |logged - rescored| <= 0.0078125 * |rescored| + 1.038 * sqrt(tokens), a margin's "
                                  "drift <= 0.0078125 * (|a| + |b|) + 0.302 * sqrt(tokens) (derived from the dtype the "
                                  "run claims (bfloat16), fitted to measured honest drift x2)"), \
        done.stdout
    record = json.loads((tmp_path / "runs" / "bf16" / "adopted.json").read_text())
    flips = [q for q in record["questions"] if q["row_class"] == "prediction flip"]
    assert record["row_classes"]["within the bound"] + len(flips) == ROWS
    assert f"{len(flips)} of them prediction flips at near ties" in done.stdout.splitlines()[0]
    for question in flips:
        assert any(line.startswith(f"  flip: row idx {question['idx']} (acc): logged predicts ")
                   for line in done.stdout.splitlines())
    done = adopt(plain, plain / "bf16", "--bound", "1e-6", "--run-name", "strict", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (rescore (all rows, seed ")
    assert "beyond the bound" in done.stdout and not (tmp_path / "runs" / "strict").exists()


TAMPERING = {
    # every candidate moved alike: the prediction, the per-document acc and the results stay as they were
    "score": (lambda r: [resp[0].__setitem__(0, str(float(resp[0][0]) + 0.5)) for resp in r["resps"]],
              "rescore (all rows, seed 1)", "row idx {idx}: logged scores"),
    "doc_id": (lambda r: r.__setitem__("doc_id", r["doc_id"] + 1), "identity",
               "logged doc_id {idx} holds the doc of row idx [{moved}] (mislabelled: lm-eval #4084)"),
    "context": (lambda r: r["arguments"]["gen_args_1"].__setitem__("arg_0", "Forged context\nAnswer:"), "identity",
                "doc_id {idx}: arguments (sha256 of each context and continuation)"),
}


@pytest.mark.parametrize("what", sorted(TAMPERING))
def test_a_tampered_sample_is_caught_with_its_row_named(plain, tmp_path, what):
    results, samples = copy_sorted(plain, tmp_path / "out")
    change, level, named = TAMPERING[what]
    if what == "score":  # the filtered copy follows: only the rescore can tell
        def change(r, base=change):
            base(r)
            r["filtered_resps"] = [resp[0] for resp in r["resps"]]
    idx = edit_sample(samples, 3, change)
    if what != "context":  # lm-eval's task hash would name the edit at once: keep it consistent, as a forger would
        rehash(results, samples)
    done = adopt(plain, tmp_path / "out", "--seed", "1", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith(f"VERDICT: FAIL ({level}); exit 1"), done.stdout
    assert named.format(idx=idx, moved=idx - 1) in done.stdout


def test_the_results_number_is_re_derived_from_the_samples(plain, tmp_path):
    results, _ = copy_sorted(plain, tmp_path / "out")
    raw = json.loads(results.read_text())
    raw["results"]["sst2"]["acc,none"] += 0.0625  # one more right answer of 16
    results.write_text(json.dumps(raw))
    done = adopt(plain, tmp_path / "out", cwd=tmp_path)
    assert done.returncode == 1 and done.stdout.startswith("VERDICT: FAIL (arithmetic); exit 1"), done.stdout
    assert "results: acc,none: expected " in done.stdout


@pytest.mark.parametrize("name", ["tokenizer.json", "tokenizer_config.json"])
def test_a_changed_tokenizer_file_in_the_reviewer_s_cache_is_exit_1_before_it_is_read(plain, tmp_path, name):
    """The identity level loads the cache's tokenizer: its files are hashed first, with the data, in every adoption
    (a structural one loads no weights, and once loaded it held a changed tokenizer_config.json: exit 4), and in the
    audit of an adopted folder; the file is named and nothing is written."""
    import shutil

    adopted = adopt(plain, plain / "sorted", "--run-name", "kept", "--structural", cwd=tmp_path)
    assert adopted.returncode == 4, adopted.stdout + adopted.stderr
    cache = shutil.copytree(plain / "cache", tmp_path / "cache")  # copies: the store's files stay untouched
    path = cache / "model" / name
    path.write_bytes(path.read_bytes().replace(b"}", b" }", 1))  # one byte more, the JSON still valid
    common = ("--lock", plain / LOCK.name, "--cache", cache)
    for args in ((plain / "sorted", "--profile", "embedded", "--structural", "--run-name", "a"),
                 (plain / "sorted", "--profile", "embedded", "--run-name", "b")):
        done = run_script(ADOPT, "adopt", *args, *common, cwd=tmp_path)
        assert done.returncode == 1 and f"model/{name}: expected sha256 " in done.stderr, done.stdout + done.stderr
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == ["kept"]
    done = run_script(ADOPT, "audit", "--out", tmp_path / "runs" / "kept", "--structural", *common, cwd=tmp_path)
    assert done.returncode == 1 and f"model/{name}: expected sha256 " in done.stderr, done.stdout + done.stderr


def test_generated_mutations_of_the_files_never_pass(plain, tmp_path):
    """220 mutations (bytes, values, lines) of lm-eval's two files: each exit 1 or 2, one paragraph, none PASS."""
    cases = mutations(plain / "sorted", tmp_path, random.Random(46), 220)
    codes = adopt_each(cases, plain / "resources.lock.json", plain / "cache", tmp_path)
    assert len(codes) == 220
    assert misbehaved(codes) == {}
    assert {found["code"] for found in codes.values()} == {1, 2}


@pytest.mark.slow
def test_two_processes_under_torchrun_adopt_the_run_with_the_one_process_records(plain, tmp_path):
    """`torchrun --standalone --nproc-per-node 2 sst2-audit adopt ...` (torch.distributed, gloo on this CPU): each
    process rescores every second row, rank 0 gathers, prints and writes; adopted.json equals the one-process
    adoption's apart from timings, the process count and the threads each process took."""
    one = adopt(plain, plain / "sorted", "--run-name", "one", "--seed", "3", cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    two = launched("adopt", plain / "sorted", "--lock", plain / LOCK.name, "--profile", "embedded", "--cache",
                   plain / "cache", "--run-name", "two", "--seed", "3", cwd=tmp_path)
    assert two.returncode == 0, two.stdout + two.stderr
    assert two.stdout.count("VERDICT: PASS") == 2, two.stdout  # first and last line, once: rank 0 alone reports
    assert "[rescore: 16 rows on the independent path (8 in each of 2 processes)] done in " in two.stderr
    records = [json.loads((tmp_path / "runs" / name / "adopted.json").read_text()) for name in ("one", "two")]
    assert [r["rescore"]["processes"] for r in records] == [1, 2]
    cores = len(os.sched_getaffinity(0))  # the lock's threads 0: the cores this process may run on, shared
    assert [r["platform"].pop("threads") for r in records] == [cores, max(1, cores // 2)]
    for record in records:
        for key in ("timings", "rescore", "run_name"):
            record.pop(key)
    assert records[0] == records[1]


def test_a_process_that_dies_fails_the_adoption_and_nothing_is_written(plain, tmp_path):
    """Rank 1 killed (SIGKILL) as soon as torchrun started it: the launcher ends the group, exit non-zero, and no
    adopted folder exists (rank 0 writes only after every share was gathered)."""
    launcher = launched("adopt", plain / "sorted", "--lock", plain / LOCK.name, "--profile", "embedded", "--cache",
                        plain / "cache", "--run-name", "dies", cwd=tmp_path, wait=False)
    killed = kill_rank_one(launcher)
    out, err = launcher.communicate(timeout=300)
    assert killed is not None, out + err
    assert launcher.returncode != 0 and "VERDICT: PASS" not in out, out + err
    assert not (tmp_path / "runs").exists()


def test_the_record_and_bundle_of_a_task_of_many_rows_are_read_back(plain, embedded_cache, tmp_path):
    """An adoption's record grows about 0.7 KB a row: one of 30,000 rows (a task like GLUE's qqp) is more than the
    16 MiB a run's record may be, and was refused by the tool that wrote it, then by the bundle's reader (a bundle
    was checked in memory whole): an adopted bundle is read as a stream now, each member written as it comes, so
    its limits are the adopted folder's. --bundle still refuses, exit 2, to pack one the reader would refuse."""
    from sst2_audit.bundle import adopted as adopted_bundle
    from sst2_audit.bundle.reading import Limits, read_members
    from sst2_audit.formats.adopted_read import read_adopted
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.util.errors import CheckFailed, InputError

    done = adopt(plain, plain / "sorted", "--run-name", "many", "--structural", cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    folder = tmp_path / "runs" / "many"
    record = json.loads((folder / "adopted.json").read_text())
    record["questions"] += [dict(record["questions"][n % ROWS], idx=1000 + n) for n in range(30_000)]
    (folder / "adopted.json").write_text(json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    assert (folder / "adopted.json").stat().st_size > 16 << 20
    assert len(read_adopted(folder / "adopted.json").questions) == ROWS + 30_000
    files = {name: (folder / name).read_bytes() for name in adopted_bundle.public_files(os.listdir(folder))}
    lock = load_lock(plain / LOCK.name)
    bundle = adopted_bundle.pack(folder, files, "many", lock, plain / "cache", tmp_path / "results")
    unpacked, checks = adopted_bundle.unpack_verified(bundle, tmp_path / "scratch")
    assert checks == 7 and sorted(os.listdir(unpacked)) == sorted([*files, "SHA256SUMS", "resources.lock.json",
                                                                              "manifest.json"])
    assert all((unpacked / name).read_bytes() == body for name, body in files.items())
    assert len(read_adopted(unpacked / "adopted.json").questions) == ROWS + 30_000
    tight = Limits(bundle_bytes=8 << 20, unpacked_bytes=32 << 20, member_bytes=16 << 20, members=16)
    with pytest.raises(InputError, match=r"its bundle would be \d+ bytes packed, .* nothing packed: hand over the "
                                         r"adopted folder instead"):
        adopted_bundle._readable(adopted_bundle._contents(files, lock, plain / "cache"), "many", tight, folder)
    # a member over the reader's limit is refused from its header, and nothing it wrote is left
    small = Limits(bundle_bytes=64 << 20, unpacked_bytes=64 << 20, member_bytes=16 << 20, members=16)
    with pytest.raises(CheckFailed, match=r"adopted.json. is \d+ bytes \(limit 16777216\)"):
        read_members(bundle, small, tmp_path / "refused")
    assert not (tmp_path / "refused").exists()
