"""Adopting a plain `lm_eval --log_samples --output_path` run: its files checked against the reviewer's lock and
cache, level by level, cheapest first, and every logged score rescored by the independent path.

The levels: claims (release, the logged task config against the pinned YAML, shots, seeds, the samples file
bound to the results file by lm-eval's own task hash), arithmetic (each logged per-document value re-derived
from the logged scores and the reviewer's row, and lm-eval's aggregation of them against the results file),
identity (every logged doc_id's row, prompt, target and, in lm-eval's own file, the doc and request strings),
rescore (every row but the sealed ones, or a drawn sample). The model is loaded only after the earlier levels
passed. The same levels re-check an adopted folder's public copy (audit --out), which lacks the text fields.
"""

import functools
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.audit import adopt_chat
from sst2_audit.audit.adopt_shape import AdoptShape, UNTOKENIZED
from sst2_audit.audit.adopt_scores import Bound, bound_for, claimed_dtype, FlipTest
from sst2_audit.audit.findings import LevelResult, shown
from sst2_audit.audit.row_set import check_row_set, most_lines, RowSet
from sst2_audit.audit.verdict import Outcome
from sst2_audit.formats.adopted import AdoptedQuestion
from sst2_audit.formats.lighteval_details import LightevalOutput
from sst2_audit.formats.lm_eval_output import PlainOutput
from sst2_audit.formats.lock import Lock, Profile
from sst2_audit.formats.releases import release_of
from sst2_audit.protocol.metrics import METRICS, result_key
from sst2_audit.protocol.rules import doc_hash
from sst2_audit.scoring.identity import expected_questions
from sst2_audit.scoring.shards import Shards
from sst2_audit.scoring.summaries import bootstrap_iters
from sst2_audit.task.config import differences, taskconfig_defaults
from sst2_audit.task.fewshot import rule_for
from sst2_audit.task.hooks import stable
from sst2_audit.task.rows import shot_plan, SplitRows, verified_rows
from sst2_audit.task.spec import TaskSpec
from sst2_audit.util.errors import CheckFailed, InputError, InternalError
from sst2_audit.util.hashing import sha256_text

CLAIMED = ("model", "model_args", "model_dtype", "model_revision", "model_sha", "device", "batch_size",
           "random_seed", "numpy_seed", "torch_seed", "fewshot_seed", "limit")


@dataclass
class Adoption:
    """One adoption's context, built once per command: the reviewer's lock, profile, spec and cache, the files."""
    lock: Lock
    profile: Profile
    spec: TaskSpec
    cache: Path
    output: PlainOutput | LightevalOutput  # lm-eval's files, or a lighteval run's (audit/adopt_lighteval.py)
    rescore: str | int = "all"  # "all", a number of rows, or 0 (--structural)
    seed: int | None = None
    bound_given: float | None = None
    data: SplitRows | None = None  # once the cache's data was verified
    questions: dict = field(default_factory=dict)  # doc_id -> AdoptedQuestion, built by the levels
    claims: dict = field(default_factory=dict)
    differences: dict = field(default_factory=dict)
    bound: Bound | None = None
    claims_bound: Bound | None = None  # the claims level's bound, where the rescore did not take the claim
    flips: FlipTest | None = None  # the rescore's prediction flips
    dtype: str | None = None  # the dtype the run claims (adopt_scores.claimed_dtype): what widened the bound
    rederived: dict = field(default_factory=dict)
    shards: Shards = field(default_factory=Shards)  # the processes the rescore's rows are shared among
    # doc_id -> the rescore's input (scoring/independent.py::EncodedPair list): a multiple_choice row's candidates, a
    # loglikelihood_rolling document's windows; kept only when a rescore reads them
    requests: dict = field(default_factory=dict)
    # a generate_until task's rows (audit/adopt_generation.py): context tokens, references, logged lines by filter
    contexts: dict = field(default_factory=dict)
    references: dict = field(default_factory=dict)
    lines: dict = field(default_factory=dict)
    recorded_ties: dict = field(default_factory=dict)  # re-auditing our public copy: doc_id -> adopted.json's ties
    row_set: RowSet | None = None  # the logged rows against the rules a reviewer recognises (audit/row_set.py)
    models: dict = field(default_factory=dict)  # adopt_rescore.model_key -> (model, tokenizer, scores)
    model_args: dict = field(default_factory=dict)  # the run's model_args as its release parses them (claims level)
    no_rescore: str = "--structural"  # why rescore is 0, in the verdict's words
    tokens_claimed: bool = False  # auditing an adopted folder whose record holds tokens (or rescores): derive them
    shape: AdoptShape = field(kw_only=True)  # what differs by the task's shape (audit/adopt_shapes.py picks it)

    @property
    def split_rows(self) -> SplitRows:
        if self.data is None:
            raise InternalError("the cache's data is verified by the claims level before any row is read")
        return self.data

    @property
    def settings(self) -> dict:
        return self.lock.settings_for(self.profile.name, self.spec)

    @functools.cached_property
    def located(self) -> dict:
        """doc_hash -> the row positions holding that doc: where a mislabelled sample's doc really is (built when a
        logged doc_hash first differs)."""
        found: dict = {}
        for idx, row in self.split_rows.by_idx.items():
            found.setdefault(doc_hash(row.as_doc()), []).append(idx)
        return found


def parse_model_args(logged, release) -> dict:
    """The model_args a run logged, as lm-eval merges them into every task's metadata (SOURCE_MAP step 71): 0.4.9.2
    logs the CLI's string and simple_evaluate parses it (simple_parse_args_string, handle_arg_string); 0.4.13's
    CLI logs the dict it parsed (its handle_arg_string also reads quotes, None and signed integers)."""
    if isinstance(logged, dict):
        if not all(isinstance(key, str) for key in logged):
            raise InputError("results: config.model_args: expected a string or an object with string keys, got "
                             f"keys {shown(str(list(logged)))}.")
        return dict(logged)
    if logged is not None and not isinstance(logged, str):
        raise InputError(f"results: config.model_args: expected a string or an object, got "
                         f"{type(logged).__name__}.")
    if not logged or not logged.strip():
        return {}
    return {key: _arg_value(value, release.typed_model_args)
            for key, _, value in (argument.partition("=") for argument in logged.strip().split(",") if argument)}


def _arg_value(value: str, typed: bool):
    """handle_arg_string of the release (lm_eval/utils.py)."""
    if typed:
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            return value[1:-1]
        if value.lower() == "none":
            return None
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    digits = value.lstrip("+-") if typed else value
    if (digits.isdigit() if typed else digits.isnumeric()) and value not in ("", "+", "-"):
        try:
            return int(value)
        except ValueError:  # a numeric character int() does not read: lm-eval itself fails on it
            return value
    try:
        return float(value)
    except ValueError:
        return value


def task_hash(samples) -> str:
    """lm-eval's task_hashes[task]: the sha256 of every sample's doc, prompt and target hashes in file order."""
    return sha256_text("".join(s.doc_hash + s.prompt_hash + s.target_hash for s in samples))


def _config_checked(level: LevelResult, adoption: Adoption, logged: dict, model_args: dict, release) -> None:
    """The logged effective config against the pinned YAML: only data fields may differ, besides the model_args
    lm-eval merges into `metadata` and what the release's task factory drops or adds (SOURCE_MAP step 71)."""
    pinned = adoption.spec.config(callables=False)
    official = pinned.get("metadata") or {}
    metadata = logged.get("metadata") if isinstance(logged.get("metadata"), dict) else {}
    merged = {key: value for key, value in metadata.items() if key not in official and model_args.get(key) == value}
    added = {key: metadata[key] for key in release.factory_metadata_keys
             if key not in official and isinstance(metadata.get(key), str)}
    kept = {k: v for k, v in metadata.items() if k not in merged and k not in added}
    config = dict(logged, metadata=kept) if metadata else dict(logged)
    if not config.get("metadata") and "metadata" not in pinned:
        config.pop("metadata", None)
    dropped = [key for key in release.factory_structural_keys if key in pinned and key not in logged]
    config.update({key: pinned[key] for key in dropped})
    if added or dropped:
        level.notes.append(f"lm-eval {release.version}'s task factory "
                           + "; ".join(([f"dropped {', '.join(dropped)} from the logged config (the pinned YAML's "
                                         "value is taken)"] if dropped else [])
                                       + [f"logged metadata.{key} {shown(value)} (a claim)"
                                          for key, value in added.items()]))
    try:
        # a hook 0.4.13's fewshot_config inherits is logged as str(): its memory address means nothing (hooks.stable)
        adoption.differences = differences(adoption.spec, stable(config), adoption.settings["num_fewshot"],
                                           taskconfig_defaults(adoption.lock), release)
        level.checks += 1
    except CheckFailed as error:
        level.fail(str(error))


def check_claims(adoption: Adoption) -> LevelResult:
    level, results, task = LevelResult("claims"), adoption.output.results, adoption.spec.name
    config = results["config"]
    release = release_of(adoption.lock.evaluator.version)
    _release_checked(level, results.get("lm_eval_version"), release.version)
    model_args = adoption.model_args = parse_model_args(config.get("model_args"), release)
    logged = (results.get("configs") or {}).get(task)
    if logged is None:  # a minimised results file: say what is missing and what is still checked
        level.unchecked.append(f"results: configs.{task} is missing (a minimised results file): the logged task "
                               "config cannot be compared with the pinned YAML; still checked: the release, n-shot, "
                               "the seeds, the task hash binding the samples, every logged row against your rows and "
                               f"prompts, the numbers{' and the rescore' if adoption.rescore else ''}")
    else:
        _config_checked(level, adoption, logged, model_args, release)
    level.expect("results", f"n-shot.{task}", adoption.settings["num_fewshot"], results["n-shot"][task])
    level.expect("results", f"results.{task}.alias", *_alias(adoption, results["results"][task].get("alias", task)))
    level.expect("samples", f"filters (a {adoption.spec.shape.name} task's)",
                 adoption.spec.shape.logged_filters(adoption.spec),
                 sorted({sample.filter for sample in adoption.output.samples}))
    if adoption.settings["num_fewshot"] and rule_for(adoption.spec).sampler != "first_n":
        # the default sampler draws the shots from the fewshot seed (SOURCE_MAP step 22); first_n draws nothing at
        # random (BBH's literal shots, MMLU's dev rows), so a run with lm-eval's default seed 1234 is the same run
        level.expect("results", "config.fewshot_seed", adoption.settings["seed"], config.get("fewshot_seed"))
    adopt_chat.check(adoption, level)  # the template, system instruction and multi-turn shots against the profile
    hashes = results.get("task_hashes") if isinstance(results.get("task_hashes"), dict) else {}
    if task in hashes:  # absent in a run without --log_samples, which adopt refuses earlier
        level.expect("results", f"task_hashes.{task} (binds the samples file to this results file)",
                     task_hash(adoption.output.samples), hashes[task])
    else:
        level.fail(f"results: task_hashes.{task} is missing: the samples file cannot be bound to the results file.")
    adoption.row_set = check_row_set(adoption, level)
    level.notes.append(adoption.row_set.words())
    adoption.claims = {key: config.get(key) for key in CLAIMED if key in config}
    adoption.claims.update({key: results.get(key) for key in ("transformers_version", "max_length", "model_name")})
    if not level.problems:  # a run the lock contradicts is a FAIL, whatever dtype it names (or none: exit 2)
        adoption.dtype, words = claimed_dtype(results, model_args)
        adoption.bound = bound_for(adoption.bound_given, adoption.dtype, adoption.spec.shape.decodes, words)
    level.notes.append(f"claimed, not checkable here: model {shown(str(config.get('model_args')))}, dtype "
                       f"{config.get('model_dtype')!r}, device {config.get('device')!r}, batch size "
                       f"{config.get('batch_size')!r}; the rescore is the check of the model")
    return level


def _release_checked(level: LevelResult, logged, pinned: str) -> None:
    """The release the run names against the lock's. lm-eval 0.4.8 and earlier name none (the Open LLM Leaderboard
    v2's details were written by such a release): said, and the run is held to the pinned release's computation
    row by row like any other (every prompt re-derived by its YAML, every number re-derived, every score rescored),
    so a release left out of the file buys nothing."""
    if logged is not None:
        level.expect("results", "lm_eval_version", pinned, logged)
        return
    level.notes.append(f"results: lm_eval_version is not logged (lm-eval 0.4.8 and earlier log none, the Open LLM "
                       f"Leaderboard v2's writer among them; docs/formats.md): the run is held to lm-eval {pinned}'s "
                       "computation, which every row's prompt, number and score below is re-derived by")


def _alias(adoption: Adoption, logged) -> tuple:
    """(expected, logged) alias: the pinned YAML's task_alias (else the task's name); lm-eval's printer prefixes a
    group's subtask with " - " (one more space each level down), in the results file too (SOURCE_MAP step 87)."""
    expected = adoption.spec.config(callables=False).get("task_alias") or adoption.spec.name
    if isinstance(logged, str) and logged.lstrip(" ").startswith("- ") and logged.lstrip(" ")[2:] == expected:
        return expected, logged.lstrip(" ")[2:]
    return expected, logged


def _row_facts(adoption: Adoption, sample, level: LevelResult) -> AdoptedQuestion | None:
    """The row a sample's doc_id names, as the arithmetic level needs it (label, choice lengths): no tokenizer."""
    row = adoption.split_rows.by_idx.get(sample.doc_id)
    if row is None:
        level.fail(f"doc_id {sample.doc_id}: not a row of the {adoption.spec.eval_split} split "
                   f"({len(adoption.split_rows.by_idx)} rows)")
        return None
    spec, doc = adoption.spec, row.doc
    choices = spec.choices(doc)
    true_choices = spec.true_choices(doc, len(choices))
    metrics = {m: sample.metrics[METRICS[m].reported_as] for m in spec.metrics
               if METRICS[m].reported_as in sample.metrics}
    return AdoptedQuestion(sample.doc_id, spec.gold(doc, choices), "", "", "", 0, [], "", [len(c) for c in choices],
                           [], list(sample.scores), None, metrics, "not drawn", None,
                           list(true_choices) if true_choices is not None else None)


def check_arithmetic(adoption: Adoption) -> LevelResult:
    level, spec, output = LevelResult("arithmetic"), adoption.spec, adoption.output
    for sample in output.samples:
        question, where = adoption.questions[sample.doc_id], f"doc_id {sample.doc_id}"
        level.expect(where, "filtered_resps (filter none: the first response)", sample.scores, sample.filtered)
        if len(sample.scores) != len(question.choice_lengths):
            level.fail(f"{where}: {len(sample.scores)} scores for {len(question.choice_lengths)} choices")
            continue
        for metric in spec.metrics:
            if metric not in question.logged_metrics:
                level.fail(f"{where}: no logged {METRICS[metric].reported_as}")
                continue
            ours = METRICS[metric].value(question.logged, question)
            if not METRICS[metric].agrees(ours, question.logged_metrics[metric], exact=False):
                level.fail(f"{where}: {metric}: the logged scores give {ours!r}, the sample logs "
                           f"{question.logged_metrics[metric]!r}")
    if level.problems:
        return level
    ordered = [adoption.questions[idx] for idx in sorted(adoption.questions)]  # lm-eval aggregates in doc_id order
    task = output.results["results"][spec.name]
    for metric in spec.metrics:
        reported = METRICS[metric].reported_as
        number, stderr = METRICS[metric].aggregate([q.logged_metrics[metric] for q in ordered],
                                                   bootstrap_iters(adoption.settings))
        adoption.rederived.update({metric: number, f"{metric}_stderr": stderr})
        level.expect("results", result_key(reported), number, task[result_key(reported)])
        level.expect("results", result_key(reported, stderr=True), stderr, task[result_key(reported, stderr=True)])
    return level


def _identity_of(sample, expected) -> tuple:
    """(expected, logged) field values of one sample; the text fields only where the file has them."""
    want = {"doc_hash": expected.doc_hash, "prompt_hash": expected.prompt_hash,
            "target_hash": sha256_text(str(expected.target))}
    got = {"doc_hash": sample.doc_hash, "prompt_hash": sample.prompt_hash, "target_hash": sample.target_hash}
    logged = sample.logged  # digests of the text lm-eval's own file logs (our public copy holds none)
    if logged is not None:  # compared as hashes: no data text in a finding
        want["doc_hash (of the logged doc)"], got["doc_hash (of the logged doc)"] = expected.doc_hash, logged.doc_hash
        want["arguments (sha256 of each context and continuation)"] = [
            [sha256_text(c), sha256_text(k)] for c, k in zip(expected.contexts, expected.candidates)]
        got["arguments (sha256 of each context and continuation)"] = [
            [c, k] for c, k in zip(logged.contexts, logged.continuations)]
        want["prompt_hash (of the logged context)"] = expected.prompt_hash
        got["prompt_hash (of the logged context)"] = logged.contexts[0] if logged.contexts else None
        want["target (sha256)"], got["target (sha256)"] = sha256_text(str(expected.target)), logged.target
    return want, got


def expect_identity(level: LevelResult, adoption: Adoption, sample, want: dict, got: dict) -> None:
    """One sample's (expected, logged) identity fields compared; a doc_hash that differs is located among the split's
    rows (lm-eval #4084's mislabelling named as such)."""
    for name in want:
        if not level.expect(f"doc_id {sample.doc_id}", name, want[name], got[name]) and name == "doc_hash":
            holders = adoption.located.get(sample.doc_hash)
            level.notes.append(f"logged doc_id {sample.doc_id} holds the doc of row idx {holders} (mislabelled: "
                               "lm-eval #4084)" if holders else f"logged doc_id {sample.doc_id}: its doc is no "
                               "row of the split")


def _rows_named(adoption: Adoption, level: LevelResult) -> None:
    """Each sample's doc_id a row of the split, logged once: the questions the later levels fill in."""
    for sample in adoption.output.samples:
        if sample.doc_id in adoption.questions:
            level.fail(f"doc_id {sample.doc_id}: logged twice")
            continue
        question = _row_facts(adoption, sample, level)
        if question is not None:
            adoption.questions[sample.doc_id] = question


def check_identity(adoption: Adoption, tokenizer, identity_of=None) -> LevelResult:
    """Every logged row against the reviewer's row its doc_id names; identity_of(sample, expected) gives the
    (expected, logged) fields the writer logs (default: lm-eval's, _identity_of)."""
    level, settings = LevelResult("identity"), adoption.settings
    _rows_named(adoption, level)
    if level.problems:
        return level
    ids = sorted(adoption.questions)  # lm-eval draws each doc's shots in doc order (SOURCE_MAP step 22)
    shots = shot_plan(adoption.lock, adoption.profile, adoption.spec, adoption.cache, adoption.split_rows.manifest,
                      adoption.split_rows, ids)
    samples = adoption.output.samples
    expected_rows = expected_questions([adoption.split_rows.by_idx[sample.doc_id] for sample in samples],
                                       adoption.spec, tokenizer, settings["max_length"], settings["add_bos_token"],
                                       shots)
    for sample, expected in zip(samples, expected_rows):
        question = adoption.questions.get(sample.doc_id)
        expect_identity(level, adoption, sample, *(identity_of or _identity_of)(sample, expected))
        public = expected.public_fields()
        question.doc_hash, question.prompt_hash = expected.doc_hash, expected.prompt_hash
        question.target_hash = sha256_text(str(expected.target))
        question.context_length, question.shots = public["context_length"], public["shots"]
        question.candidate_token_counts = public["candidate_token_counts"]
        question.candidate_tokens_sha256 = public["candidate_tokens_sha256"]
        # the rescore's input, not a record field: kept only when a rescore will read it (a row's token lists are
        # most of an adoption's memory: about 25 KB a row of a 400-token context, measured)
        if adoption.rescore:
            adoption.requests[sample.doc_id] = expected.pairs()
    if adoption.spec.draws_random:
        level.notes.append(seeded_docs_note(adoption))
    if tokenizer is None:  # lm-eval logs no tokens: only a rescore reads them (AdoptShape.tokenizes)
        level.notes.append(UNTOKENIZED)  # implied by the verdict's "none rescored": not another limit
    return level


def seeded_docs_note(adoption: Adoption) -> str:
    return (f"the expected docs are drawn as the task's process_docs hook draws them after lm-eval's "
            f"random.seed({adoption.output.results['config']['random_seed']}) (the run's config.random_seed) in a "
            "fresh datasets cache; a run made where datasets had cached that map under another seed shows that "
            "seed's choice order, and an edited order shows none")


def prepare_rows(adoption: Adoption, roles) -> None:
    """The reviewer's rows and the model's files but its weights (the tokenizer and configs the identity level
    loads), hashed against the lock before they are read (exit 1 when a cache file differs); the weights are hashed
    before their load, beside the levels (adopt_rescore.run_levels)."""
    adoption.data = verified_rows(adoption.lock, adoption.profile, adoption.spec, adoption.cache,
                                  roles=(*roles, "model"), weights=False,
                                  random_seed=adoption.output.random_seed)  # the run's claim
    if len(adoption.output.samples) > most_lines(len(adoption.split_rows.by_idx), adoption.spec):
        raise InputError(f"{adoption.output.samples_path}: {len(adoption.output.samples)} samples for a split of "
                         f"{len(adoption.split_rows.by_idx)} rows; refused before any per-row work.")


def record_levels(adoption: Adoption, tokenizer) -> Outcome:
    """The levels before the model, in order; a failed level stops the next. Identity comes before arithmetic
    here: the arithmetic re-derives each logged value from the row's label, which means something only for the
    row the doc_id really names (a mislabelled run, lm-eval #4084, is named as such, not as wrong values)."""
    outcome = Outcome([], rescored_as=adoption.shape.rescored_as)
    identity, arithmetic = adoption.shape.record_checks()
    for check in (adoption.shape.claims_level() or check_claims,
                  lambda a: identity(a, tokenizer() if adoption.shape.tokenizes(a) else None), arithmetic):
        level = check(adoption)
        outcome.levels.append(level)
        if not level.passed:
            break
    if adoption.row_set is not None and adoption.row_set.rule is None and not outcome.failed:
        outcome.rows.append(adoption.row_set.words())
    for level in outcome.levels:
        outcome.limits += level.unchecked  # what a level saw and could not check is a limit of the verdict
    return outcome
