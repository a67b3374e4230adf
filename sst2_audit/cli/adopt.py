"""sst2-audit adopt: audit a plain `lm_eval --log_samples --output_path OUT` run and keep it as an adopted folder
(and bundle) that `audit` re-checks; also the audit of such a folder or bundle (cli/audit.py hands it here)."""

import json
import time
from datetime import datetime, timezone
from pathlib import Path

from sst2_audit.audit import adopted_level
from sst2_audit.audit.adopt import Adoption
from sst2_audit.audit.adopt_rescore import record, reviewer_numbers, run_levels
from sst2_audit.bundle import adopted as adopted_bundle
from sst2_audit.cli.common import (AUDIT_EXIT_CODES, audit_words, lock_and_profile, numeric_mode, Parser, spec_for_run,
                                   with_profile)
from sst2_audit.formats import adopted, adopted_generation as generation, lm_eval_output, records
from sst2_audit.formats.manifest import cache_for
from sst2_audit.protocol.numeric import runs_the_mode
from sst2_audit.protocol.rules import notice_for
from sst2_audit.scoring.model import no_model_in_this_process
from sst2_audit.scoring.shards import from_launcher, Shards
from sst2_audit.scoring.summaries import bootstrap_iters
from sst2_audit.task.spec import spec_for
from sst2_audit.util import atomic
from sst2_audit.util.commands import command_line, lock_words
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.progress import set_quiet
from sst2_audit.util.sanitize import printable, RUN_NAME, terminal


def _rows(text: str):
    if text == "all":
        return "all"
    if not text.isdigit() or int(text) == 0:
        raise InputError(f"--rescore: expected a positive number of rows or 'all', got {text!r}")
    return int(text)


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit adopt", description="Audit a plain lm-eval run (lm_eval --log_samples "
                    "--output_path OUT) against your lock and cache, and keep it as an auditable folder.",
                    epilog="example:\n  sst2-audit adopt OUT --profile embedded --bundle\n\n" + AUDIT_EXIT_CODES)
    with_profile(parser)
    parser.add_argument("output", type=Path, help="lm-eval's --output_path folder, or its results_<date>.json")
    parser.add_argument("--run-name", help="the adopted folder's name (default: adopted-<profile>-<UTC time>)")
    parser.add_argument("--out", type=Path, help="where the adopted folder is written (default: runs/<run-name>)")
    parser.add_argument("--bound", type=float, metavar="NATS",
                        help="hold every logged score to |logged - rescored| <= NATS (default: derived from the "
                             "dtype the run claims, and stated)")
    parser.add_argument("--rescore", type=_rows, default="all", metavar="N|all",
                        help="rescore N logged rows drawn at random (default: all; a sample gives exit 4)")
    parser.add_argument("--structural", action="store_true", help="every level but the rescore (exit 4)")
    parser.add_argument("--seed", type=int, help="seed of the --rescore draw (default: drawn fresh and printed)")
    parser.add_argument("--bundle", action="store_true", help="also pack results/<run-name>.tar.gz when nothing failed")
    parser.add_argument("--results", type=Path, default=Path("results"), help="where --bundle writes")
    return parser


def main(argv, owns_process: bool = False) -> int:
    args = _parser().parse_args(argv)
    if args.bound is not None and not (args.bound >= 0 and args.bound != float("inf")):
        raise InputError(f"--bound: expected a finite number of nats >= 0, got {args.bound!r}.")
    if owns_process and args.structural:
        no_model_in_this_process()
    lock, profile = lock_and_profile(args)
    args.cache = cache_for(args.cache, profile.name)  # a cache of many profiles holds this one in <cache>/<profile>
    spec = spec_for_run(lock, profile, None)
    name = args.run_name or f"adopted-{profile.name}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    if not RUN_NAME.match(name):
        raise InputError(f"--run-name {name!r}: letters, digits, '.', '_' and '-' only.")
    out = args.out or Path("runs") / name
    if out.exists():
        raise InputError(f"{out} already exists; an adopted folder is never overwritten.")
    if args.bundle:
        adopted_bundle.bundle_path(name, args.results)
    try:
        output = lm_eval_output.read_plain_output(args.output, spec.name, spec.metrics,
                                                  spec.generation.filter_names if spec.generative else None)
    except lm_eval_output.TaskNotInRun as missing:
        raise InputError(f"{missing}; the profile {profile.name} of {lock.given} pins task {spec.name}. "
                         + " ".join(_taken_by(lock, task) for task in missing.tasks)) from None
    shards = from_launcher()  # one process, or the N `torchrun`/`accelerate launch` started: rank 0 reports
    try:
        set_quiet(not shards.lead)
        adoption = Adoption(lock, profile, spec, args.cache, output, 0 if args.structural else args.rescore,
                            args.seed, args.bound, shards=shards)
        seed = shards.seed(args.seed)
        timings, start = {}, time.perf_counter()
        outcome = run_levels(adoption, timings, seed)
        timings["total"] = round(time.perf_counter() - start, 3)
        code = _report(args, adoption, outcome, (name, out, seed, timings)) if shards.lead else None
        return shards.broadcast(code)  # every process exits as rank 0 does
    finally:
        shards.close()


def _taken_by(lock, task: str) -> str:
    """Which of the lock's profiles adopt a task of the run, or the command that pins it."""
    profiles = sorted(name for name in lock.profiles if lock.profile(name).task == task)
    if profiles:
        return f"Task {task}: adopt it with --profile {' or --profile '.join(profiles)}."
    pin = command_line("prepare", *lock_words(lock.given), "--pin", "NAME", "--task", task, "--model", "MODEL",
                       "--data", "DATA", "--new-lock", "NEW.lock.json")
    return f"Task {task}: no profile of this lock pins it; pin it with `{pin}`."


def _report(args, adoption, outcome, kept: tuple) -> int:
    """Rank 0: the verdict printed, and the adopted folder (and bundle) written when nothing failed."""
    (name, out, seed, timings), output, spec, lock = kept, adoption.output, adoption.spec, adoption.lock
    head = [f"adoption of {output.results_path} ({output.samples_path.name}): task {spec.name}, "
            f"{_logged(output)}, against the reviewer's lock {lock.given} profile "
            f"{adoption.profile.name}"]
    _print(outcome, head, adoption.profile, reviewer_numbers(adoption))
    if outcome.failed:
        print(f"nothing written: an adoption that fails is not kept ({printable(out)})")
        return outcome.exit_code
    files = _write(out, adoption, record(adoption, name, seed, timings))
    print(f"adopted: {printable(out)} (audit it: {printable(command_line('audit', *audit_words(args, out)))})")
    if args.bundle:
        print(f"bundle: {printable(adopted_bundle.pack(out, files, name, lock, args.cache, args.results))}")
    return outcome.exit_code


def _logged(output) -> str:
    """How much was logged: rows, or a generate_until task's lines (one per row and filter)."""
    rows = len({sample.doc_id for sample in output.samples})
    return f"{len(output.samples)} logged rows" if rows == len(output.samples) else \
        f"{rows} logged rows ({len(output.samples)} lines: one per filter)"


def _print(outcome, head: list, profile, numbers: list) -> None:
    """The verdict, the reviewer's own numbers right under it (beside the submitter's), then the levels."""
    lines = [outcome.verdict(), *numbers, *head]
    if profile.demo:
        lines.insert(1 + len(numbers), f"*** {notice_for(profile)} ***")
    for level in outcome.levels:
        lines += level.lines()
    print(terminal(lines + [outcome.verdict()], verdicts=(outcome.verdict(),)))


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()


def _write(out: Path, adoption, adopted_record) -> dict:
    """The public copy (no data text, someone else's paths as <path>), then adopted.json last: its presence
    means complete. Returns {name: bytes} as written, for the bundle."""
    results = json.dumps(lm_eval_output.public_results(adoption.output.results), indent=2, ensure_ascii=False)
    public = lm_eval_output.public_generated_sample if adoption.spec.generative else lm_eval_output.public_sample
    files = {records.LM_EVAL_RESULTS_FILE: (results + "\n").encode(),
             records.LM_EVAL_SAMPLES_FILE: _jsonl(public(s) for s in adoption.output.samples)}
    atomic.new_directory(out, "--out")
    try:
        for name, body in files.items():
            atomic.write_bytes(out / name, body)
        (generation.write if adoption.spec.generative else adopted.write)(out / adopted.ADOPTED_FILE, adopted_record)
    except BaseException:
        for name in (*files, adopted.ADOPTED_FILE):
            (out / name).unlink(missing_ok=True)
        out.rmdir()
        raise
    files[adopted.ADOPTED_FILE] = (out / adopted.ADOPTED_FILE).read_bytes()
    return files


def audit_adopted(args, path: Path, scratch: Path) -> int:
    """audit --out ADOPTED or --bundle-file ADOPTED.tar.gz: the public copy through the adoption's levels on the
    reviewer's lock, cache and machine, then adopted.json against what they found."""
    sums = None
    if path.is_file():
        try:
            folder, checks = adopted_bundle.unpack_verified(path, scratch)
        except CheckFailed:
            print("VERDICT: FAIL (bundle SHA256SUMS and members): the bundle was refused before any record was "
                  "read; exit 1")
            raise
        sums = f"bundle SHA256SUMS and members: PASS ({checks} checks)"
    else:
        folder = path
    claimed = generation.read_adopted(folder / adopted.ADOPTED_FILE)
    lock = args.reviewer_lock
    profile = lock.profile(claimed.profile)
    args.cache = cache_for(args.cache, profile.name)
    spec = spec_for(lock, profile.task)
    files = folder / records.LM_EVAL_RESULTS_FILE, folder / records.LM_EVAL_SAMPLES_FILE
    output = lm_eval_output.read_plain_files(*files, spec.name, spec.metrics, public=True,
                                             filters=spec.generation.filter_names if spec.generative else None)
    rows = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    bound = claimed.bound.absolute if claimed.bound.basis.startswith("the reviewer's") else None
    adoption = Adoption(lock, profile, spec, args.cache, output, rows, args.seed, bound)
    if spec.generative:  # the near ties the record says were taken: a claim each, re-decoded and held to the hash
        adoption.recorded_ties = {row.idx: [t for t in row.ties if "rank" in t] for row in claimed.rows if row.ties}
    seed = Shards().seed(args.seed)  # one process: the audit of an adopted folder is not shared
    outcome = run_levels(adoption, {}, seed)
    if not outcome.failed:
        here = record(adoption, claimed.run_name, seed, {})
        check = adopted_level.check_generation if spec.generative else adopted_level.check
        bits = runs_the_mode(adoption.settings, here.platform)[0]
        level = (check(claimed, here, bits) if spec.generative else
                 check(claimed, here, bits, bootstrap_iters(adoption.settings)))
        outcome.levels.append(level)
        if level.drift_only:
            outcome.drift_only = True
            outcome.limits.append(level.drift_reason)
    head = [f"audit of the adopted run {claimed.run_name} in {path}: task {spec.name}, {_logged(output)}, against "
            f"the reviewer's lock {lock.given}"] + ([sums] if sums else [])
    _print(outcome, head, profile, reviewer_numbers(adoption))
    return outcome.exit_code
