"""What adopting one task and adopting a run of many share: the verdict printed with the reviewer's numbers, one
task's adopted folder written, and the audit of one task's adopted folder (its levels re-run on the reviewer's lock,
cache and machine, then adopted.json against what they found)."""

import time
from datetime import datetime, timezone
from pathlib import Path

from sst2_audit.audit import adopt_export
from sst2_audit.audit.adopt import Adoption
from sst2_audit.audit.adopt_lighteval import LightevalChoiceAdoption, refuse_unsupported
from sst2_audit.audit.adopt_shapes import shape_for
from sst2_audit.audit.loading import BUNDLE_LOCK, BUNDLE_MANIFEST
from sst2_audit.audit.adopted_level import bundle_copies
from sst2_audit.audit.row_set import most_lines
from sst2_audit.audit.adopt_rescore import record, reviewer_json, reviewer_numbers, reviewer_pairs, run_levels
from sst2_audit.bundle import adopted as adopted_bundle
from sst2_audit.cli.common import audit_words, show_verdict
from sst2_audit.formats import adopted, every_eval_ever, lighteval_details, lm_eval_output, records
from sst2_audit.formats.adopted_read import read_adopted
from sst2_audit.formats.manifest import cache_for
from sst2_audit.formats.run_settings import MAX_ROWS
from sst2_audit.protocol.rules import notice_for
from sst2_audit.scoring.shards import from_launcher, Shards
from sst2_audit.task.spec import spec_for
from sst2_audit.util import atomic
from sst2_audit.util.commands import command_line
from sst2_audit.util.errors import InputError
from sst2_audit.util.progress import set_quiet
from sst2_audit.util.sanitize import printable, RUN_NAME


def logged(output) -> str:
    """How much was logged: rows, or a generate_until task's lines (one per row and filter)."""
    rows = len({sample.doc_id for sample in output.samples})
    return f"{len(output.samples)} logged rows" if rows == len(output.samples) else \
        f"{rows} logged rows ({len(output.samples)} lines: one per filter)"


def print_outcome(outcome, head: list, adoption: Adoption, subject) -> None:
    """The verdict, the reviewer's own numbers right under it (beside the submitter's), then the levels."""
    found = reviewer_pairs(adoption)
    numbers, profile = reviewer_numbers(adoption, found), adoption.profile
    lines = [outcome.verdict(), *numbers, *head]
    if profile.demo:
        lines.insert(1 + len(numbers), f"*** {notice_for(profile)} ***")
    for level in outcome.levels:
        lines += level.lines()
    show_verdict(lines + [outcome.verdict()], outcome, subject, reviewer_json(adoption, found))


# A process_docs hook may make more docs than its split has rows (the adoption's own rule, prepare_rows, counts the
# docs once they are made): the bound read before them leaves a hooked task this much room.
HOOKED_DOCS_PER_ROW = 16


def most_samples(profile, spec) -> int:
    """The most lines a run of the profile's split can log, read before its docs are made: the adoption's rule
    (audit/row_set.py::most_lines, which prepare_rows applies to the docs once made) over the split's pinned rows,
    with room for a process_docs hook's docs; MAX_ROWS where the lock pins no row count. A file past it is refused at
    that line (a 500 MB samples file of one line repeated took 38 s and 731 MB to refuse after reading it whole), and
    a parquet from its metadata."""
    pinned = [file.rows for file in profile.data.files if file.split == spec.eval_split]
    rows = sum(pinned) if pinned and None not in pinned else MAX_ROWS
    return most_lines(rows * (HOOKED_DOCS_PER_ROW if spec.process_docs is not None else 1), spec)


def write_task(out: Path, adoption, adopted_record) -> dict:
    """The public copy (no data text, someone else's paths as <path>), then adopted.json last: its presence
    means complete. Returns {name: bytes} as written, for the bundle."""
    files = adoption.shape.public_copy(adoption)
    atomic.new_directory(out, "--out")
    try:
        for name, body in files.items():
            atomic.write_bytes(out / name, body)
        adopted.write(out / adopted.ADOPTED_FILE, adopted_record)
    except BaseException:
        for name in (*files, adopted.ADOPTED_FILE):
            (out / name).unlink(missing_ok=True)
        out.rmdir()
        raise
    files[adopted.ADOPTED_FILE] = (out / adopted.ADOPTED_FILE).read_bytes()
    return files


def adopt_task(args, found: tuple, shape, models: dict, target: tuple, head_of) -> int:
    """One task adopted in this process, or in each of the N a launcher (`torchrun`, `accelerate launch`) started:
    each rescores its share, rank 0 reports and writes (report_task), every process exits as rank 0 does.
    found: (lock, profile, spec, the run's output); target: (run name, folder); head_of(output): what was adopted,
    in words, once the levels have named every row (a flat lighteval row's doc id is its row rule's)."""
    lock, profile, spec, output = found
    shards = from_launcher()
    try:
        set_quiet(not shards.lead)
        adoption = Adoption(lock, profile, spec, args.cache, output, 0 if args.structural else args.rescore,
                            args.seed, args.bound, shards=shards, models=models, shape=shape)
        seed = shards.seed(args.seed)
        timings: dict = {}
        start = time.perf_counter()
        outcome = run_levels(adoption, timings, seed)
        timings["total"] = round(time.perf_counter() - start, 3)
        code = report_task(args, adoption, outcome, (*target, seed, timings), head_of(output)) if shards.lead \
            else None
        return shards.broadcast(code)
    finally:
        shards.close()


def report_task(args, adoption, outcome, kept: tuple, head: list) -> int:
    """Rank 0: the verdict printed (head: what was adopted), and the adopted folder (and bundle, and export) written
    when nothing failed; kept: (run name, folder, seed, timings)."""
    name, out, seed, timings = kept
    ready = export_ready(args, adoption, outcome)  # before the verdict: an export that cannot be built is no late error
    print_outcome(outcome, head, adoption, adoption.output.results_path)
    if outcome.failed:
        print(f"nothing written: an adoption that fails is not kept ({printable(out)})")
        return outcome.exit_code
    files = write_task(out, adoption, record(adoption, name, seed, timings))
    print(f"adopted: {printable(out)} (audit it: {printable(command_line('audit', *audit_words(args, out)))})")
    export_eee(args, ready, adoption, files)
    if args.bundle:
        bundle = adopted_bundle.pack(out, files, name, adoption.lock, adoption.cache, args.results)
        print(f"bundle: {printable(bundle)}")
    return outcome.exit_code


def export_ready(args, adoption, outcome):
    """--export-eee DIR: the task's Every Eval Ever records, built before the verdict is printed (None: not asked,
    or the adoption failed and nothing is kept)."""
    if getattr(args, "export_eee", None) is None or outcome.failed:
        return None
    return adopt_export.exported(adoption, outcome)


def export_eee(args, ready, adoption, files: dict) -> None:
    """The records written after the adopted folder (its record's sha256 on each), from lm-eval's own files."""
    if ready is None:
        return
    exported = adopt_export.with_record(ready, files[adopted.ADOPTED_FILE])
    record, samples = every_eval_ever.write(args.export_eee, exported, str(int(time.time())))
    print(f"every eval ever: {printable(record)} and {printable(samples.name)} ({adoption.spec.name}, "
          f"{len(exported.rows)} rows, verdict on each)")


def refuse_unexported(args, spec) -> None:
    """--export-eee with a task whose shape is not exported yet: exit 2 before any work."""
    if getattr(args, "export_eee", None) is not None and not shape_for(spec).exports:
        raise InputError(f"--export-eee: task {spec.name} is a {spec.shape.name} task, whose adoption is not "
                         "exported as Every Eval Ever records yet; adopt it without --export-eee.")


def adopted_target(args, stem: str) -> tuple:
    """(run name, folder) of an adoption: --run-name or `<stem>-<UTC time>`, --out or runs/<name>; refused before
    any work when the folder or the bundle exists (nothing is overwritten), or when --export-eee's folder cannot be
    written."""
    name = args.run_name or f"{stem}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    if not RUN_NAME.match(name):
        raise InputError(f"--run-name {name!r}: letters, digits, '.', '_' and '-' only.")
    out = args.out or Path("runs") / name
    if out.exists():
        raise InputError(f"{out} already exists; an adopted folder is never overwritten.")
    if getattr(args, "export_eee", None) is not None:  # a folder that cannot take the export: said before any work
        atomic.require_writable_folder(args.export_eee, "--export-eee")
    if args.bundle:
        adopted_bundle.bundle_path(name, args.results)
    return name, out


def audit_task(args, folder: Path, models: dict, results_sha256: str | None = None) -> tuple:
    """(outcome, adoption, claimed record) of one task's adopted folder; results_sha256: the run record's, which
    the task's adopted.json must name (a member of another run is a FAIL of the run)."""
    claimed = read_adopted(folder / adopted.ADOPTED_FILE)
    lock = args.reviewer_lock
    if claimed.profile not in lock.profiles:  # the record's claim, not a fault of your lock: say whose word it is
        raise InputError(f"{folder / adopted.ADOPTED_FILE}: profile {printable(claimed.profile)[:80]!r}: your lock "
                         f"{lock.given} defines no such profile ({', '.join(sorted(lock.profiles))}); the adoption was "
                         "made against another lock, or its record was edited.")
    profile = lock.profile(claimed.profile)
    cache = cache_for(args.cache, profile.name)
    spec = spec_for(lock, profile.task)
    output, shape = _public_copy(folder, lock, profile, spec, claimed)
    rows = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    bound = claimed.bound.absolute if claimed.bound.basis.startswith("the reviewer's") else None
    adoption = Adoption(lock, profile, spec, cache, output, rows, args.seed, bound, models=models, shape=shape)
    adoption.shape.take_claims(adoption, claimed)
    seed = Shards().seed(args.seed)  # one process: the audit of an adopted folder is not shared
    outcome = run_levels(adoption, {}, seed)
    if not outcome.failed:
        here = record(adoption, claimed.run_name, seed, {})
        here.bound = adoption.shape.recorded_bound(adoption, claimed)  # its own rows' bound, not this rescore's
        level = adoption.shape.check_adopted(claimed, here, here.bits_required, adoption.settings)
        level.expect("adopted.json", "source.writer (whose files the public copy holds)",
                     shape.writer, claimed.source.get("writer"))
        if results_sha256 is not None:
            level.expect("adopted.json", "source.results_sha256 (the run record's results file)", results_sha256,
                         claimed.source.get("results_sha256"))
        outcome.levels.append(level)
        if any((folder / name).exists() for name in (BUNDLE_LOCK, BUNDLE_MANIFEST)):  # unpacked from a bundle
            outcome.levels.append(bundle_copies(folder, claimed))
        if level.drift_only:
            outcome.drift_only = True
            outcome.limits.append(level.drift_reason)
    note = adopted_bundle.unread_note(folder)
    if note and outcome.levels:
        outcome.levels[-1].notes.append(note)
    return outcome, adoption, claimed


def _public_copy(folder: Path, lock, profile, spec, claimed) -> tuple:
    """(output, shape) of an adopted folder's public copy: a lighteval run's (its details' digests) where the folder
    holds one, else lm-eval's files; the record's source.writer is held to it after the levels."""
    if (folder / records.LIGHTEVAL_DETAILS_FILE).is_file():
        refuse_unsupported(spec, lock.settings_for(profile.name, spec))
        task = claimed.claims.get("lighteval_task")
        output = lighteval_details.read_public(folder, task if isinstance(task, str) else None)
        return output, LightevalChoiceAdoption(output.flat)
    files = folder / records.LM_EVAL_RESULTS_FILE, folder / records.LM_EVAL_SAMPLES_FILE
    return (lm_eval_output.read_plain_files(*files, spec.name, spec.metrics, public=True,
                                            **spec.shape.samples_args(spec)), shape_for(spec))
