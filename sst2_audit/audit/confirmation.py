"""Pre-registration and confirmation, the audit's side: write a pre-registration from audited dev runs,
verify one before its confirmation, and check a confirmation's chain (confirmation -> pre-registration ->
dev records -> the reviewer's lock) with the decision rule re-evaluated from the confirmation runs."""

import os
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.loading import load_run
from sst2_audit.audit.runner import Policy, run_levels
from sst2_audit.formats import prereg as formats
from sst2_audit.formats import records, strict_json
from sst2_audit.protocol.decision import make_rule, outcome, outcome_line, prereg_power, Rule
from sst2_audit.formats.manifest import cache_for
from sst2_audit.run.confirm import card, reconfirmed_words, require_unclaimed
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_bytes, sha256_file


def rule_of(prereg: formats.Preregistration, where: str) -> Rule:
    """The rule a pre-registration states, through the vocabulary's own checks; its words must be the rule's."""
    raw = prereg.rule
    try:
        rule = make_rule(raw.kind, raw.metric, raw.profiles, raw.threshold)
    except InputError as error:
        raise InputError(f"{where}: rule: {error}") from None
    if raw.statement != rule.statement():
        raise CheckFailed(f"{where}: rule.statement: expected {rule.statement()!r} (the rule's fields in words), "
                          f"got {raw.statement!r}.")
    return rule


def _record_levels_pass(folder: Path, lock, cache: Path | None) -> records.RunRecord:
    """A dev run's audit without a rescore (record levels; with a cache, the identity level too): its record."""
    run = load_run(folder, lock)
    if run.record is None:
        raise InputError(f"{folder}: expected a finished run folder (run.json), got none.")
    result = run_levels(run, cache, Policy(rescore=0, identity=cache is not None))
    if result.failed:
        found = "; ".join(f"{level.name}: {problem}" for level in result.levels for problem in level.problems[:2])
        raise CheckFailed(f"dev run {folder}: its audit failed ({', '.join(result.failed)}: {found[:500]}); a "
                          "pre-registration rests only on dev runs that pass their audits.")
    return run.record


def _dev_claims(result: LevelResult, lock, prereg: formats.Preregistration, rule: Rule, dev: dict) -> None:
    """What the pre-registration says of its dev runs and lock, re-derived from the dev records (profile -> record)."""
    result.expect("pre-registration", "evaluator (the lock's)", f"lm-eval {lock.evaluator.version}", prereg.evaluator)
    for entry in prereg.dev_runs:
        record = dev.get(entry.profile)
        if record is not None:
            result.expect(f"dev run {entry.profile}", "run_name, mode, rows, value (its record's)",
                          [record.run_name, record.mode, len(record.questions),
                           record.summaries["official"][rule.metric].value],
                          [entry.run_name, entry.mode, entry.rows, entry.value])
    if sorted(dev) == sorted(rule.profiles):
        result.expect("pre-registration", "dev_outcome (re-evaluated from the dev runs)",
                      outcome(rule, dev, prereg.confirm_rows),
                      prereg.dev_outcome)


def preregister(lock, out: Path, dev_folders: list, kind: str, metric: str, threshold) -> tuple:
    """(the pre-registration, its rule) of a rule over full dev runs whose record levels pass against this lock."""
    runs, entries = {}, []
    for folder in dev_folders:
        relative = os.path.relpath(Path(folder).resolve(), Path(out).resolve().parent)
        if relative.startswith(".."):  # a path that climbs out would publish the machine's folders
            raise InputError(f"--dev-run {folder}: expected a run folder inside the pre-registration's folder "
                             f"({Path(out).resolve().parent}); write the pre-registration beside your runs.")
        record = _record_levels_pass(Path(folder), lock, None)
        if record.mode != "full":
            raise InputError(f"--dev-run {folder}: expected a full run (every dev row), got mode {record.mode!r}.")
        if record.profile in runs:
            raise InputError(f"--dev-run {folder}: a second dev run of profile {record.profile}; one run a profile.")
        if metric not in record.metrics:
            raise InputError(f"--metric {metric}: task {record.task} of {folder} reports {record.metrics}.")
        runs[record.profile] = record
        entries.append(formats.DevRun(record.profile, record.run_name, sha256_file(Path(folder) / records.RUN_FILE),
                                      relative, record.mode, len(record.questions),
                                      record.summaries["official"][metric].value))
    rule = make_rule(kind, metric, list(runs), threshold)
    return formats.Preregistration(
        lock.sha256, f"lm-eval {lock.evaluator.version}", lock.split.confirm_rows,
        formats.DecisionRuleRecord(rule.kind, rule.metric, list(rule.profiles), rule.threshold, rule.statement()),
        entries, outcome(rule, runs, lock.split.confirm_rows)), rule


@dataclass(frozen=True)
class Verified:
    """A pre-registration ready to confirm: its bytes as read once (their sha256 is its identity, the bytes the
    confirmation folder keeps), its rule, each profile's cache and each dev run's folder."""
    data: bytes
    sha256: str
    rule: Rule
    caches: dict
    dev_folders: dict
    power: dict | None = None  # the power the pre-registration states for its sealed rows (decision.prereg_power)


def verify_for_confirm(lock, prereg_file: Path, cache: Path) -> Verified:
    """The pre-registration, once it is not confirmed yet from these caches, matches the lock, and each dev run
    is the one it names (sha256) and passes its audit's record and identity levels."""
    data = strict_json.read_bytes(Path(prereg_file))
    prereg, sha256 = formats.parse_versioned(data, str(prereg_file), formats.Preregistration), sha256_bytes(data)
    # a second attempt is refused before any work
    require_unclaimed({p: cache_for(cache, p) for p in prereg.rule.profiles if p in lock.profiles}, sha256)
    if prereg.lock_sha256 != lock.sha256:
        raise InputError(f"{prereg_file}: lock_sha256 {prereg.lock_sha256[:12]} is not this lock's ({lock.path}, "
                         f"{lock.sha256[:12]}); a pre-registration is confirmed under the lock it names.")
    rule = rule_of(prereg, str(prereg_file))
    if prereg.confirm_rows != lock.split.confirm_rows or lock.split.confirm_rows < 2:
        raise InputError(f"{prereg_file}: confirm_rows {prereg.confirm_rows}: expected the lock's "
                         f"split.confirm_rows ({lock.split.confirm_rows}), at least 2.")
    missing = [p for p in rule.profiles if p not in lock.profiles]
    if missing or [d.profile for d in prereg.dev_runs] != list(rule.profiles):
        raise InputError(f"{prereg_file}: dev_runs and rule.profiles must name the lock's profiles in one order; "
                         f"got {[d.profile for d in prereg.dev_runs]} and {list(rule.profiles)}.")
    caches = {profile: cache_for(cache, profile) for profile in rule.profiles}
    folders, dev = {}, {}
    for entry in prereg.dev_runs:
        folder = Path(prereg_file).parent / entry.path
        run_file = folder / records.RUN_FILE
        if Path(entry.path).is_absolute() or ".." in Path(entry.path).parts or not run_file.is_file():
            raise InputError(f"{prereg_file}: dev run of profile {entry.profile}: expected its run.json at "
                             f"{run_file}, got nothing there.")
        found = sha256_file(run_file)
        if found != entry.run_sha256:
            raise CheckFailed(f"{run_file}: sha256 {found[:12]} is not the one the pre-registration "
                              f"names ({entry.run_sha256[:12]}): the dev record was changed or replaced after it "
                              "was pre-registered.")
        record = _record_levels_pass(folder, lock, caches[entry.profile])
        if record.profile != entry.profile:
            raise CheckFailed(f"{run_file}: profile {record.profile}, the pre-registration names {entry.profile}.")
        folders[entry.profile], dev[entry.profile] = folder, record
    claims = LevelResult("pre-registration")
    _dev_claims(claims, lock, prereg, rule, dev)
    if not claims.passed:
        raise CheckFailed(f"{prereg_file}: what it says of its dev runs is not what their records say: "
                          f"{'; '.join(claims.problems)[:600]}.")
    return Verified(data, sha256, rule, caches, folders, prereg_power(prereg))


def check_chain(folder: Path, record: formats.ConfirmationRecord, lock) -> tuple:
    """(the chain level, the rule or None, preregistration.json's bytes as hashed and read): every link by sha256,
    the reviewer's lock at the root, the rule's outcome re-derived from the confirmation runs' records, the card
    regenerated."""
    result = LevelResult("confirmation chain")
    prereg_file = Path(folder) / formats.PREREG_FILE
    if not prereg_file.is_file():
        result.fail(f"{prereg_file} is missing")
        return result, None, None
    prereg_bytes = strict_json.read_bytes(prereg_file)  # hashed and parsed from one read
    result.expect("confirmation", "preregistration_sha256 (of preregistration.json)",
                  sha256_bytes(prereg_bytes), record.preregistration_sha256)
    prereg = formats.parse_versioned(prereg_bytes, str(prereg_file), formats.Preregistration)
    result.expect("pre-registration", "lock_sha256 (your lock's)", lock.sha256, prereg.lock_sha256)
    result.expect("confirmation", "lock_sha256 (your lock's)", lock.sha256, record.lock_sha256)
    result.expect("pre-registration", "confirm_rows (your lock's)", lock.split.confirm_rows, prereg.confirm_rows)
    try:
        rule = rule_of(prereg, str(prereg_file))
    except (CheckFailed, InputError) as error:
        result.fail(str(error))
        return result, None, prereg_bytes
    result.expect("confirmation", "statement (the pre-registration's rule)", rule.statement(), record.statement)
    dev = {}
    for entry in prereg.dev_runs:
        run_file = Path(folder) / formats.DEV_FOLDER / entry.profile / records.RUN_FILE
        if entry.profile not in rule.profiles or not run_file.is_file():
            result.fail(f"dev run of profile {entry.profile}: {run_file} is missing")
            continue
        if result.expect(f"dev run {entry.profile}", "run.json sha256 (the pre-registration's)", entry.run_sha256,
                         sha256_file(run_file)):
            dev[entry.profile] = records.read(run_file, records.RunRecord)
    _dev_claims(result, lock, prereg, rule, dev)
    result.expect("confirmation", "runs (the rule's profiles, in order)", list(rule.profiles),
                  [run.profile for run in record.runs])
    runs = {}
    for member in record.runs:
        run_file = Path(folder) / formats.CONFIRM_FOLDER / member.profile / records.RUN_FILE
        if member.profile not in rule.profiles or not run_file.is_file():
            result.fail(f"confirmation run of profile {member.profile}: {run_file} is missing")
            continue
        result.expect(f"confirmation run {member.profile}", "run.json sha256", sha256_file(run_file), member.run_sha256)
        result.expect(f"confirmation run {member.profile}", "run (its folder)",
                      f"{formats.CONFIRM_FOLDER}/{member.profile}", member.run)
        run = runs[member.profile] = records.read(run_file, records.RunRecord)
        result.expect(f"confirmation run {member.profile}", "mode and profile", ["confirm", member.profile],
                      [run.mode, run.profile])
        result.expect(f"confirmation run {member.profile}", "rows and values", [
            len(run.questions), run.summaries["official"][rule.metric].value,
            run.summaries["independent"][rule.metric].value],
            [member.rows, member.value_official, member.value_independent])
    if sorted(runs) == sorted(rule.profiles):
        rederived = outcome(rule, runs)
        result.expect("decision", "outcome (re-evaluated from the confirmation runs)", rederived, record.outcome)
        result.expect("decision", "outcome_line", outcome_line(rule, rederived, prereg_power(prereg))
                      + reconfirmed_words(record.prior_confirmations), record.outcome_line)
    result.expect("confirmation", "cannot_know", formats.CANNOT_KNOW, record.cannot_know)
    card_file = Path(folder) / formats.CONFIRMATION_CARD
    result.expect("confirmation", f"{formats.CONFIRMATION_CARD} (regenerated from confirmation.json)", card(record),
                  card_file.read_text(encoding="utf-8") if card_file.is_file() else None)
    return result, rule, prereg_bytes
