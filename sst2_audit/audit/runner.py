"""The audit policy as data: which levels run in which order, which gate the model, and the verdict.

The verdict a reviewer reads says exactly what was verified. PASS (exit 0) means every level
passed and every scored row was rescored bit for bit in the lock's numeric mode on the
reviewer's own machine. Anything less that found no problem is a verdict with its limits named
and exit 4: a structural audit (no score rescored), a sample (`--rescore N`), scores that
matched only within the drift bound (the reviewer's machine cannot run the lock's mode), an
old record schema accepted explicitly, or the submitter's own lock trusted. A finding is FAIL
(exit 1).
"""

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.audit import arithmetic, claims, identity_level, inputs, rescore
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.inputs import Inputs
from sst2_audit.audit.verdict import Outcome
from sst2_audit.pages import plots
from sst2_audit.protocol.numeric import mode_words
from sst2_audit.scoring.model import import_model_code, import_tokenizer_code
from sst2_audit.scoring.shards import Shards
from sst2_audit.util import warm
from sst2_audit.util.errors import CheckFailed

# The oldest record schema the audit accepts without --accept-old-schema, and what older ones cannot prove.
MIN_RECORD_SCHEMA = 3
OLD_SCHEMA_LIMITS = {
    1: "record schema 1: no numeric platform was recorded, the row hashes follow the legacy rule, "
       "the bundle has no report.html or lm-eval notes to check, and its card's cells are not escaped",
    2: "record schema 2: the bundle has no report.html or lm-eval notes to check, its card's cells are not "
       "escaped, and the public token ids were replaced by their hash when upgraded",
}


@dataclass
class Policy:
    rescore: str | int = "all"  # "all", a number of rows, or 0 (--structural)
    identity: bool = True  # False with --arithmetic-only (no cache)
    accept_old_schema: bool = False
    seed: int | None = None
    confirmation: str | None = None  # the pre-registration (sha256) whose verified chain the audited run is part of


@dataclass(frozen=True)
class Context:
    """What every level is given besides the run: the reviewer's cache and the policy."""
    cache: Path
    policy: Policy
    records_failed: bool = False  # an earlier level failed: the identity level loads no tokenizer, hashes no model
    inputs: Inputs | None = None  # built once when the record levels passed
    shards: Shards = field(default_factory=Shards)  # the processes the rescore's rows are shared among


@dataclass(frozen=True)
class Level:
    """One level: check(run, context) -> LevelResult; `skip(policy)` names why it does not run, or None."""
    name: str
    check: Callable[..., LevelResult]
    skip: Callable[[Policy], str | None] | None = None
    limit: str | None = None  # what the verdict names when the level is skipped


# The levels before the rescore, in order: cheapest first, and the model sees rows only after all passed.
LEVELS = (
    Level("lock", claims.check_lock),
    Level("claims", claims.check_claims),
    Level("arithmetic", arithmetic.check),
    Level("identity", identity_level.check, skip=lambda policy: None if policy.identity else "--arithmetic-only",
          limit="identity not checked (--arithmetic-only)"),
)


def _schema_gate(run, policy: Policy, outcome: Outcome) -> None:
    version = run.record_schema
    if version is None or version >= MIN_RECORD_SCHEMA:
        return
    if not policy.accept_old_schema:
        limits = OLD_SCHEMA_LIMITS.get(version, "an unknown old schema")
        raise CheckFailed(f"{run.shown_as or run.path}: record schema {version} is older than {MIN_RECORD_SCHEMA}, the "
                          f"oldest this audit accepts by default ({limits}). "
                          "Audit it anyway with --accept-old-schema; the verdict then names these limits.")
    outcome.limits.append(OLD_SCHEMA_LIMITS.get(version, f"record schema {version}"))


def _warm_libraries(policy: Policy) -> None:
    """matplotlib (the claims level redraws report.html's plot) set up in a background thread while the lock
    level runs; transformers (the identity level's tokenizer) only once the record levels passed (run_levels).
    Each user waits for its warm thread (warm.wait) before touching the library."""

    warm.start("plots", plots.warm)


def _checked(name: str, check) -> LevelResult:
    """check()'s result; a level that stopped on a failed check (a pinned hook file whose bytes differ, a cache
    file changed) is that level's FAIL, so the verdict still opens and closes the audit."""
    try:
        return check()
    except CheckFailed as error:
        result = LevelResult(name)
        result.fail(str(error))
        return result


def _add(outcome: Outcome, level: LevelResult) -> None:
    outcome.levels.append(level)
    outcome.limits += level.unchecked  # what a level saw and could not check is a limit of the verdict


def _load_inputs(run, context: Context) -> Context:
    """The record levels that need no model have passed: only now is anything loaded (a hostile bundle that fails
    them costs no model, tokenizer or transformers import). transformers and the model's code import while the
    cache is hashed, awaited by inputs.build; a structural audit loads no model: the tokenizer's code only, and
    the weights are not hashed. The rescore's record-free work (the reviewer's own rows through the model) then
    runs beside the identity level."""
    rescoring = bool(context.policy.rescore)
    warm.start("transformers", functools.partial(import_model_code if rescoring else import_tokenizer_code,
                                                 Path(context.cache) / "model"))
    return dataclasses.replace(context, inputs=inputs.build(run, context.cache, rescoring))


def run_levels(run, cache, policy: Policy, sums: LevelResult | None = None, shards: Shards | None = None) -> Outcome:
    """Levels in order. The rescore's record-free work (the reviewer's own rows through the model) starts
    at once beside them; the record's scores meet it only after every earlier level passed."""
    outcome = Outcome([sums] if sums else [])
    _schema_gate(run, policy, outcome)
    if run.trusts_claimed_lock:
        outcome.limits.append("audited against the submitter's own lock (--trust-bundle-lock), not the reviewer's")
    if run.numeric_mode_change is not None:
        theirs, mine = run.numeric_mode_change
        outcome.named.append(f"the run was made in numeric mode {mode_words(theirs)}, the lock you gave pins "
                             f"{mode_words(mine)}")
    context = Context(cache, policy, shards=shards or Shards())
    prefetch = None
    _warm_libraries(policy)
    for level in LEVELS:
        if level.name == "identity" and outcome.failed:  # nothing is loaded for a record that failed a level
            context = dataclasses.replace(context, records_failed=True)
        elif level.name == "identity" and policy.identity:
            context = _load_inputs(run, context)
            if policy.rescore:
                prefetch = rescore.start(run, context)
        reason = level.skip(policy) if level.skip else None
        if reason:
            outcome.levels.append(LevelResult(level.name, skipped=reason))
            outcome.limits.append(level.limit)
        else:
            try:
                _add(outcome, _checked(level.name, lambda: level.check(run, context)))
            finally:  # the rescore's thread tokenizes only once the identity level no longer does
                if level.name == "identity" and context.inputs is not None:
                    context.inputs.tokenizer_free.set()
    if run.record is not None and not outcome.failed:  # the reviewer's own spec names the hooks, never the record
        outcome.shared = [f"{hook.key} ({hook.path}::{hook.function})" for hook in run.task_spec().shared_hooks]
    if run.record is None:
        outcome.scores_unverified.append("no run record: the run stopped before scoring was recorded")
        return outcome
    if not policy.rescore or not policy.identity:
        outcome.scores_unverified.append(f"none of the {len(run.record.questions)} scored rows was rescored "
                                         f"({'--arithmetic-only' if not policy.identity else '--structural'})")
        return outcome
    if outcome.failed:
        if prefetch is not None:
            prefetch.stop.set()
        outcome.levels.append(LevelResult("rescore", skipped="an earlier level did not pass; the record's scores "
                                                             "were not compared"))
        return outcome

    rescored = _checked("rescore", lambda: rescore.check(run, context, prefetch))
    outcome.levels.append(rescored)
    outcome.scores_unverified += rescored.sampled
    if rescored.drift_only:
        outcome.drift_only = True
        outcome.limits.append(f"the scores were held to the drift bound only: {rescored.drift_reason}; a reviewer who "
                              "needs bits rescores on a machine whose probe gives the lock's pinned digest")
    return outcome
