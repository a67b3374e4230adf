"""Levels 0 and 1a: the reviewer's lock is the root of trust; everything a person reads is checked.

`lock`: a lock carried by the run or bundle must equal the reviewer's in split rule, salt and
sizes, run settings, evaluator pins and the profile's resources, and run.json must name the
reviewer's lock by its sha256.
`claims`: every field a person reads is re-derived from the reviewer's lock, the protocol and
the installed evaluator and compared: settings (every key, no more, no fewer), demo flag and
notice, mode, run name, resources, evaluator, versions across run.json, environment.json and
lm-eval's results, the effective task config (rebuilt from the installed YAML), and the card.
"""

import dataclasses
from pathlib import PurePosixPath

from sst2_audit.audit.findings import LevelResult, same_json
from sst2_audit.audit.loading import RunFolder
from sst2_audit.formats.lock import numeric_mode_change
from sst2_audit.formats.releases import release_of
from sst2_audit.formats.run_settings import NUMERIC_MODE_KEYS
from sst2_audit.pages import card
from sst2_audit.pages.html_report import page_design, PAGE_DESIGN, render
from sst2_audit.protocol.numeric import mode_words
from sst2_audit.protocol.rules import notice_for
from sst2_audit.task import config as task_config, lm_eval_notes
from sst2_audit.task.evaluator_pin import evaluator_record, files_for
from sst2_audit.task.fewshot import settings_record
from sst2_audit.task.split import CONFIRM_MODE, mode_for
from sst2_audit.util.console import KNOWN_WARNINGS
from sst2_audit.util.environment import versions as installed_versions
from sst2_audit.util.errors import CheckFailed
from sst2_audit.util.sanitize import RUN_NAME

CHECKED_VERSIONS = ("lm_eval", "torch", "transformers", "tokenizers")  # what decides the scores


EVALUATOR_KEYS = ("package", "version", "commit", "wheel")  # with the task's files: what the run depended on


def _lock_differences(mine, theirs, where: str = "") -> list:
    """Paths where two parsed locks differ, e.g. 'profiles.embedded-rte.notice'."""
    if isinstance(mine, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(mine) | set(theirs)):
            here = f"{where}.{key}" if where else str(key)
            if key not in mine or key not in theirs:
                out.append((here, mine.get(key, "<absent>"), theirs.get(key, "<absent>")))
            else:
                out += _lock_differences(mine[key], theirs[key], here)
        return out
    return [] if same_json(mine, theirs) else [(where or "(the whole lock)", mine, theirs)]


def _whole_lock(result: LevelResult, lock, claimed) -> None:
    """The bundled lock must be the reviewer's, every profile, task, pin and note, byte for byte."""
    if claimed.sha256 == lock.sha256:
        result.checks += 1
        return
    differences = _lock_differences(lock.raw, claimed.raw)
    for path, mine, theirs in differences[:40]:
        result.expect("bundled lock", path, mine, theirs)
    if not differences:  # the same content in other bytes (spacing, key order): still not the reviewer's file
        result.fail(f"bundled lock: sha256: expected {lock.sha256!r} (the reviewer's lock), got {claimed.sha256!r} "
                    "(the same fields written differently)")


def check_lock(run: RunFolder, context) -> LevelResult:
    """The lock the run carries must be the reviewer's lock, whole. Only a bundle of an older
    schema accepted explicitly (--accept-old-schema) is compared on what decides its measurement:
    the split, run settings, evaluator, its task's pins and its profile's pins.
    Without a carried lock, run.json must name the reviewer's lock by sha256.
    """
    result = LevelResult("lock")
    lock, claimed, record = run.lock, run.claimed_lock, run.record
    if record is not None:
        if not result.expect("run", "profile (defined by the reviewer's lock)", True, record.profile in lock.profiles):
            return result
        result.expect("run", "task (the reviewer's lock's profile)", lock.profile(record.profile).task, record.task)
        expected_sha = claimed.sha256 if claimed is not None else lock.sha256
        result.expect("run", "lock_sha256 (the lock it carries)" if claimed is not None
                      else "lock_sha256 (the reviewer's lock)", expected_sha, record.lock_sha256)
    if claimed is None:
        if record is None:
            result.skipped = "neither a run record nor a bundled lock to compare"
        return result
    change = run.numeric_mode_change
    if change is not None:  # a run made in another numeric mode: accepted, named here and in the verdict
        result.notes.append(f"the run's lock pins another numeric mode: run {mode_words(change[0])}; "
                            f"yours {mode_words(change[1])}")
    if not (context.policy.accept_old_schema and claimed.schema_version_read != lock.schema_version_read):
        if change is not None and numeric_mode_change(lock, claimed) is not None:
            result.checks += 1  # the reviewer's lock but for its numeric mode
        else:
            _whole_lock(result, lock, claimed)
        return result
    mine_raw, theirs_raw = lock.raw, claimed.raw  # as read (after each one's upgrade chain)
    for key in sorted(set(mine_raw["split"]) | set(theirs_raw["split"])):
        result.expect("bundled lock", f"split.{key}", mine_raw["split"].get(key), theirs_raw["split"].get(key))
    for key in sorted(set(lock.run_settings) | set(claimed.run_settings)):
        if key not in NUMERIC_MODE_KEYS:  # a numeric mode of its own is named by the rescore, not refused
            result.expect("bundled lock", f"run_settings.{key}", lock.run_settings.get(key),
                          claimed.run_settings.get(key))
    for key in EVALUATOR_KEYS:
        result.expect("bundled lock", f"evaluator.{key}", mine_raw["evaluator"].get(key),
                      theirs_raw["evaluator"].get(key))
    if record is None:
        return result
    spec = run.task_spec()

    mine, theirs = files_for(lock, spec), files_for(claimed, spec)
    for path in sorted(set(mine) | set(theirs)):
        result.expect("bundled lock", f"evaluator.files[{path}]", mine.get(path), theirs.get(path))
    result.expect("bundled lock", f"evaluator.tasks.{spec.name}", lock.evaluator.tasks.get(spec.name),
                  claimed.evaluator.tasks.get(spec.name))
    theirs_profile = claimed.profiles.get(record.profile)
    result.expect("bundled lock", f"profiles.{record.profile} (pins sha256)", lock.profile(record.profile).pins_sha256,
                  theirs_profile and theirs_profile.pins_sha256)
    return result


def _resources(result: LevelResult, run: RunFolder, record, profile) -> None:
    lock_pins = {f"model/{PurePosixPath(f.path).name}": f.sha256 for f in profile.model.files}
    listed = {entry.path: entry for entry in record.resources}
    result.expect("resources", "count (unique paths)", len(record.resources), len(listed))
    model_paths = sorted(p for p, e in listed.items() if e.role == "model")
    result.expect("resources", "model files (the lock's)", sorted(lock_pins), model_paths)
    for path in model_paths:
        pin = lock_pins.get(path)
        result.expect(f"resource {path}", "locked_sha256 (the lock's pin)", pin, listed[path].locked_sha256)
        if pin:
            result.expect(f"resource {path}", "sha256 (the lock's pin)", pin, listed[path].sha256)
    roles = sorted(e.role for e in record.resources if e.role != "model")
    wheel = profile.model.get("wheel")
    others = [f.split for f in profile.data.files] + (["download"] if wheel else [])
    result.expect("resources", "other roles", sorted(others), roles)
    for entry in record.resources:
        if entry.role == "download" and wheel:
            result.expect(f"resource {entry.path}", "sha256 (the lock's wheel)", wheel["sha256"], entry.sha256)
    if run.claimed_manifest is not None:
        manifest_files = run.claimed_manifest.get("files") if isinstance(run.claimed_manifest, dict) else None
        result.expect("bundled manifest", "files (equal to run.json's resources)",
                      [dataclasses.asdict(entry) for entry in record.resources], manifest_files)
        for key, expected in (("profile", record.profile), ("pins_sha256", profile.pins_sha256),
                              ("lock_fully_hashed", profile.fully_hashed), ("demo", profile.demo)):
            result.expect("bundled manifest", key, expected, run.claimed_manifest.get(key))


ENVIRONMENT_KEYS = ["installed_packages", "machine", "platform", "versions"]
MACHINE_KEYS = ["logical_cpus", "memory_total_bytes", "platform", "processor"]
MANIFEST_KEYS = ["demo", "files", "lock_fully_hashed", "pins_sha256", "profile", "schema", "schema_version"]
RESULTS_KEYS = ["config", "configs", "date", "eot_token_id", "git_hash", "group_subtasks", "higher_is_better",
                "lm_eval_version", "max_length", "n-samples", "n-shot", "pretty_env_info", "results",
                "tokenizer_bos_token", "tokenizer_eos_token", "tokenizer_pad_token", "transformers_version",
                "upper_git_hash", "versions"]
RESULTS_PER_TASK = ("configs", "group_subtasks", "higher_is_better", "n-samples", "n-shot", "results", "versions")


def _exact_fields(result: LevelResult, run: RunFolder, record) -> None:
    """No field rides along unchecked: every file's keys are exactly those the writer writes."""

    if run.environment is not None:
        keys = ENVIRONMENT_KEYS if (run.record_schema or 0) >= 2 else [k for k in ENVIRONMENT_KEYS if k != "platform"]
        result.expect("environment.json", "fields", keys, sorted(run.environment))
        machine = run.environment.get("machine")
        result.expect("environment.json", "machine fields", MACHINE_KEYS,
                      sorted(machine) if isinstance(machine, dict) else machine)
        packages = run.environment.get("installed_packages")
        result.expect("environment.json", "installed_packages (a list of 'name==version' texts)", True,
                      isinstance(packages, list) and all(isinstance(p, str) and len(p) < 200 for p in packages))
    result.expect("versions", "packages (those sst2-audit records)", sorted(installed_versions()),
                  sorted(record.versions))
    if run.claimed_manifest is not None:
        result.expect("bundled manifest", "fields", MANIFEST_KEYS, sorted(run.claimed_manifest))
    if run.lm_eval_results is not None:
        result.expect("lm-eval results", "fields", RESULTS_KEYS, sorted(run.lm_eval_results))
        _results_fields(result, run, record)
    if record.third_party_log is not None:  # informational counts, but only of messages that exist, and positive
        known = {name for name, _ in KNOWN_WARNINGS} | {"other lines"}
        for name, count in record.third_party_log.items():
            result.expect("third_party_log", f"{name[:80]!r} (a known message, counted at least once)", True,
                          name in known and count >= 1)


def _results_fields(result: LevelResult, run: RunFolder, record) -> None:
    """lm-eval's results: one task in each per-task section, and n-samples as the lock's release counts them."""
    release = release_of(run.lock.evaluator.version)
    for section in RESULTS_PER_TASK:
        value = run.lm_eval_results.get(section)
        named = [] if section == "group_subtasks" and not release.group_subtasks_names_plain_tasks else [record.task]
        listed = sorted(value) if isinstance(value, dict) else value
        result.expect("lm-eval results", f"{section} (tasks)", named, listed)
    counts = (run.lm_eval_results.get("n-samples") or {}).get(record.task)
    rows = run.lock.split.dev_rows + run.lock.split.confirm_rows
    well_formed = (isinstance(counts, dict) and sorted(counts) == ["effective", "original"]
                   and all(type(v) is int for v in counts.values()) and rows <= counts["original"] <= 10 ** 9)
    if release.n_samples_effective_is_scored:
        result.expect("lm-eval results", f"n-samples.{record.task} (original = the split's rows, at least {rows}; "
                      "effective = the scored rows)", True,
                      well_formed and counts["effective"] == len(record.questions))
    else:
        result.expect("lm-eval results", f"n-samples.{record.task} (original = effective = the split's rows, "
                      f"at least {rows})", True, well_formed and counts["effective"] == counts["original"])


def _schema_fields(result: LevelResult, run: RunFolder, record) -> None:
    """Fields the record's own schema requires cannot be left out to dodge their checks."""
    version = run.record_schema or 0
    if version >= 2:
        result.expect("run", f"platform (required by record schema {version})", True, record.platform is not None)
    if version >= 3:
        for name in ("lm_eval_notes", "third_party_log"):
            result.expect("run", f"{name} (required by record schema {version})", True,
                          getattr(record, name) is not None)
        result.expect("run", f"lm-eval's results and samples (required by record schema {version})", True,
                      run.lm_eval_results is not None and run.lm_eval_samples is not None)


def _versions(result: LevelResult, run: RunFolder, record) -> None:
    here = installed_versions()
    result.expect("versions", "lm_eval (the lock's evaluator pin)", run.lock.evaluator.version,
                  record.versions.get("lm_eval"))
    for name in CHECKED_VERSIONS:
        result.expect("versions", f"{name} (installed here)", here.get(name), record.versions.get(name))
    if run.environment is not None:
        result.expect("environment.json", "versions (equal to run.json's)", record.versions,
                      run.environment.get("versions"))
        result.expect("environment.json", "platform (equal to run.json's)", record.platform,
                      run.environment.get("platform"))
    if run.lm_eval_results is not None:
        result.expect("lm-eval results", "lm_eval_version", record.versions.get("lm_eval"),
                      run.lm_eval_results.get("lm_eval_version"))
        result.expect("lm-eval results", "transformers_version", record.versions.get("transformers"),
                      run.lm_eval_results.get("transformers_version"))


def _task_config(result: LevelResult, lock, spec, record) -> None:
    """The effective config lm-eval logged, rebuilt from the installed, pinned YAML and the data files."""

    data_files = {e.role: f"<cache>/{e.path}" for e in record.resources if e.role in spec.splits}
    config = task_config.data_config(spec, data_files, callables=False)
    num_fewshot = lock.settings_for(record.profile, spec)["num_fewshot"]
    config["num_fewshot"] = num_fewshot
    try:
        defaults = task_config.taskconfig_defaults(lock)
        release = release_of(lock.evaluator.version)
        effective = task_config.effective(config, defaults, release,
                                          task_config.nested_hooks(spec) if release.fills_fewshot_config else None)
    except CheckFailed as error:
        result.fail(f"task_config: {error}")
        return
    result.expect("task_config", "effective (rebuilt from the installed YAML)", effective,
                  record.task_config.get("effective"))
    try:
        differences = task_config.differences(spec, effective, num_fewshot, defaults, release)
    except CheckFailed as error:  # a difference outside data loading is a finding here
        result.fail(f"task_config: {error}")
        return
    result.expect("task_config", "differences", differences, record.task_config.get("differences"))
    result.expect("task_config", "keys", ["differences", "effective"], sorted(record.task_config))


def check_claims(run: RunFolder, context) -> LevelResult:
    result = LevelResult("claims")
    record, lock = run.record, run.lock
    if record is None or record.profile not in lock.profiles:
        result.skipped = "no run record" if record is None else f"profile {record.profile!r} is not in the lock"
        return result
    profile, spec = lock.profile(record.profile), run.task_spec()
    result.expect("run", "run_name (a safe slug)", True, bool(RUN_NAME.match(record.run_name)))
    result.expect("run", "settings", settings_record(run.settings_for_record(), spec), record.settings)
    result.expect("run", "demo (the lock's profile)", profile.demo, record.demo)
    result.expect("run", "notice (the lock's profile)", notice_for(profile), record.notice)
    result.expect("run", "lock_fully_hashed (the lock's profile)", profile.fully_hashed, record.lock_fully_hashed)
    dev = record.split.dev_ids
    mode = mode_for(record.split.scored_ids, dev, [c.idx for c in record.split.confirm])
    result.expect("run", "mode (from the scored ids)", mode, record.mode)
    if record.mode == CONFIRM_MODE and context.policy.confirmation is None:  # its pre-registration decides
        result.fail("a confirmation run (mode confirm) is audited with its confirmation folder, the one holding "
                    "confirmation.json and preregistration.json: only that chain shows it was pre-registered")
    result.expect("split", "salt (the lock's)", lock.split.salt, record.split.salt)
    result.expect("split", "rule (the lock's)", lock.split.rule, record.split.rule)
    result.expect("split", "confirmation rows (the lock's count)", lock.split.confirm_rows, len(record.split.confirm))
    result.expect("run", "task (the lock's profile)", spec.name, record.task)

    result.expect("run", "evaluator", evaluator_record(lock, files_for(lock, spec), spec), record.evaluator)
    _resources(result, run, record, profile)
    _versions(result, run, record)
    _exact_fields(result, run, record)
    _schema_fields(result, run, record)
    _task_config(result, lock, spec, record)
    if not result.passed:  # a page is regenerated only from records whose every field checked out
        result.notes.append("CARD.md and report.html not regenerated: the fields above failed")
        return result
    try:
        if run.card_text is not None:
            _regenerated(result, "CARD.md", card.render(record, lock, run.record_schema or 0), run.card_text)
        _report(result, run, lock, spec, record)
    except (ArithmeticError, LookupError, TypeError, ValueError) as error:  # records inconsistent in themselves
        result.fail(f"CARD.md / report.html cannot be regenerated from these records ({type(error).__name__}: "
                    f"{str(error)[:120]}); the arithmetic level names what is inconsistent")
    return result


def _report(result: LevelResult, run: RunFolder, lock, spec, record) -> None:
    """report.html must be the page regenerated from the checked records (runs of schema 3 have one)."""

    if record.lm_eval_notes is not None and run.lm_eval_results is not None:
        result.expect("run", "lm_eval_notes (re-derived from lm-eval's results)",
                      lm_eval_notes.notes_for(run.lm_eval_results, record), record.lm_eval_notes)
    if run.report_text is None:
        if record.lm_eval_notes is not None:
            result.fail("report.html is missing; every run of record schema 3 has one")
        return
    design = page_design(run.report_text, run.record_schema or 0)
    if design != PAGE_DESIGN:  # a page this version does not render: labelled, never read as evidence
        result.unchecked.append(f"report.html is of page design {design}, not this version's ({PAGE_DESIGN}): not "
                                "regenerated, so its text is the submitter's claim; `audit --report FILE` writes the "
                                "page of the checked records")
        return
    _regenerated(result, "report.html", render(record, lock, spec, written_schema=run.record_schema), run.report_text)


def _regenerated(result: LevelResult, name: str, regenerated: str, bundled: str) -> None:
    """A page a person reads (CARD.md, report.html) must be the one regenerated from the checked
    records, byte for byte."""
    if regenerated == bundled:
        result.checks += 1
        return
    expected, got = regenerated.splitlines(), bundled.splitlines()
    first = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))

    def line(lines):
        return repr(lines[first]) if first < len(lines) else "(end)"

    result.fail(f"{name} differs from the one regenerated from the checked records at line {first + 1}: "
                f"expected {line(expected)}, got {line(got)}")
