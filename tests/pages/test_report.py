"""report.html, the paired comparison, the statistics and the console, as a person would see them."""

import json
import shutil
import sys
from html.parser import HTMLParser

import pytest

from support.builders import tiny_model_folder
from support.paths import EMBEDDED_COLUMNS, load_lock_json, REPO
from support.processes import one_paragraph, run_cli, run_script
from sst2_audit.formats import records
from sst2_audit.protocol.numeric import one_line
from sst2_audit.protocol.stats import mcnemar_exact, paired_difference, wilson


class Tables(HTMLParser):
    """Every table of a page as lists of cell texts, and whether any script or remote resource is used."""

    def __init__(self):
        super().__init__()
        self.tables, self.row, self.cell, self.remote, self.scripts = [], None, None, [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.row = []
            self.tables[-1].append(self.row)
        elif tag in ("td", "th"):
            self.cell = []
        elif tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if attrs.get(key, "").startswith(("http:", "https:", "//")):
                self.remote.append(attrs[key])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _tables(page: str) -> Tables:
    parser = Tables()
    parser.feed(page)
    return parser


def test_report_numbers_are_run_json_s(full_run):
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    page = (full_run / "out" / records.REPORT_FILE).read_text()
    parsed = _tables(page)
    assert parsed.scripts == 0 and parsed.remote == []  # readable offline, without JavaScript
    assert page.count("<svg") == 1 and "EMBEDDED DEMO" in page
    accuracy = next(t for t in parsed.tables if t[0][:3] == ["path", "correct", "accuracy"])
    official = record.summaries["official"]["acc"]
    low, high = wilson(official.correct, official.rows)
    assert accuracy[1] == ["official (lm-eval)", f"{official.correct}/64", f"{official.value:.4f}",
                           f"{official.stderr:.4f}", f"{low:.4f} – {high:.4f}"]
    confusion = next(t for t in parsed.tables if t[0][0] == "gold \\ predicted")
    cells = {(row[0], name): int(value) for row in confusion[1:] for name, value in zip(confusion[0][1:], row[1:])}
    for gold, gold_name in enumerate(["negative", "positive"]):
        for predicted, predicted_name in enumerate(["negative", "positive"]):
            assert cells[(gold_name, predicted_name)] == sum(
                1 for q in record.questions if q.label == gold and q.predictions["official"]["acc"] == predicted)
    questions = next(t for t in parsed.tables if t[0][0] == "idx")
    by_idx = {q.idx: q for q in record.questions}
    assert sorted(int(row[0]) for row in questions[1:]) == sorted(by_idx)
    assert questions[0] == ["idx", "gold", "predicted (acc)", "scores per candidate", "margin", "both paths",
                            "logged doc_id"]
    margins = [float(row[4]) for row in questions[1:]]
    assert [abs(m) for m in margins] == sorted(abs(m) for m in margins) and min(margins) < 0  # closest calls first
    assert "<h2>Every question, closest calls (smallest |margin|) first</h2>" in page
    for row in questions[1:]:
        q = by_idx[int(row[0])]
        official = q.scores["official"]
        assert row[3] == f"negative: {official[0]:.4f} positive: {official[1]:.4f}"  # named, fixed: digits align
        assert row[2] == ["negative", "positive"][q.predictions["official"]["acc"]] and row[6] == str(q.logged_doc_id)
        assert row[5] == "equal"  # bit for bit on the independent path
        assert float(row[4]) == pytest.approx(official[q.label] - official[1 - q.label], abs=5e-5)
    notes = next(t for t in parsed.tables if t[0][0] == "field in lm_eval_results.json")
    assert notes[1][:3] == ["n-samples.sst2.effective", "264", "64"]
    pins = next(t for t in parsed.tables if t[0] == ["field", "value"])
    claimed = next(t for t in parsed.tables if t[0] == ["claim", "value"])  # apart, and headed as claims
    assert "numeric_platform" not in [row[0] for row in pins] and "results_sha256" in [row[0] for row in pins]
    assert [row[0] for row in claimed[1:]] == ["numeric_platform", "run_seconds", "peak_memory", "also_unverified"]
    assert claimed[1][1] == one_line(record.platform)
    # folded (<details>) under a summary line that says what it holds: the page answers first (issue 31)
    assert "<summary><b>Claimed by the submitter's machine, not verified by an audit</b>" in page
    # the audit hint names what an audit of this run needs: its lock (by sha256) and its cache
    assert (f"<code>sst2-audit audit --out &lt;this run's folder&gt; --lock &lt;the lock of sha256 "
            f"{record.lock_sha256[:12]}…&gt; --cache &lt;its cache&gt;</code>") in page
    private = (full_run / "private" / records.REPORT_FILE).read_text()
    assert "PRIVATE" in private and "PRIVATE" not in page
    assert private.count('<td colspan="7"><table style="width:100%">') == 64  # each document a full-width row


def test_the_public_report_carries_no_document_text(full_run, embedded_cache):
    from sst2_audit.task.dataset import read_parquet

    page = (full_run / "out" / records.REPORT_FILE).read_text()
    private = (full_run / "private" / records.REPORT_FILE).read_text()
    rows = {r.idx: r.doc["sentence"] for r in read_parquet(embedded_cache / "data" / "validation.parquet", EMBEDDED_COLUMNS)}
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    import html

    for q in record.questions:
        assert html.escape(rows[q.idx]) not in page
        assert html.escape(rows[q.idx]) in private


def test_a_bundled_report_that_differs_from_the_records_fails_the_audit(full_run, embedded_cache, tmp_path, capsys):
    from support.bundles import audit, members_of, pack

    run = tmp_path / "run"
    shutil.copytree(full_run / "out", run)
    code, out = audit(capsys, "--out", run, "--cache", embedded_cache, "--bundle", "--results", tmp_path / "results",
                      "--structural")
    assert code == 4, out
    bundle = tmp_path / "results" / "my-run.tar.gz"
    members = members_of(bundle)
    assert "report.html" in members and "  report.html\n" in members["SHA256SUMS"].decode()
    assert b"| n-samples.sst2.effective | 264 | 64 | lm-eval counts every document" in members["CARD.md"]
    members["report.html"] = members["report.html"].replace(b"42/64", b"52/64", 1)
    pack(tmp_path / "edited.tar.gz", members, top="my-run")
    code, out = audit(capsys, "--bundle-file", tmp_path / "edited.tar.gz", "--cache", embedded_cache, "--arithmetic-only")
    assert code == 1
    assert "report.html differs from the one regenerated from the checked records at line" in out

    # A page of another design (a later version's look) is never compared as bytes and never evidence: labelled
    # the submitter's claim, and the verdict is not a PASS; --report writes the page of the checked records.
    designed = members["report.html"].replace(b'initial-scale=1">', b'initial-scale=1"><meta name="sst2-audit-page-'
                                              b'design" content="7">', 1)
    pack(tmp_path / "design7.tar.gz", dict(members, **{"report.html": designed}), top="my-run")
    page = tmp_path / "checked.html"
    code, out = audit(capsys, "--bundle-file", tmp_path / "design7.tar.gz", "--cache", embedded_cache, "--structural",
                      "--report", page)
    assert code == 4, out
    assert ("  not checked: report.html is of page design 7, not this version's (1): not regenerated, so its text is "
            "the submitter's claim; `audit --report FILE` writes the page of the checked records") in out.splitlines()
    assert "VERDICT: SCORES NOT VERIFIED" in out and "report.html is of page design 7" in out.splitlines()[-2]
    assert page.read_bytes() == members_of(bundle)["report.html"]  # this version's page of the checked records
    assert f"report: {page} (rendered here from the checked records)" in out


def test_an_old_schema_page_is_labelled_a_claim_and_report_renders_the_checked_records(embedded_cache, tmp_path,
                                                                                       capsys):
    """Record schema 3's page design is no longer rendered (no frozen renderer): the audit labels that page the
    submitter's claim (a limit of the verdict, exit 4), whatever it says, and --report renders today's page
    from the checked records; the card is still compared byte for byte."""
    from support.bundles import audit, members_of, pack, REFERENCE

    members = members_of(REFERENCE)
    members["report.html"] = b"<p>FORGED: 64 of 64 right, every check passed</p>"
    pack(tmp_path / "edited.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "edited.tar.gz", "--cache", embedded_cache, "--structural",
                      "--accept-old-schema", "--report", tmp_path / "page.html")
    assert code == 4, out
    assert "claims: PASS (" in out and "  not checked: report.html is of page design 0, not this version's (1)" in out
    page = (tmp_path / "page.html").read_text()
    assert "FORGED" not in page and "<h1>sst2: run embedded-full-reference (full, 64 rows)</h1>" in page
    assert ">42/64<" in page  # the record's official count, not the claim
    members["CARD.md"] = members["CARD.md"].replace(b"42/64", b"52/64")
    pack(tmp_path / "card.tar.gz", members)
    code, out = audit(capsys, "--bundle-file", tmp_path / "card.tar.gz", "--cache", embedded_cache, "--structural",
                      "--accept-old-schema")
    assert code == 1 and "CARD.md differs from the one regenerated from the checked records" in out, out


def test_statistics_match_their_closed_forms():
    assert mcnemar_exact(0, 0) == 1.0 and mcnemar_exact(1, 1) == 1.0
    assert mcnemar_exact(0, 5) == 0.0625  # 2 * 0.5 ** 5
    assert mcnemar_exact(2, 10) == 2 * (1 + 12 + 66) / 4096 == mcnemar_exact(10, 2)
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(1.959963984540054 ** 2 / (10 + 1.959963984540054 ** 2), abs=1e-15)
    low, high = wilson(10, 10)
    assert high == pytest.approx(1.0, abs=1e-15) and low == pytest.approx(10 / (10 + 1.959963984540054 ** 2), abs=1e-15)
    paired = paired_difference([1, 1, 0, 0, 1], [1, 0, 1, 1, 1])
    assert (paired.both_right, paired.a_only, paired.b_only, paired.both_wrong) == (2, 1, 2, 0)
    assert paired.difference == pytest.approx(0.2) and paired.p_value == 1.0


def _tiny_model_lock(tmp_path, embedded_cache):
    """A reviewer's lock with another model: a tiny random Llama with SmolLM2's tokenizer, on the same data."""
    from sst2_audit.util.hashing import sha256_file
    from sst2_audit.formats.manifest import read_manifest

    model_dir = tmp_path / "tiny-model"
    tiny_model_folder(model_dir, 3, embedded_cache)
    names = sorted(p.name for p in model_dir.iterdir())
    raw = load_lock_json()
    manifest = read_manifest(embedded_cache)
    raw["profiles"] = {"tiny": {
        "description": "a tiny random model on the embedded demo data (a test of the comparison)", "demo": True,
        "model": {"source": "local", "path": "tiny-model",
                  "files": [{"path": n, "sha256": sha256_file(model_dir / n)} for n in names]},
        "data": {"source": "local", "path": str(embedded_cache / "data"),
                 "files": [{"path": f"{s}.parquet", "split": s, "sha256": manifest.file(s).sha256}
                           for s in ("train", "validation")]},
    }}
    lock = tmp_path / "tiny.lock.json"
    lock.write_text(json.dumps(raw))
    return lock


def test_compare_with_another_model_and_lock_names_flips_mcnemar_and_pins(embedded_cache, tmp_path):
    lock = _tiny_model_lock(tmp_path, embedded_cache)
    assert run_script("prepare.py", "--lock", lock, "--profile", "tiny", "--cache", tmp_path / "c").returncode == 0
    done = run_script("run.py", "--lock", lock, "--cache", tmp_path / "c", "--out", tmp_path / "out",
                      "--private", tmp_path / "private", "--run-name", "tiny")
    assert done.returncode == 0, done.stderr[-2000:]
    reference = REPO / "results" / "embedded-full-reference.tar.gz"
    page = tmp_path / "compare.html"
    done = run_script("audit.py", "--compare", reference, tmp_path / "out", "--report", page)
    assert done.returncode == 1, done.stderr  # another model: the verdict is "different", and so is the exit code
    a = {q.idx: q for q in _reference_record(tmp_path).questions}
    b = {q.idx: q for q in records.read(tmp_path / "out" / records.RUN_FILE, records.RunRecord).questions}
    right_a = {i: a[i].predictions["official"]["acc"] == a[i].label for i in a}
    right_b = {i: b[i].predictions["official"]["acc"] == b[i].label for i in a}
    to_wrong = [i for i in a if right_a[i] and not right_b[i]]
    to_right = [i for i in a if right_b[i] and not right_a[i]]
    assert to_wrong or to_right
    out = done.stdout
    assert (f"flips: right in A, wrong in B: {len(to_wrong)} {to_wrong}; "
            f"wrong in A, right in B: {len(to_right)} {to_right}") in out
    assert f"exact McNemar p = {mcnemar_exact(len(to_wrong), len(to_right)):.4g}" in out
    assert "resource model/model.safetensors: " in out and "lock sha256: " in out
    assert "verdict: different" in out
    text = page.read_text()
    assert "exact McNemar p-value" in text and "<script" not in text
    if shutil.which("chromium"):
        _answers_first(page)  # "different", with every flip listed: still verdict first
    again = run_script("audit.py", "--compare", reference, tmp_path / "out", "--report", page)
    assert again.returncode == 2 and "already exists; a report is never overwritten" in again.stderr


def _reference_record(tmp_path):
    import tarfile

    with tarfile.open(REPO / "results" / "embedded-full-reference.tar.gz") as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/run.json"))
        raw = json.loads(archive.extractfile(member).read())
    return records.from_dict(records.RunRecord, raw, "reference run.json")


KNOWN_NOISE = ("aggregation is not", "higher_is_better is not", "model kwarg is not of type", "already-initialized model",
               "Overwriting default num_fewshot", "legacy behaviour", "it/s]", "Generating ")


def test_the_default_console_of_a_full_run_fits_in_27_lines_without_third_party_warnings(full_run, embedded_cache):
    console = (full_run / "console.txt").read_text()
    lines = console.splitlines()
    assert len(lines) <= 27, console  # 10 progress lines (the peak memory and its basis, stated before the load, on
    # two), a summary
    # the peak stated before the load, for the longest input of the 64 (both paths at once): scoring/model.py
    from sst2_audit.scoring.model import memory_statement

    record = json.loads((full_run / "out" / "run.json").read_text())
    longest = max(q["context_length"] + max(q["candidate_token_counts"]) for q in record["questions"])
    at = next(number for number, line in enumerate(lines) if line.startswith("[memory] "))
    memory = lines[at] + " " + lines[at + 1].strip()  # wrapped between words at 128 characters (progress.say_wrapped)
    stated = memory_statement(embedded_cache / "model", record["settings"], None, 1, longest, paths=2)
    assert memory.startswith(f"[memory] {stated}; ") and lines[at + 1].startswith("         ")
    assert f" + 2 x 3.3 x {longest} tokens x 49,152 x 4 B (logits); " in memory
    assert not [line for line in lines if any(noise in line for noise in KNOWN_NOISE)], console
    assert "  accuracy (acc)        42/64 = 0.6562" in console and "peak RSS" in console and " GB" in console
    # long values wrap between words, never cut (a records folder or a command is printed whole, however long)
    assert max(len(line) for line in lines if " records " not in line and not line.startswith("  next ")) <= 130, console
    # the next step is the audit of this run as it must be typed: the installed command, the run's folder as
    # the user gave it (the README's first journey, run by conftest.full_run; tests/cli/test_journeys.py)
    assert lines[-1] == "  next          audit (every row rescored; add --bundle to pack it): sst2-audit audit --out " \
                        "runs/my-run", lines[-1]
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    start = next(i for i, line in enumerate(lines) if line.startswith("  numeric platform"))
    shown = " ".join(line[24:].strip() for line in lines[start:] if line.startswith(("  numeric platform", " " * 24)))
    assert shown == one_line(record.platform)  # every word of the platform, in order
    log = (full_run / "private" / "run.log").read_text()
    assert "aggregation is not" in log  # kept, not lost
    record = records.read(full_run / "out" / records.RUN_FILE, records.RunRecord)
    assert record.third_party_log["lm-eval: metric without an aggregation, default mean used"] == 1


def test_quiet_and_json_summaries(embedded_cache, tmp_path):
    done = run_script("run.py", "--cache", embedded_cache, "--smoke", "--quiet", "--out", tmp_path / "q",
                      "--private", tmp_path / "qp", "--run-name", "q")
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.splitlines() == [done.stdout.strip()] and done.stdout.startswith("q: sst2 ")
    done = run_script("run.py", "--cache", embedded_cache, "--smoke", "--json", "--out", tmp_path / "j",
                      "--private", tmp_path / "jp", "--run-name", "j")
    summary = json.loads(done.stdout)
    record = records.read(tmp_path / "j" / records.RUN_FILE, records.RunRecord)
    assert summary["official"]["accuracy"] == record.summaries["official"]["acc"].value and summary["rows"] == 2
    assert summary["profile"] == "embedded"  # taken from the cache's manifest: no --profile given


def test_profile_comes_from_the_manifest_and_a_mismatch_names_the_one_that_fits(embedded_cache):
    done = run_script("prepare.py", "--verify", "--cache", embedded_cache)
    assert done.returncode == 0, done.stderr
    done = run_cli("run.py", "--profile", "glue-sst2", "--cache", embedded_cache, "--smoke")
    assert done.returncode == 2
    assert "`--profile embedded` (or no --profile) would use this cache as it is" in one_paragraph(done.stderr)


def test_an_unreachable_hub_fails_at_once_with_the_ways_forward(tmp_path):
    done = run_script("prepare.py", "--profile", "glue-sst2", "--cache", tmp_path / "c",
                      env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"})
    assert done.returncode == 2
    assert "Retrying" not in done.stderr and len(done.stderr.splitlines()) <= 2, done.stderr
    assert "(ConnectionError: connection refused). Two ways forward without the hub:" in one_paragraph(done.stderr)


SCREEN = 800  # px: the first screen of a 1280 px window


def _answers_first(page) -> dict:
    """A full-page screenshot in headless Chromium: no element passes the right edge of a 1280 px window, the
    verdict line and the demo banner (if any) are on the first screen, and without its question table the page
    is at most two screens tall (issue 31)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from screenshot_report import screenshot

    png = page.with_suffix(".png")
    size = screenshot(page, png)
    assert size["window"] == 1280 and size["width"] <= 1280 and size["wide"] == [], (page, size)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[20:24], "big") == size["height"]
    assert size["verdict"] is not None and size["verdict"][1] <= SCREEN, (page, size)
    assert size["demo"] is None or size["demo"][1] <= SCREEN, (page, size)
    assert size["height"] - size["questions"] <= 2 * SCREEN, (page, size)
    return size


def _needs_chromium():
    if shutil.which("chromium") is None:
        pytest.skip("Debian's chromium is not installed here (apt-get install chromium; .ci/run installs it)")


def test_every_page_answers_first_in_headless_chromium(full_run, tmp_path):
    """The run's public and private pages, a failure page of a whole #4084 run (64 samples, five fields each)
    and the compare page: each within 1280 px, its verdict and demo banner on the first screen, at most two
    screens without the question table."""
    _needs_chromium()
    from sst2_audit.pages.html_report import render_failure

    fields = ["doc_hash", "doc_hash (of the logged doc)", "prompt_hash", "target", "token_boundary"]
    failure = records.FailureRecord("unsorted", "identity", "identity check failed: " + "x" * 300, [
        records.Mismatch(n, 1000 + n, fields, {f: "a" * 64 for f in fields}, {f: "b" * 64 for f in fields})
        for n in range(64)], {"doc_id_order": "hash order (unsorted)", **{f"setting_{n}": "x" * 90 for n in range(16)}})
    (tmp_path / "failure.html").write_text(render_failure(failure, "DEMO: a notice"))
    done = run_script("audit.py", "--compare", REPO / "results" / "embedded-full-reference.tar.gz", full_run / "out",
                      "--report", tmp_path / "compare.html")
    assert done.returncode == 0, done.stderr
    for number, page in enumerate([full_run / "out" / records.REPORT_FILE, full_run / "private" / records.REPORT_FILE,
                                   tmp_path / "failure.html", tmp_path / "compare.html"]):
        shutil.copyfile(page, tmp_path / f"{number}.html")
        size = _answers_first(tmp_path / f"{number}.html")
        assert (size["questions"] > 0) == (number < 2), size  # the run pages have a question table


@pytest.mark.parametrize("script, option", [("run.py", "--smok"), ("audit.py", "--arith"), ("prepare.py", "--ver")])
def test_option_prefixes_are_not_silently_accepted(script, option):
    done = run_cli(script, option)
    assert done.returncode == 2
    assert f"unrecognized arguments: {option}" in done.stderr


def test_a_later_page_design_states_itself_and_the_audit_reads_it(monkeypatch):
    """Design 1 (today's) states nothing, so the pages of record schema 4 to 6 keep their bytes; a bumped
    PAGE_DESIGN is written into the page's head, where page_design reads it (record schema 3's pages: 0)."""
    import json
    import tarfile

    from sst2_audit.formats import records
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.pages import html_report
    from sst2_audit.task.spec import spec_for

    with tarfile.open(REPO / "results" / "embedded-full-reference.tar.gz") as archive:
        raw = json.loads(archive.extractfile("embedded-full-reference/run.json").read())
        bundled = archive.extractfile("embedded-full-reference/report.html").read().decode()
    record, lock = records.from_dict(records.RunRecord, raw, "run.json"), load_lock(REPO / "resources.lock.json")
    page = html_report.render(record, lock, spec_for(lock, "sst2"), written_schema=4)
    assert page == bundled and "sst2-audit-page-design" not in page
    assert [html_report.page_design(page, schema) for schema in (3, 4, 5, 6)] == [0, 1, 1, 1]
    monkeypatch.setattr(html_report, "PAGE_DESIGN", 2)
    later = html_report.render(record, lock, spec_for(lock, "sst2"), written_schema=4)
    assert '<meta name="sst2-audit-page-design" content="2">' in later.split("</head>")[0]
    assert html_report.page_design(later, 4) == 2 and html_report.page_design(later, 3) == 2


def test_a_full_split_page_shows_the_closest_thousand_rows_and_says_how_many_more():
    """A record of 1,500 rows (the reference record's rows with generated scores under new ids): the page's table
    holds the 1,000 closest calls, names the 500 more, and is rendered twice to the same bytes (the audit compares
    them); the margin plot's 1,500 points are one image, so the page stays small."""
    import dataclasses
    import random
    import tarfile

    from sst2_audit.formats.lock import load_lock
    from sst2_audit.pages import html_report
    from sst2_audit.task.spec import spec_for

    with tarfile.open(REPO / "results" / "embedded-full-reference.tar.gz") as archive:
        raw = json.loads(archive.extractfile("embedded-full-reference/run.json").read())
    record, lock = records.from_dict(records.RunRecord, raw, "run.json"), load_lock(REPO / "resources.lock.json")
    draw, questions = random.Random(1500), []
    for n in range(1500):
        q = record.questions[n % len(record.questions)]
        scores = [-draw.uniform(0.01, 6.0) for _ in q.scores["official"]]
        questions.append(dataclasses.replace(q, idx=n, scores={"official": scores, "independent": list(scores)}))
    record.questions = questions
    page = html_report.render(record, lock, spec_for(lock, "sst2"))
    assert page == html_report.render(record, lock, spec_for(lock, "sst2"))
    rows = _tables(page).tables[-1][1:]
    closest = sorted(questions, key=lambda q: (abs(q.scores["official"][q.label] - max(
        s for i, s in enumerate(q.scores["official"]) if i != q.label)), q.idx))[:1000]
    assert [int(row[0]) for row in rows] == [q.idx for q in closest]
    assert "500 more rows, each farther from a close call than every row above, are not shown here" in page
    assert len(page) < 1_200_000 and "<image" in page
