"""corpus.json and corpus.csv: many plain lm-eval runs adopted in one command (`sst2-audit corpus`, issue 62), one
entry per run found under the corpus folder, written after each run so a stopped pass resumes where it stopped.
An entry says what the run's adoption said (its verdict object's words and numbers); the adopted folders beside it
are what `audit` re-checks. Read by one reader (`read`), unknown keys refused."""

import csv
import dataclasses
import io
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from sst2_audit.formats import strict_json
from sst2_audit.formats.schema import convert, require_kind
from sst2_audit.util import atomic
from sst2_audit.util.errors import EXIT_BUG, EXIT_CODES, EXIT_FAIL, EXIT_LIMITED, EXIT_PASS, EXIT_USAGE, InputError
from sst2_audit.util.sanitize import RUN_NAME

CORPUS_FILE, CORPUS_TABLE, CORPUS_PAGE = "corpus.json", "corpus.csv", "corpus.html"
CORPUS_KIND, CORPUS_VERSION = "sst2-audit/corpus", 1
SHA256, VERDICT_WORDS = re.compile(r"[0-9a-f]{64}"), re.compile(r"[A-Z][A-Z ,]{1,80}")


@dataclass
class CorpusEntry:
    results: str  # the results file, relative to the corpus folder
    results_sha256: str  # of the file as adopted: a changed file is adopted again
    adopted: str | None  # the adopted folder's name beside corpus.json (None: nothing kept, the run failed or erred)
    exit_code: int
    verdict: str  # PASS, FAIL, SCORES NOT VERIFIED, ERROR, ...
    line: str  # the adoption's verdict line, or its error's paragraph
    reason: str  # the first finding of the first level that failed, or "" (the line says it)
    numbers: list[dict]  # per task and metric: reported, rescored (None: not rescored), rows, whose


@dataclass
class Corpus:
    folder: str  # the corpus folder as given
    lock_sha256: str  # the reviewer's lock every run was adopted against
    rescore: str  # "all", a number of rows, or "none" (--structural)
    runs: list[CorpusEntry]
    lighteval_profile: str | None = None  # --profile: the profile a lighteval run's prompts are held to
    schema_version: int = CORPUS_VERSION
    kind: str = CORPUS_KIND


def read(path) -> Corpus:
    raw = require_kind(strict_json.read(path), CORPUS_KIND, CORPUS_VERSION, str(path))
    corpus = convert(Corpus, raw, str(path))
    for number, entry in enumerate(corpus.runs):
        _checked(entry, f"{path}: runs[{number}]")
    return corpus


NUMBER_FIELDS: dict[str, type | tuple[type, ...]] = {
    "task": str, "metric": str, "reported": (float, int, type(None)), "rescored": (float, int, type(None)), "rows": int,
    "whose": str}


def _checked(entry: CorpusEntry, where: str) -> None:
    """What a resumed pass keeps must be an entry this tool could have written."""
    problems = [name for name, bad in (
        ("results", PurePosixPath(entry.results).is_absolute() or ".." in PurePosixPath(entry.results).parts),
        ("results_sha256", not SHA256.fullmatch(entry.results_sha256)),
        ("adopted", entry.adopted is not None and not RUN_NAME.match(entry.adopted)),
        ("exit_code", entry.exit_code not in EXIT_CODES),
        ("verdict", not VERDICT_WORDS.fullmatch(entry.verdict)),
        ("numbers", any(set(n) != set(NUMBER_FIELDS) or not all(isinstance(n[k], t) and not isinstance(n[k], bool)
                                                                for k, t in NUMBER_FIELDS.items())
                        for n in entry.numbers))) if bad]
    if problems:
        raise InputError(f"{where}: {', '.join(problems)}: not as sst2-audit writes a corpus entry (a relative path, "
                         "a sha256, a plain folder name or null, an exit code, the verdict's words, the verdict "
                         "object's numbers); move the corpus folder away or choose another --out.")


TABLE_COLUMNS = ("results", "task", "metric", "reported", "rescored", "rows", "verdict", "exit_code", "reason")


def table(corpus: Corpus) -> str:
    """One line per run and metric (a run with no numbers, one line): what a spreadsheet or a ranking reads."""
    out = io.StringIO()
    # RFC 4180's CRLF: csv quotes a cell holding any character of the line ending, so a carriage return in someone
    # else's text (a folder name may hold one) is quoted, never read as the start of a row of theirs
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(TABLE_COLUMNS)
    for entry in corpus.runs:
        for number in entry.numbers or [{}]:
            writer.writerow([_text(entry.results), _text(number.get("task", "")), _text(number.get("metric", "")),
                             _cell(number.get("reported")), _cell(number.get("rescored")), _cell(number.get("rows")),
                             entry.verdict, entry.exit_code, _text(entry.reason)])
    return out.getvalue()


def rank(code: int) -> int:
    """What was found first: failures, our bugs, refused input, runs not verified, then passes."""
    return {EXIT_FAIL: 0, EXIT_BUG: 1, EXIT_USAGE: 2, EXIT_LIMITED: 3, EXIT_PASS: 4}.get(code, 1)


def pass_verdict(corpus: Corpus) -> tuple[int, str]:
    """(exit code, words) of the pass: the worst of its runs (a run refused as bad input leaves it unverified)."""
    codes = [entry.exit_code for entry in corpus.runs]
    code = (EXIT_BUG if EXIT_BUG in codes else EXIT_FAIL if EXIT_FAIL in codes
            else EXIT_PASS if codes and set(codes) == {EXIT_PASS} else EXIT_LIMITED)
    return code, {EXIT_PASS: "PASS", EXIT_FAIL: "FAIL", EXIT_LIMITED: "NOT EVERY RUN VERIFIED",
                  EXIT_BUG: "INTERNAL ERROR"}[code]


def ranked(corpus: Corpus) -> list:
    return sorted(corpus.runs, key=lambda entry: (rank(entry.exit_code), entry.results))


def _cell(value) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


# A spreadsheet reads a cell that starts with one of these as a formula: a run's path, task or finding is the
# submitter's text (a folder named `=HYPERLINK(...)`), so such a text cell is written behind a quote, which a
# spreadsheet shows as text (OWASP's rule for CSV injection); corpus.json keeps the text as it is.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _text(value: str) -> str:
    return "'" + value if value.startswith(FORMULA_START) else value


def write(folder, corpus: Corpus) -> None:
    """Both files, each replaced atomically (a stopped pass leaves the last complete pair)."""
    atomic.write_json(folder / CORPUS_FILE, dataclasses.asdict(corpus), overwrite=True)
    atomic.write_text(folder / CORPUS_TABLE, table(corpus), overwrite=True)
