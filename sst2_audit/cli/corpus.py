"""`sst2-audit corpus FOLDER`: every plain lm-eval run under a folder (one results_<date>.json each, as lm-eval or
a leaderboard's details repository lays them out) adopted against your lock and cache, one after another, each as
`adopt` would (its verdict object kept), with one line per run, corpus.json and corpus.csv written after each run,
and a pass that resumes where a stopped one stopped (issue 62).

A run's adoption is `adopt` itself, called in this process: its console words go to a log per run, its verdict
object is the entry. One run's bad input is that run's entry (exit 2), never the end of the pass."""

import collections
import contextlib
import io
import json
import sys
import time
from pathlib import Path

from sst2_audit.cli.adopt import rescore_rows
from sst2_audit.cli.common import common, Parser
from sst2_audit.formats import corpus as corpus_format
from sst2_audit.formats.corpus import Corpus, CorpusEntry
from sst2_audit.formats.lighteval_details import is_lighteval_run
from sst2_audit.formats.lock import load_lock
from sst2_audit.pages.corpus import render_corpus
from sst2_audit.util import atomic, progress
from sst2_audit.util.errors import EXIT_PASS, InputError
from sst2_audit.util.hashing import sha256_file, sha256_text
from sst2_audit.util.sanitize import printable

MAX_RUNS = 100_000


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit corpus", description="Adopt every plain lm-eval run under FOLDER (each "
                    "results_<date>.json and its samples files) against your lock and cache: one line per run, "
                    "corpus.json and corpus.csv in --out, resumable.",
                    epilog="example:\n  sst2-audit corpus details/ --structural --out runs/corpus-details\n\n"
                           "exit codes: 0 every run PASS; 1 a run FAILed; 4 none failed, not every run verified "
                           "(a run refused as bad input, or not rescored); 2 bad usage; 3 our bug")
    common(parser)
    parser.add_argument("folder", type=Path, help="a folder of lm-eval output folders (searched at every depth)")
    parser.add_argument("--out", type=Path, help="where corpus.json, corpus.csv, the adopted folders and each run's "
                                                 "log go (default: runs/corpus-<UTC time>); an earlier pass's "
                                                 "folder resumes it")
    parser.add_argument("--rescore", type=rescore_rows, default="all", metavar="N|all",
                        help="rescore N logged rows of each run drawn at random (default: all)")
    parser.add_argument("--structural", action="store_true",
                        help="every level but the rescore, for every run (each exit 4 at best): no model is loaded")
    parser.add_argument("--seed", type=int, help="seed of each run's --rescore draw (default: drawn fresh per run)")
    parser.add_argument("--profile", help="the profile of your lock a lighteval run's prompts are held to (an "
                                          "lm-eval run is matched to its profile by its tasks; without it a "
                                          "lighteval run is refused, exit 2, as its entry)")
    return parser


def _runs(folder: Path, out: Path) -> list:
    if not folder.is_dir():
        raise InputError(f"{folder}: expected a folder of lm-eval (or lighteval) output folders.")
    found = sorted(path for path in folder.rglob("results_*.json")
                   if path.is_file() and out.resolve() not in path.resolve().parents)
    if not found:
        raise InputError(f"{folder}: no lm-eval results file (results_<date>.json) at any depth.")
    if len(found) > MAX_RUNS:
        raise InputError(f"{folder}: {len(found)} results files; a corpus pass takes at most {MAX_RUNS}.")
    return found


def _started(args, lock_sha: str) -> tuple[Path, Corpus]:
    """The corpus folder: a new one, or an earlier pass's with the same lock and rescore (resumed)."""
    out = args.out or Path("runs") / time.strftime("corpus-%Y%m%dT%H%M%SZ", time.gmtime())
    rescore = "none" if args.structural else str(args.rescore)
    if (out / corpus_format.CORPUS_FILE).is_file():
        earlier = corpus_format.read(out / corpus_format.CORPUS_FILE)
        if (earlier.lock_sha256, earlier.rescore, earlier.lighteval_profile) != (lock_sha, rescore, args.profile):
            raise InputError(f"{out}: an earlier pass adopted its runs against lock sha256 {earlier.lock_sha256[:16]} "
                             f"with rescore {earlier.rescore} and lighteval profile {earlier.lighteval_profile}; this "
                             f"pass's are {lock_sha[:16]}, {rescore} and {args.profile}. Choose another --out: a "
                             "corpus's entries are never mixed.")
        return out, earlier
    atomic.new_directory(out, "corpus folder")
    return out, Corpus(str(args.folder), lock_sha, rescore, [], args.profile)


def _adopt_argv(args, results: Path, target: Path) -> list:
    """adopt's words for one run, kept in `target`; a lighteval run takes the profile its prompts are held to."""
    held = ["--profile", args.profile] if args.profile and is_lighteval_run(results) else []
    return [str(results), "--lock", str(args.lock), "--cache", str(args.cache), *held, "--out", str(target),
            "--run-name", target.name, "--format", "json",
            *(["--structural"] if args.structural else ["--rescore", str(args.rescore)]),
            *(["--seed", str(args.seed)] if args.seed is not None else []),
            *(["--threads", str(args.threads)] if args.threads else [])]


def _relative(results: Path, folder: Path) -> str:
    """A run's name in the pass: its path under the folder, where a byte that is not UTF-8 (a name made on another
    system) is written as \\xNN, so the name can be hashed, recorded and printed, and is found again on a resumed
    pass."""
    name = results.relative_to(folder).as_posix()
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _entry(relative: str, sha: str, target: Path, code: int, said: str) -> CorpusEntry:
    """The corpus entry of one adoption, from its verdict object (the one line its stdout carries)."""
    try:
        verdict = json.loads(said)
    except ValueError:
        verdict = {}
    if not isinstance(verdict, dict):
        verdict = {}
    failed = [finding.get("words", "") for level in verdict.get("levels") or [] if level.get("status") == "FAIL"
              for finding in level.get("findings") or []][:1]
    reason = failed[0] if failed else str(verdict.get("error") or "")
    return CorpusEntry(relative, sha, target.name if target.is_dir() else None, code,
                       str(verdict.get("verdict") or ("ERROR" if code else "PASS")),
                       str(verdict.get("line") or f"exit {code}"), reason,
                       [n for n in verdict.get("numbers") or [] if isinstance(n, dict)])


def _adopt_one(adopt, argv: list, log: Path, models: dict) -> tuple[int, str]:
    """adopt in this process: its verdict object from stdout, its words and progress into the run's log; models:
    the pass's loaded model, which serves every run whose lock entry pins the same files, dtype and attention."""
    said, words = io.StringIO(), io.StringIO()
    previous = progress.set_stream(words)
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(words):
            code = adopt(argv, owns_process=False, models=models)
    finally:
        progress.set_stream(previous)
    atomic.write_text(log, words.getvalue(), overwrite=True)
    return code, said.getvalue()


def _shown(entry: CorpusEntry) -> str:
    numbers = "; ".join(f"{n.get('task')} {n.get('metric')} {_number(n.get('reported'))} / "
                        f"{_number(n.get('rescored'))}" for n in entry.numbers[:3])
    return f"{entry.verdict} (exit {entry.exit_code}){': ' + numbers if numbers else ''}" + \
        (f" -- {entry.reason[:160]}" if entry.reason else "")


def _number(value) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:.3f}"


def main(argv, adopt) -> int:
    """adopt: the CLI's guarded adopt entry (cli/__init__.py passes it: one error contract for every run)."""
    args = _parser().parse_args(argv)
    load_lock(args.lock)  # a lock that cannot be read stops the pass before any run
    runs = _runs(args.folder, args.out or Path("runs"))
    out, corpus = _started(args, sha256_file(args.lock))
    done = {(entry.results, entry.results_sha256): entry for entry in corpus.runs}
    here = {_relative(results, args.folder) for results in runs}
    gone = sorted({entry.results for entry in corpus.runs} - here)
    if gone:  # their adopted folders stay where they are; only the entries go
        progress.say(printable(f"[corpus] {len(gone)} entr{'y' if len(gone) == 1 else 'ies'} of the last pass whose "
                               f"file is no longer under {args.folder} dropped: {', '.join(gone[:5])}"
                               + (f" and {len(gone) - 5} more" if len(gone) > 5 else "")))
    corpus.runs = []
    models: dict = {}  # the pass's loaded model (adopt_rescore.model_key -> (model, tokenizer))
    (out / "logs").mkdir(exist_ok=True)
    for number, results in enumerate(runs, start=1):
        relative, sha = _relative(results, args.folder), sha256_file(results)
        entry = done.get((relative, sha))
        if entry is None:
            target = out / f"run-{sha256_text(relative)[:8]}-{sha[:12]}"  # one folder per file and content
            while target.exists():  # a pass stopped after this run's folder and before its entry: kept as it is
                target = target.with_name(target.name + "-again")
            code, said = _adopt_one(adopt, _adopt_argv(args, results, target), out / "logs" / f"{target.name}.log",
                                    models)
            entry = _entry(relative, sha, target, code, said)
        corpus.runs.append(entry)
        corpus_format.write(out, corpus)
        atomic.write_text(out / corpus_format.CORPUS_PAGE, render_corpus(corpus), overwrite=True)
        progress.say(printable(f"[corpus {number}/{len(runs)}] {relative}: "
                               f"{'kept from the last pass: ' if (relative, sha) in done else ''}{_shown(entry)}"))
    return _summary(out, corpus)


def _summary(out: Path, corpus: Corpus) -> int:
    code, head = corpus_format.pass_verdict(corpus)
    counts = collections.Counter(entry.verdict for entry in corpus.runs)
    print(f"VERDICT: {head}: {len(corpus.runs)} runs: "
          + ", ".join(f"{count} {verdict}" for verdict, count in sorted(counts.items())) + f"; exit {code}")
    for entry in corpus_format.ranked(corpus):
        if entry.exit_code != EXIT_PASS:
            print(printable(f"  {entry.results}: {_shown(entry)}"))
    print(printable(f"corpus: {out / corpus_format.CORPUS_FILE}, {corpus_format.CORPUS_TABLE} and "
                    f"{corpus_format.CORPUS_PAGE} (the runs ranked); each run's words in {out / 'logs'}"))
    sys.stdout.flush()
    return code

