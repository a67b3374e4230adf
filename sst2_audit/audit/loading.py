"""Read a finished run, from its folder or from a verified bundle: every file is a claim.

The lock audited against is the reviewer's (--lock). A lock carried by a bundle or a run
folder is read only as a claim that the lock level compares with the reviewer's, unless the
reviewer explicitly trusts it (--trust-bundle-lock, said in the report's first line).
"""

import functools
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.formats import lm_eval_output, records, strict_json
from sst2_audit.formats.lock import Lock, lock_from_bytes, numeric_mode_change
from sst2_audit.formats.run_settings import NUMERIC_MODE_KEYS
from sst2_audit.task.spec import spec_for
from sst2_audit.util.errors import CheckFailed, InputError, InternalError

BUNDLE_LOCK = "resources.lock.json"
BUNDLE_MANIFEST = "manifest.json"
BUNDLE_CARD = "CARD.md"


@dataclass
class RunFolder:
    path: Path
    record: records.RunRecord | None
    failure: records.FailureRecord | None
    lm_eval_results: dict | None
    lm_eval_samples: list | None  # lm_eval_output.LmEvalSample
    environment: dict | None
    lock: Lock  # what the audit trusts
    lock_source: str  # in words, for the report's first line
    claimed_lock: Lock | None  # the lock the run folder or bundle carries, if any
    claimed_manifest: dict | None
    card_text: str | None
    report_text: str | None = None  # report.html, in runs and bundles of record schema 3
    record_schema: int | None = None  # run.json's schema_version as written, before any upgrade
    files: dict = field(default_factory=dict)  # the public records' bytes as read and checked: what a bundle packs
    shown_as: str | None = None  # what the reviewer named (a bundle file), for messages; else the folder

    def task_spec(self):
        """The task as the audit's lock defines it for the run's profile (never the record's say-so);
        None when there is no run record or the lock has no such profile."""
        if self.record is None or self.record.profile not in self.lock.profiles:
            return None
        if not hasattr(self, "_spec"):
            self._spec = spec_for(self.lock, self.lock.profile(self.record.profile).task)
        return self._spec

    @functools.cached_property
    def numeric_mode_change(self) -> tuple | None:
        """(the run's mode, the reviewer's mode) when the lock the run carries is the reviewer's but for its
        numeric mode (lock.NUMERIC_MODE_KEYS): a run made before the lock's mode changed."""
        if self.claimed_lock is None or self.trusts_claimed_lock:
            return None

        mine, theirs = self.lock, self.claimed_lock
        if mine.schema_version_read != theirs.schema_version_read:  # the lock level compares the rest by field
            modes = theirs.run_settings["numeric_mode"], mine.run_settings["numeric_mode"]
            return modes if modes[0] != modes[1] else None
        return numeric_mode_change(mine, theirs)

    def settings_for_record(self) -> dict:
        """The reviewer's run settings for the record's profile, in the run's numeric mode when the lock
        level accepted a numeric-mode-only difference (named in the verdict)."""

        record, claimed = self.record, self.claimed_lock
        if record is None:
            raise InternalError("the run's settings are asked of a folder without a record")
        settings = self.lock.settings_for(record.profile, self.task_spec())
        if self.numeric_mode_change is None:
            return settings
        if claimed is None:
            raise InternalError("a numeric-mode change was accepted without the run's own lock")
        # the run's own lock's values, for the keys its record's schema wrote (schema 1 wrote no numeric mode)
        theirs, written = claimed.run_settings, record.settings
        return {**{k: v for k, v in settings.items() if k not in NUMERIC_MODE_KEYS},
                **{k: theirs[k] for k in NUMERIC_MODE_KEYS if k in theirs and k in written}}

    @property
    def trusts_claimed_lock(self) -> bool:
        """--trust-bundle-lock: the audit's lock is the submitter's own."""
        return self.lock is self.claimed_lock

    @property
    def name(self) -> str:
        if self.record:
            return self.record.run_name
        return self.failure.run_name if self.failure else self.path.name


def _optional(path: Path, reader):
    return reader(path) if path.exists() or path.is_symlink() else None


MAX_CANDIDATES = 256  # per question
MAX_CANDIDATE_TEXT = 4096  # characters of a candidate as recorded


def _bounded(record, lock: Lock, samples, where: str) -> None:
    """Id lists and per-question lists bounded by the reviewer's lock before any per-id work (exit 2)."""
    dev, confirm = lock.most_dev_rows(record.profile), lock.split.confirm_rows
    for name, count, limit in (("split.dev_ids", len(record.split.dev_ids), dev),
                               ("split.scored_ids", len(record.split.scored_ids), dev),
                               ("split.confirm", len(record.split.confirm), confirm),
                               ("questions", len(record.questions), dev),
                               (records.LM_EVAL_SAMPLES_FILE, len(samples or ()), dev)):
        if count > 2 * limit + 16:  # slack so that a few extra rows are named by the levels, row by row
            raise InputError(f"{where}: {name}: {count} entries, far more than the {limit} of the reviewer's lock "
                             "(split.dev_rows / split.confirm_rows); refused before any per-id work.")
    for number, question in enumerate(record.questions):
        sizes = (len(question.candidates), *(len(scores) for scores in question.scores.values()),
                 len(question.choice_lengths), len(question.candidate_token_counts))
        if max(sizes) > MAX_CANDIDATES or any(len(c) > MAX_CANDIDATE_TEXT for c in question.candidates):
            raise InputError(f"{where}: questions[{number}]: more than {MAX_CANDIDATES} candidates or a candidate "
                             f"longer than {MAX_CANDIDATE_TEXT} characters.")


def load_run(path: Path, reviewer_lock: Lock, trust_bundle_lock: bool = False) -> RunFolder:
    """The run folder's records read and checked for shape; `reviewer_lock` is the lock the command read once."""
    path = Path(path)
    if not path.is_dir():
        raise InputError(f"{path}: not a run folder (expected the --out folder of run.py).")
    run_file, failure_file = path / records.RUN_FILE, path / records.FAILURE_FILE
    if not (run_file.exists() or run_file.is_symlink()) and not (failure_file.exists() or failure_file.is_symlink()):
        raise InputError(f"{path}: holds neither {records.RUN_FILE} nor {records.FAILURE_FILE}; not a finished run.")
    files = {}

    def read(p: Path) -> bytes:  # each public record read once; the bundle packs these bytes, not a second read
        files[p.name] = strict_json.read_bytes(p)
        return files[p.name]

    def parsed(p: Path):
        return strict_json.loads(read(p), str(p))

    raw_record = _optional(run_file, lambda p: [parsed(p)])  # in a list: the file may hold `null`
    record = None if raw_record is None else records.from_dict(records.RunRecord, raw_record[0], str(run_file))
    failure = _optional(failure_file, lambda p: records.from_dict(records.FailureRecord, parsed(p), str(p)))
    if record is not None and failure is not None:  # a passing run never has a failure record
        raise CheckFailed(f"{path}: holds both {records.RUN_FILE} and {records.FAILURE_FILE}; a run that wrote a "
                          "failure record stopped before its run record, so one of them was added afterwards.")
    made_with = record.versions.get("lm_eval") if record is not None else None
    if made_with != reviewer_lock.evaluator.version and made_with is not None and not trust_bundle_lock:
        raise InputError(f"{path}: the run was made with lm-eval {str(made_with)[:40]}, but the reviewer's lock "
                         f"{reviewer_lock.given} pins lm-eval {reviewer_lock.evaluator.version}; audit it with a lock "
                         "and an environment of the release it was made with.")
    task, metrics = (record.task, record.metrics) if record else (None, ())
    results = _optional(path / records.LM_EVAL_RESULTS_FILE, lambda p: lm_eval_output.check_lm_eval_results(
        parsed(p), task, str(p), metrics) if task else parsed(p))
    samples = _optional(path / records.LM_EVAL_SAMPLES_FILE, lambda p: [
        lm_eval_output.check_lm_eval_sample(raw, f"{p}:{number}")
        for number, raw in enumerate(strict_json.loads_lines(read(p), str(p)), start=1)])
    environment = _optional(path / records.ENVIRONMENT_FILE, parsed)
    if environment is not None and not isinstance(environment, dict):
        raise InputError(f"{path / records.ENVIRONMENT_FILE}: expected a JSON object.")
    claimed_lock = _optional(path / BUNDLE_LOCK, lambda p: lock_from_bytes(strict_json.read_bytes(p), p))
    manifest = _optional(path / BUNDLE_MANIFEST, strict_json.read)
    if manifest is not None and not isinstance(manifest, dict):
        raise InputError(f"{path / BUNDLE_MANIFEST}: expected a JSON object, got {type(manifest).__name__}.")
    card_text = _optional(path / BUNDLE_CARD, lambda p: strict_json.read_bytes(p).decode("utf-8", errors="replace"))
    report_text = _optional(path / records.REPORT_FILE,
                            lambda p: strict_json.read_bytes(p).decode("utf-8", errors="replace"))
    if trust_bundle_lock:
        if claimed_lock is None:
            raise InputError(f"{path}: --trust-bundle-lock given, but the run carries no {BUNDLE_LOCK}.")
        lock, source = claimed_lock, "the bundle's own lock (--trust-bundle-lock: NOT the reviewer's lock)"
    else:
        lock, source = reviewer_lock, f"the reviewer's lock {reviewer_lock.given}"
    if record is not None:
        _bounded(record, lock, samples, str(run_file))
    return RunFolder(path, record, failure, results, samples, environment, lock, source, claimed_lock,
                     manifest, card_text, report_text, record_schema=raw_record[0]["schema_version"] if raw_record
                     else None, files=files)
