"""A lighteval run adopted (issue 62): tests/data/lighteval-0.13.0 and lighteval-0.10.0 are real lighteval runs (the
0.11+ schema and the flat one before it) of the embedded model on the embedded profile's demo data, 16 rows of
--max-samples, made by scripts/make_lighteval_run.py with the lock's numeric mode, dtype and attention. Adopted
rescored (PASS: bit for bit, 0.13.0 at the 10 digits it logs), model-free (exit 4), against the shipped lock's sealed
rows (exit 4), tampered with row by row, and mutated."""

import json
import random
import shutil
from pathlib import Path

import pytest

from sst2_audit.audit.adopt_lighteval import as_logged, mean_and_stderr, row_rule
from sst2_audit.formats.lighteval_details import read_details
from sst2_audit.util.errors import InputError
from support.lm_eval_files import adopt_each, misbehaved
from support.paths import LOCK, REPO, VENV_BIN
from support.processes import launched, run_script

RUNS = {"0.13.0": REPO / "tests" / "data" / "lighteval-0.13.0", "0.10.0": REPO / "tests" / "data" / "lighteval-0.10.0"}
ADOPT = str(VENV_BIN / "sst2-audit")


def adopt(run: Path, cache: Path, *args, cwd: Path, lock: Path = LOCK):
    return run_script(ADOPT, "adopt", run, "--lock", lock, "--profile", "embedded", "--cache", cache, *args, cwd=cwd)


@pytest.fixture(scope="module")
def open_lock(tmp_path_factory) -> Path:
    """The shipped lock with no sealed rows (lighteval's 16 rows hold 5 of the shipped lock's sealed rows)."""
    raw = json.loads(LOCK.read_text())
    raw["split"]["confirm_rows"] = 0
    lock = tmp_path_factory.mktemp("open-lock") / "open.lock.json"
    lock.write_text(json.dumps(raw, indent=2))
    return lock


def details(run: Path) -> Path:
    return next(run.glob("details/model/*/*.parquet"))


def results(run: Path) -> Path:
    return next(run.glob("results/model/results_*.json"))


def rows_of(run: Path) -> list:
    import pyarrow.parquet as parquet

    return parquet.read_table(details(run)).to_pylist()


def write_rows(run: Path, rows: list) -> None:
    import pyarrow
    import pyarrow.parquet as parquet

    schema = parquet.read_schema(details(run))
    parquet.write_table(pyarrow.Table.from_pylist(rows, schema=schema), details(run))


def copy(release: str, target: Path) -> Path:
    shutil.copytree(RUNS[release], target)
    return target


def audit(target: Path, cache: Path, *args, cwd: Path, lock: Path):
    how = "--bundle-file" if target.is_file() else "--out"
    return run_script(ADOPT, "audit", how, target, "--lock", lock, "--cache", cache, *args, cwd=cwd)


@pytest.mark.parametrize("release, verdict", [
    ("0.13.0", "VERDICT: PASS: every level passed and every scored row was rescored, equal at the 10 digits "
               "lighteval logs; exit 0"),
    ("0.10.0", "VERDICT: PASS: every level passed and every scored row was rescored bit for bit; exit 0")])
def test_a_lighteval_run_is_rescored_kept_and_audited(embedded_cache, open_lock, tmp_path, release, verdict):
    """Adopted rescored (PASS), kept as a folder and a bundle (adopted.json beside lighteval's results file and the
    details' digests, no data text), and the folder and the bundle audited back to the same PASS."""
    done = adopt(RUNS[release], embedded_cache, "--seed", "5", "--run-name", "kept", "--bundle", lock=open_lock,
                 cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[:2] == [verdict, "sst2 acc: reported 0.562 (their scores) / rescored 0.562 (yours, 16 rows)"]
    claims = 4 if release == "0.13.0" else 5  # before 0.11: the row count too (no doc id to name the rows)
    for line in (f"claims: PASS ({claims} checks)", "identity: PASS (80 checks)", "arithmetic: PASS (18 checks)",
                 "rescore (all rows, seed 5): PASS (16 checks)", "  rows: 16 bit for bit",
                 "  rows: 16 of 264, lighteval's row rule: the split shuffled by random.Random(42), the first 16, in "
                 "that order (max_samples 16)", "bundle: results/kept.tar.gz"):
        assert line in lines, line
    kept = tmp_path / "runs" / "kept"
    assert sorted(path.name for path in kept.iterdir()) == ["adopted.json", "lighteval_details.public.jsonl",
                                                            "lighteval_results.json"]
    record = json.loads((kept / "adopted.json").read_text())
    assert (record["source"]["writer"], record["claims"]["lighteval_task"], record["row_classes"]["bit for bit"]) == \
        ("lighteval", "sst2demo|0" if release == "0.13.0" else "custom|sst2demo|0", 16)
    rows = [json.loads(line) for line in (kept / "lighteval_details.public.jsonl").read_text().splitlines()]
    assert [row["doc_id"] for row in rows] == (row_rule(264, 16) if release == "0.13.0" else [None] * 16)
    assert "Question" not in (kept / "lighteval_details.public.jsonl").read_text()  # digests, no text
    for target in (kept, tmp_path / "results" / "kept.tar.gz"):
        again = audit(target, embedded_cache, "--seed", "5", lock=open_lock, cwd=tmp_path)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
        assert again.stdout.splitlines()[0] == verdict and "adopted record: PASS (" in again.stdout
    assert "bundle SHA256SUMS and members: PASS (7 checks)" in again.stdout


def _edit_record(folder: Path, change) -> None:
    record = json.loads((folder / "adopted.json").read_text())
    change(record)
    (folder / "adopted.json").write_text(json.dumps(record, indent=2))


def _edit_rows(folder: Path, change) -> None:
    path = folder / "lighteval_details.public.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    change(rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def _score_moved(rows: list) -> None:
    rows[0]["scores"][1] -= 0.5  # the argmax stays: only a rescore sees it


EDITS = {  # what a submitter edits in an adopted lighteval folder, and what the audit says (exit 1)
    "writer": (lambda f: _edit_record(f, lambda r: r["source"].pop("writer")), (),
               "  - adopted.json: source.writer (whose files the public copy holds): expected 'lighteval', got None"),
    "reported": (lambda f: _edit_record(f, lambda r: r["reported"].update(acc=0.625)), (),
                 "  - adopted.json: reported: expected "),
    "doc_id": (lambda f: _edit_rows(f, lambda rows: rows[1].update(doc_id=0)), (),
               "  - doc_id 0: at row 1 of the details, where lighteval's row rule"),
    "score": (lambda f: _edit_rows(f, _score_moved), ("--seed", "1"), "  - row idx 111: logged scores "),
}


def test_an_edited_adopted_lighteval_folder_fails(embedded_cache, open_lock, tmp_path):
    """A structural adoption kept, then edited as a submitter would: the record's writer or reported number, a row's
    doc id or score in the public copy; each audit exit 1 naming it (the score by the audit's own rescore: a row the
    adoption did not rescore is held by the audit's). Unedited, the default audit rescores it to PASS."""
    done = adopt(RUNS["0.13.0"], embedded_cache, "--structural", "--run-name", "kept", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]
    kept = tmp_path / "runs" / "kept"
    honest = audit(kept, embedded_cache, "--seed", "1", lock=open_lock, cwd=tmp_path)
    assert honest.returncode == 0, honest.stdout[-3000:]
    for name, (edit, args, said) in EDITS.items():
        folder = shutil.copytree(kept, tmp_path / name)
        edit(folder)
        found = audit(folder, embedded_cache, *(args or ("--structural",)), lock=open_lock, cwd=tmp_path)
        assert found.returncode == 1 and said in found.stdout, (name, found.stdout[-3000:], found.stderr[-2000:])


def test_model_free_and_sealed_rows_say_what_was_not_verified(embedded_cache, open_lock, tmp_path):
    done = adopt(RUNS["0.13.0"], embedded_cache, "--structural", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-2000:]
    assert done.stdout.startswith("VERDICT: SCORES NOT VERIFIED: none of the 16 logged rows was rescored "
                                  "(--structural); exit 4\nsst2 acc: reported 0.562 (their scores) / not rescored here")
    sealed = adopt(RUNS["0.10.0"], embedded_cache, "--seed", "3", "--run-name", "sealed",
                   cwd=tmp_path)  # the shipped lock: 128 sealed rows
    assert sealed.returncode == 4, sealed.stdout[-2000:]
    assert sealed.stdout.startswith("VERDICT: SCORES NOT VERIFIED: 5 logged rows are sealed confirmation rows of the "
                                    "lock, never rescored here (ids [5, 221, 223, 241, 257]); exit 4\nsst2 acc: "
                                    "reported 0.562 (their scores) / rescored 0.545 (yours, 11 rows)")
    assert "rescore (all rows, seed 3): PASS (11 checks)" in sealed.stdout
    assert "  rows: 11 bit for bit, 5 sealed" in sealed.stdout


def test_the_row_rule_and_the_aggregates_are_lightevals_own():
    assert row_rule(264, 16) == [111, 257, 241, 175, 5, 221, 245, 223, 9, 123, 235, 51, 263, 218, 197, 234]
    assert sorted(row_rule(7, None)) == list(range(7))
    assert mean_and_stderr([1.0] * 9 + [0.0] * 7) == (0.5625, 0.128086884574495)
    assert as_logged(-4.681996345520020) == -4.6819963455 and as_logged(-5.080164909362793) == -5.0801649094


def _stale_prompt(rows: list, flat: bool) -> int:
    at = 3
    if flat:
        rows[at]["full_prompt"] = rows[at]["full_prompt"].replace("Question:", "Question :")
    else:
        rows[at]["doc"]["query"] = rows[at]["doc"]["query"].replace("Question:", "Question :")
    return at


def _few_shot_leak(rows: list, flat: bool) -> int:
    """The row's own sentence and answer put in front of its prompt, as a leaked shot."""
    at = 5
    key = ("full_prompt",) if flat else ("doc", "query")
    holder = rows[at] if flat else rows[at]["doc"]
    prompt = holder[key[-1]]
    holder[key[-1]] = prompt + " negative\n\n" + prompt
    return at


def _gold_flipped(rows: list, flat: bool) -> int:
    at = 7
    if flat:
        rows[at]["gold_index"] = [1 - rows[at]["gold_index"][0]]
    else:
        rows[at]["doc"]["gold_index"] = 1 - rows[at]["doc"]["gold_index"]
    return at


@pytest.mark.parametrize("release", ["0.13.0", "0.10.0"])
@pytest.mark.parametrize("tamper, field", [(_stale_prompt, "query (sha256 of the scored context)"),
                                           (_few_shot_leak, "query (sha256 of the scored context)"),
                                           (_gold_flipped, "gold_index")])
def test_a_tampered_row_is_named(embedded_cache, open_lock, tmp_path, release, tamper, field):
    run = copy(release, tmp_path / "run")
    rows = rows_of(run)
    at = tamper(rows, release == "0.10.0")
    write_rows(run, rows)
    done = adopt(run, embedded_cache, "--structural", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    idx = row_rule(264, 16)[at]
    assert f"  - doc_id {idx}: {field}: expected " in done.stdout


@pytest.mark.parametrize("release", ["0.13.0", "0.10.0"])
def test_a_mislabelled_or_duplicated_row_is_named(embedded_cache, open_lock, tmp_path, release):
    run = copy(release, tmp_path / "run")
    rows = rows_of(run)
    rows[2] = json.loads(json.dumps(rows[1]))  # row 1 logged twice, row 2's doc gone
    write_rows(run, rows)
    done = adopt(run, embedded_cache, "--structural", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    if release == "0.13.0":  # the doc id is logged: the row rule names the position
        assert "  - doc_id 257: at row 2 of the details, where lighteval's row rule: the split shuffled by " \
               "random.Random(42), the first 16, in that order puts row idx 241" in done.stdout
    else:  # no doc id: the row the rule names there is not the logged one
        assert "  - doc_id 241: query (sha256 of the scored context): expected " in done.stdout


@pytest.mark.parametrize("release", ["0.13.0", "0.10.0"])
def test_an_edited_aggregate_is_re_derived_from_the_rows(embedded_cache, open_lock, tmp_path, release):
    run = copy(release, tmp_path / "run")
    raw = json.loads(results(run).read_text())
    task = next(key for key in raw["results"] if key != "all")
    raw["results"][task]["acc"] = 0.625
    results(run).write_text(json.dumps(raw, indent=2))
    done = adopt(run, embedded_cache, "--structural", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    assert f"  - results: results.{task}.acc: expected 0.5625, got 0.625" in done.stdout


def test_a_score_moved_is_caught_by_the_rescore(embedded_cache, open_lock, tmp_path):
    run = copy("0.13.0", tmp_path / "run")
    rows = rows_of(run)
    honest = list(rows[0]["model_response"]["logprobs"])
    rows[0]["model_response"]["logprobs"][1] -= 0.5  # the argmax stays: only the rescore sees it
    write_rows(run, rows)
    done = adopt(run, embedded_cache, "--seed", "1", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    assert (f"  - row idx 111: logged scores {rows[0]['model_response']['logprobs']!r}, rescored here {honest!r}: "
            "0.5 apart, beyond the bound") in done.stdout


def _mutated(rows: list, flat: bool, rng: random.Random) -> list:
    rows = json.loads(json.dumps(rows))
    at = rng.randrange(len(rows))
    row = rows[at]
    kind = rng.choice(("drop", "double", "swap", "value"))
    if kind == "drop":
        return rows[:at] + rows[at + 1:]
    if kind == "double":
        return rows[:at] + [row] + rows[at:]
    if kind == "swap":
        other = (at + rng.randrange(1, len(rows))) % len(rows)
        rows[at], rows[other] = rows[other], rows[at]
        return rows
    doc = row if flat else row["doc"]
    response = row if flat else row["model_response"]
    metric = row["metrics" if flat else "metric"]
    field = rng.choice(("prompt", "choice", "gold", "metric", "input", "continuation", "id"))
    if field == "prompt":
        key = "full_prompt" if flat else "query"
        text = doc[key]
        spot = rng.randrange(len(text))
        doc[key] = text[:spot] + rng.choice("xQ \n") + text[spot + 1:]
    elif field == "choice":
        doc["choices"][rng.randrange(2)] = rng.choice((" Negative", " pos", "negative"))
    elif field == "gold":
        doc["gold_index"] = [1 - doc["gold_index"][0]] if flat else 1 - doc["gold_index"]
    elif field == "metric":
        metric["acc"] = 1 - metric["acc"]
    elif field == "input":
        tokens = response["input_tokens"][0] if flat else response["input_tokens"]
        tokens[rng.randrange(len(tokens))] += rng.choice((1, -1, 7))
    elif field == "continuation":
        tokens = response["cont_tokens" if flat else "output_tokens"][0]
        tokens[0] += 1
    elif flat:
        row["padded"][0] += 1
    else:
        doc["id"] = str(int(doc["id"]) + rng.choice((1, -1, 1000)))
    return rows


@pytest.mark.slow
def test_generated_mutations_of_lighteval_runs_never_pass(embedded_cache, open_lock, tmp_path):
    """210 mutations of the two real runs (rows dropped, doubled, swapped; a prompt, choice, gold index, metric,
    input or continuation token, doc id or padding changed; a results number), model-free (each changes something
    the levels check without the model), and a bit of the parquet file flipped, rescored: each exit 1 or 2, no
    traceback; a flipped bit passes only where what the audit reads is unchanged."""
    rng, cases = random.Random(620), {}
    for number in range(210):
        release = ("0.13.0", "0.10.0")[number % 2]
        run = copy(release, tmp_path / f"m{number}")
        if number % 7 == 0:  # a bit of the parquet file: pyarrow's error, or a value the levels check, or none
            data = bytearray(details(run).read_bytes())
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            details(run).write_bytes(bytes(data))
            kind = "bit"  # rescored: a flipped bit in a log-likelihood is the rescore's to find
        elif number % 7 == 1:
            raw = json.loads(results(run).read_text())
            task = next(key for key in raw["results"] if key != "all")
            raw["results"][task][rng.choice(("acc", "acc_stderr"))] += rng.choice((0.0625, -1e-12))
            results(run).write_text(json.dumps(raw))
            kind = "results"
        else:
            original = rows_of(run)
            mutated = original
            while mutated == original:  # a character replaced by itself is no mutation
                mutated = _mutated(original, release == "0.10.0", rng)
            write_rows(run, mutated)
            kind = "rows"
        cases[f"{run}" if kind == "bit" else f"{run}@structural"] = kind
    codes = adopt_each(list(cases), open_lock, embedded_cache, tmp_path)
    assert len(codes) == 210 and misbehaved(codes, lambda case: (0, 1, 2) if cases[case] == "bit" else (1, 2)) == {}
    for case in (case for case, found in codes.items() if found["code"] == 0):  # parquet holds no checksum: a bit
        release = ("0.13.0", "0.10.0")[int(Path(case).name[1:]) % 2]  # of what no level reads changes nothing read
        assert read_details(details(Path(case)))[0] == read_details(details(RUNS[release]))[0], case
    assert {found["code"] for found in codes.values()} >= {1, 2}


def test_a_corpus_of_lighteval_runs_takes_the_profile_they_are_held_to(embedded_cache, open_lock, tmp_path):
    folder = tmp_path / "details"
    for release, run in RUNS.items():
        shutil.copytree(run, folder / f"lighteval-{release}")
    common = ("--lock", open_lock, "--cache", embedded_cache, "--structural")
    refused = run_script(ADOPT, "corpus", folder, *common, "--out", tmp_path / "c1", cwd=tmp_path)
    assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]
    corpus = json.loads((tmp_path / "c1" / "corpus.json").read_text())
    assert corpus["lighteval_profile"] is None
    assert [(run["exit_code"], run["adopted"]) for run in corpus["runs"]] == [(2, None), (2, None)]
    assert all("with --profile NAME (adopt or corpus)" in run["reason"] for run in corpus["runs"])
    held = run_script(ADOPT, "corpus", folder, *common, "--profile", "embedded", "--out", tmp_path / "c2",
                      cwd=tmp_path)
    assert held.returncode == 4, held.stdout[-2000:] + held.stderr[-2000:]
    corpus = json.loads((tmp_path / "c2" / "corpus.json").read_text())
    assert corpus["lighteval_profile"] == "embedded"
    assert [(run["exit_code"], run["verdict"]) for run in corpus["runs"]] == [(4, "SCORES NOT VERIFIED")] * 2
    for run in corpus["runs"]:  # each kept as its adopted folder, which the audit reads as any
        assert (tmp_path / "c2" / run["adopted"] / "lighteval_details.public.jsonl").is_file(), run
    assert [run["numbers"][0]["reported"] for run in corpus["runs"]] == [0.5625, 0.5625]
    mixed = run_script(ADOPT, "corpus", folder, *common, "--out", tmp_path / "c2", cwd=tmp_path)
    assert mixed.returncode == 2 and "Choose another --out: a corpus's entries are never mixed." in mixed.stderr


def _public_mutation(files: dict, rng: random.Random) -> dict:
    """One generated change of a public copy: a byte, a line dropped or doubled, a field's value retyped or dropped,
    an unknown field, or a results value."""
    files = dict(files)
    name = rng.choice(sorted(files))
    body = files[name]
    kind = rng.choice(("byte", "line", "value", "drop", "extra")) if name.endswith(".jsonl") else \
        rng.choice(("byte", "value"))
    if kind == "byte":
        data = bytearray(body)
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        files[name] = bytes(data)
        return files
    if name.endswith(".jsonl"):
        lines = body.decode().splitlines(keepends=True)
        at = rng.randrange(len(lines))
        if kind == "line":
            lines = lines[:at] + lines[at + 1:] if rng.random() < 0.5 else lines[:at] + [lines[at]] + lines[at:]
        else:
            row = json.loads(lines[at])
            field = rng.choice(sorted(row))
            if kind == "drop":
                row.pop(field)
            elif kind == "extra":
                row["text"] = "a sentence"
            else:
                row[field] = rng.choice((None, "x", 1, 1.5, True, [], {}, [None], ["x"], "1e999"))
            lines[at] = json.dumps(row) + "\n"
        files[name] = "".join(lines).encode()
        return files
    raw = json.loads(body)
    task = next(key for key in raw["results"] if key != "all")
    raw["results"][task][rng.choice(("acc", "acc_stderr"))] = rng.choice((None, "0.5", 1, float("nan")))
    files[name] = json.dumps(raw).encode()
    return files


def test_generated_mutations_of_an_adopted_copy_are_read_or_refused(tmp_path):
    """The public copy of each real run reads back to the rows it was written from; 240 generated mutations of it
    are each refused (exit 2's InputError naming the file) or read as what they now say, never another error (the
    levels then hold what is read, as tests above show for edited rows)."""
    from sst2_audit.formats.lighteval_details import public_copy, read_public, read_run
    from sst2_audit.util.errors import InputError

    rng, refused = random.Random(621), 0
    for number in range(240):
        output = read_run(RUNS[("0.13.0", "0.10.0")[number % 2]], None)
        files = public_copy(output)
        if number < 2:  # the copy as written reads back to the rows it came from
            folder = tmp_path / f"copy{number}"
            folder.mkdir()
            for name, body in files.items():
                (folder / name).write_bytes(body)
            again = read_public(folder, None)
            assert (again.samples, again.flat, again.claims) == (output.samples, output.flat, output.claims)
        folder = tmp_path / f"m{number}"
        folder.mkdir()
        for name, body in _public_mutation(files, rng).items():
            (folder / name).write_bytes(body)
        try:
            read_public(folder, "sst2demo|0")
        except InputError as error:
            refused += 1
            assert str(folder) in str(error), str(error)
    assert 120 < refused < 240



def test_two_processes_under_torchrun_adopt_a_lighteval_run_with_the_one_process_record(embedded_cache, open_lock,
                                                                                        tmp_path):
    """`torchrun --standalone --nproc-per-node 2 sst2-audit adopt LIGHTEVAL-OUT --profile ...` (gloo on this CPU):
    each process rescores every second row, rank 0 reports and writes; adopted.json equals the one-process record's
    apart from timings, the process count and the threads each process took."""
    one = adopt(RUNS["0.13.0"], embedded_cache, "--run-name", "one", "--seed", "3", lock=open_lock, cwd=tmp_path)
    assert one.returncode == 0, one.stdout + one.stderr
    two = launched("adopt", RUNS["0.13.0"], "--lock", open_lock, "--profile", "embedded", "--cache", embedded_cache,
                   "--run-name", "two", "--seed", "3", cwd=tmp_path)
    assert two.returncode == 0, two.stdout + two.stderr
    assert two.stdout.count("VERDICT: PASS") == 2, two.stdout  # first and last line, once: rank 0 alone reports
    assert "[rescore: 16 rows on the independent path (8 in each of 2 processes)] done in " in two.stderr
    records = [json.loads((tmp_path / "runs" / name / "adopted.json").read_text()) for name in ("one", "two")]
    assert [r["rescore"]["processes"] for r in records] == [1, 2]
    for record in records:
        for key in ("timings", "rescore", "run_name"):
            record.pop(key)
        record["platform"].pop("threads")
    assert records[0] == records[1]


def test_every_field_of_an_adopted_lighteval_record_is_held_or_descriptive(embedded_cache, open_lock, tmp_path,
                                                                          capsys):
    """Each leaf of a structural adoption's adopted.json (its first row) changed alone and the folder audited
    (structural): exit 1 or 2, but for what describes the adopting machine or names its files: exit 4 (its
    writer is held)."""
    from support.plain_runs import ADOPTING_MACHINE, every_adopted_field_held

    done = adopt(RUNS["0.13.0"], embedded_cache, "--structural", "--run-name", "kept", lock=open_lock, cwd=tmp_path)
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-2000:]
    files = tuple(f"source.{name}" for name in ("results_file", "results_sha256", "samples_file", "samples_sha256"))
    counted = every_adopted_field_held(tmp_path / "runs" / "kept", open_lock, embedded_cache, capsys,
                                       (*ADOPTING_MACHINE, *files),
                                       skip=lambda path: path[0] in ("platform", "versions", "timings") or (
                                           path[:1] == ("questions",) and path[1] > 0))
    assert counted["held"] > 40 and counted["descriptive"] > 10, counted


@pytest.mark.parametrize("release", sorted(RUNS))
def test_a_details_file_of_repeated_rows_is_refused_by_its_row_count_before_a_row_is_read(embedded_cache, tmp_path,
                                                                                          release):
    """A parquet's rows are not bounded by its size: the real run's first row repeated 200,017 times compresses to a
    few hundred KB (2,000,000 rows in 293 KB took 3.4 GB and 3 minutes to refuse). The reader refuses more rows than
    its bound from the file's metadata, and adopt passes the split's bound (2 x 264 + 16: the adoption's rule)."""
    import pyarrow
    import pyarrow.parquet as parquet

    from sst2_audit.formats.lighteval_details import MAX_DETAILS_ROWS

    run = copy(release, tmp_path / "run")
    repeated = parquet.read_table(details(run)).take(pyarrow.array([0] * (MAX_DETAILS_ROWS + 1)))
    parquet.write_table(repeated, details(run), compression="zstd")
    assert details(run).stat().st_size < 2 << 20
    with pytest.raises(InputError) as refused:
        read_details(details(run))
    assert str(refused.value) == (f"{details(run)}: {MAX_DETAILS_ROWS + 1} rows, more than the {MAX_DETAILS_ROWS} a "
                                  "run of the split can log; refused before any row is read.")
    done = adopt(run, embedded_cache, "--structural", "--out", tmp_path / "adopted", cwd=tmp_path)
    assert done.returncode == 2 and not (tmp_path / "adopted").exists(), done.stdout + done.stderr
    assert f"{MAX_DETAILS_ROWS + 1} rows, more than the 544 a run of the split can log;" in done.stderr
