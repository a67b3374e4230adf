"""One scoring run: split, official path, identity, independent path, agreement, records."""

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import cast
from datetime import datetime, timezone
from pathlib import Path

from sst2_audit.formats import records
from sst2_audit.formats.lock import Lock, Profile
from sst2_audit.formats.manifest import Manifest, read_manifest, require_matching, verify_files
from sst2_audit.pages.html_report import render, render_failure
from sst2_audit.protocol.metrics import METRICS, predictions, result_key
from sst2_audit.protocol.numeric import fingerprint, one_line
from sst2_audit.protocol.rules import notice_for
from sst2_audit.scoring.agreement import compare_scores, describe
from sst2_audit.scoring.identity import check_logged_samples, expected_question, longest_input, public_target
from sst2_audit.scoring.independent import IndependentScorer
from sst2_audit.scoring.model import load as load_model, load_tokenizer, memory_statement
from sst2_audit.scoring.official import data_files_of, official_encode_pair, OfficialOutput, run_official
from sst2_audit.scoring.shards import Shards
from sst2_audit.scoring.summaries import label_counts, summaries
from sst2_audit.task import lm_eval_notes
from sst2_audit.task.evaluator_pin import evaluator_record, verify_installed
from sst2_audit.task.fewshot import settings_record
from sst2_audit.task.rows import shot_plan, shown_ids, verified_rows
from sst2_audit.task.spec import TaskSpec
from sst2_audit.task.split import mode_for, row_hash, ROW_HASH_RULE, SMOKE_ROWS, Split
from sst2_audit.util import atomic, console
from sst2_audit.util.environment import available_memory_bytes, peak_rss_bytes, scrub_paths, snapshot, versions
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.progress import phase, say, say_wrapped
from sst2_audit.run.worker import IndependentWorker


@dataclass
class RunOptions:
    lock: Lock
    profile: Profile
    cache: Path
    out: Path
    private: Path
    run_name: str
    spec: TaskSpec
    smoke: bool = False
    sort_ids: bool = True  # False reproduces lm-eval's unsorted-samples doc_id bug on purpose
    rows: int | None = None  # score only the first `rows` dev rows (--rows, a group's per-subtask count); --smoke: 2
    # the sha256 of the pre-registration whose ticket run/confirm.py claimed in the cache: this run scores the
    # confirmation rows (mode "confirm"); only run/confirm.py sets it
    confirmation: str | None = None
    shards: Shards = field(default_factory=Shards)  # the processes a launcher started: both paths shared among them


def default_run_name(profile: str, smoke: bool, rows: int | None = None) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{profile}-{'smoke' if smoke else 'full' if rows is None else f'first-{rows}'}-{stamp}"


# Nothing in a run may reach the network; set before the run imports transformers and datasets.
OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                       "TOKENIZERS_PARALLELISM": "false"}


def _offline_environment(scratch: Path) -> None:
    """Nothing in a run may reach the network or reuse a stale cache of someone else's."""
    os.environ.update({**OFFLINE_ENVIRONMENT, "HF_DATASETS_CACHE": str(scratch / "datasets"),
                       **console.QUIET_ENVIRONMENT})


def _fail(options, check: str, message: str, mismatches: list, settings: dict) -> None:
    record = records.FailureRecord(options.run_name, check, message, mismatches, settings)
    notice = notice_for(options.profile) if options.profile.demo else None  # the failure page keeps the banner
    atomic.write_text(options.out / records.REPORT_FILE, render_failure(record, notice))
    records.write(options.out / records.FAILURE_FILE, record)
    raise RunFailed(f"{message} Failure record: {options.out / records.FAILURE_FILE}")


def _public_samples(samples: list) -> list:
    """lm-eval's logged samples without review text: doc and arguments carry the sentence, and a text target (a
    multiple-input task's shared continuation, winogrande's sentence after the blank) becomes its sha256."""
    return [{k: public_target(v) if k == "target" else v for k, v in sample.items() if k not in ("doc", "arguments")}
            for sample in samples]


def _json_default(value):
    """lm-eval's own rule for its logged samples (utils.handle_non_serializable): a numpy integer is a number
    (f1's logged prediction), anything else unknown its str()."""
    import numpy as np

    if isinstance(value, np.integer):
        return int(value)
    return list(value) if isinstance(value, set) else str(value)


def _write_jsonl(path: Path, rows: list) -> None:
    atomic.write_text(path, "".join(json.dumps(row, ensure_ascii=False, default=_json_default) + "\n" for row in rows))


def _write_lm_eval_output(options: RunOptions, official, scrub: dict) -> dict:
    """lm-eval's own results and logged samples: a public copy without text or paths, a private one whole.
    Returns the public copy of the results, as the audit will read it."""
    public_results = scrub_paths(json.loads(json.dumps(official.results, default=str)), scrub)
    atomic.write_json(options.out / records.LM_EVAL_RESULTS_FILE, public_results)
    _write_jsonl(options.out / records.LM_EVAL_SAMPLES_FILE, scrub_paths(_public_samples(official.samples), scrub))
    _write_jsonl(options.private / records.LM_EVAL_PRIVATE_SAMPLES_FILE, official.samples)
    return public_results


def _question_record(spec, expected, sample: dict, scores: dict) -> records.QuestionRecord:
    """One question's public record: identity from the dataset row, scores from both paths ({path: scores})."""
    public = expected.public_fields()
    question = records.QuestionRecord(
        **{key: public[key] for key in ("idx", "label", "doc_hash", "prompt_hash", "context_length", "candidates",
                                        "choice_lengths", "candidate_token_counts", "candidate_tokens_sha256",
                                        "shots")},
        logged_doc_id=sample["doc_id"], scores=scores, predictions={}, true_choices=public.get("true_choices"),
        logged={metric: _logged(sample[METRICS[metric].reported_as]) for metric in spec.metrics},
    )
    question.predictions = {path: predictions(spec.metrics, scores[path], question) for path in records.PATHS}
    return question


def _logged(value):
    """A logged per-document value as run.json holds it: a number, or f1's / mcc's (gold, prediction)."""
    return [int(v) for v in value] if isinstance(value, (tuple, list)) else float(value)


def _value_disagreements(spec, questions: list) -> list:
    """Our own per-question value of each metric (mc2 re-derived with our code) against lm-eval's logged one."""
    found = []
    for position, question in enumerate(questions):
        for metric in spec.metrics:
            try:
                ours = METRICS[metric].value(question.scores["independent"], question)
            except ValueError as error:  # mc2 undefined: the model's probabilities underflow
                raise InputError(f"row idx {question.idx}: {metric}: {error}.") from None
            if not METRICS[metric].agrees(ours, question.logged[metric]):
                found.append(records.Mismatch(position, question.idx, [metric], {metric: ours},
                                              {metric: question.logged[metric]}))
    return found


class RunFailed(CheckFailed):
    """A check failed and its failure record was written: the run folder keeps it."""

def execute(options: RunOptions) -> records.RunRecord | None:
    scratch = Path(tempfile.mkdtemp(prefix="sst2-audit-"))  # lm-eval's datasets cache, private to this run
    fresh = [folder for folder in (options.out, options.private) if not Path(folder).exists()]
    emptied = [Path(folder) for folder in (options.out, options.private)
               if Path(folder).is_dir() and not any(Path(folder).iterdir())]  # given empty: left empty again
    try:
        with contextlib.ExitStack() as stack:
            return _execute(options, scratch, stack)
    except RunFailed:
        raise
    except BaseException:  # an error, Ctrl-C: nothing was recorded, so nothing is left to block a rerun
        for folder in fresh:
            shutil.rmtree(folder, ignore_errors=True)
        for folder in emptied:
            for leftover in folder.iterdir() if folder.is_dir() else ():
                shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class Setup:
    """Stage 1's output: the verified cache and evaluator, the run's settings and platform."""
    settings: dict
    manifest: Manifest
    scrub: dict  # absolute paths -> placeholders in public records
    log_path: Path
    platform: dict
    evaluator_files: dict
    timings: dict


@dataclass
class Prompts:
    """Stage 2's output: the split, the loaded model, every scored question's expected prompt."""
    split: Split
    scored_ids: list
    by_idx: dict
    model: object
    tokenizer: object
    expected: dict  # idx -> identity.ExpectedQuestion


@dataclass
class Scores:
    """Stage 3's output: both paths' scores, the identity check passed."""
    official: OfficialOutput
    public_results: dict
    independent: dict  # idx -> the independent path's scores


def _setup(options: RunOptions, scratch: Path, stack) -> Setup:
    timings: dict = {}
    lock, profile, cache, spec = options.lock, options.profile, Path(options.cache).resolve(), options.spec
    settings = settings_record(lock.settings_for(profile.name, spec), spec, options.sort_ids)
    manifest = require_matching(read_manifest(cache), cache, lock, profile)
    if options.shards.lead:  # rank 0 alone writes (scoring/shards.py); the others' third-party output stays in scratch
        atomic.new_directory(options.out, "--out")
        atomic.new_directory(options.private, "--private")
    _offline_environment(scratch)
    log_path = (options.private if options.shards.lead else scratch) / console.LOG_FILE
    stack.enter_context(console.captured(log_path))  # third-party output goes to the private log
    scrub = {str(cache): "<cache>", str(scratch): "<scratch>", str(Path.cwd()): "<cwd>", str(Path.home()): "<home>"}
    with phase("verify cache and evaluator (hash before load)", timings, "verify"):
        verify_files(cache, manifest)

        evaluator_files = verify_installed(lock, spec)
    with phase("imports", timings):
        import torch
        import transformers  # noqa: F401
        import lm_eval  # noqa: F401

    threads = options.shards.threads(settings, paths=2)  # the official and independent paths run concurrently
    torch.set_num_threads(threads)
    torch.manual_seed(settings["seed"])
    platform = fingerprint(settings["numeric_mode"], threads)
    # e.g. a CPU without AVX2: scores are this CPU's own, comparable within the drift bound
    if not platform["mode_in_effect"]:
        say(f"warning: the lock's numeric mode is not in effect on this CPU: {one_line(platform)}")
    return Setup(settings, manifest, scrub, log_path, platform, evaluator_files, timings)


def _prompts(options: RunOptions, setup: Setup) -> Prompts:
    spec, settings, cache = options.spec, setup.settings, Path(options.cache).resolve()
    # every file was verified in _setup: the rows are read, not re-hashed
    data = verified_rows(options.lock, options.profile, spec, cache, roles=(), manifest=setup.manifest)
    split, by_idx = data.split, data.by_idx
    if options.confirmation:  # every confirmation row, in hash order
        scored_ids = list(split.confirm_ids)
        split.require_confirm(scored_ids)
    else:
        scored_ids = split.scored(SMOKE_ROWS if options.smoke else options.rows)
        split.require_dev(scored_ids)
    shots = shot_plan(options.lock, options.profile, spec, cache, setup.manifest, data, scored_ids)
    own = shots.own_question(spec) if shots else []
    if own:  # before any model call: a prompt holding its own question and answer measures nothing
        _fail(options, "shots", f"{len(own)} scored question(s) would be shown their own question and answer as a "
              f"shot (a duplicate row in the {shots.rule.split!r} split): ids {shown_ids(own)}.",
              [records.Mismatch(-1, idx, ["shots"], {"shots": "no shot with the question's own text"},
                                {"shots": shots.positions[idx]}) for idx in own], setup.settings)
    # Pre-flight with the tokenizer alone: every question must fit untruncated before the model loads (in seconds)
    tokenizer = load_tokenizer(cache / "model")
    expected = {idx: expected_question(by_idx[idx], spec, tokenizer, settings["max_length"], settings["add_bos_token"],
                                       shots) for idx in scored_ids}
    memory = memory_statement(cache / "model", settings, available_memory_bytes(), options.shards.local,
                              longest_input(expected.values()), paths=2)  # both paths score at once
    say_wrapped("memory", memory)
    with phase("model load", setup.timings, "model_load"):
        model, tokenizer = load_model(cache / "model", settings, tokenizer)
        # The bytes loaded must be the bytes hashed: a file swapped in between fails here.
        verify_files(cache, setup.manifest, roles=("model",))
    return Prompts(split, scored_ids, by_idx, model, tokenizer, expected)


def _score(options: RunOptions, setup: Setup, prompts: Prompts) -> Scores:
    """Both paths; the identity check of lm-eval's logged samples before anything else reads them."""

    settings, ids, timings, shards = setup.settings, prompts.scored_ids, setup.timings, options.shards
    # The independent path runs in a worker thread beside the official path: torch releases
    # the GIL, so its forward passes overlap lm-eval's pure-Python setup. Both read the same
    # frozen weights; neither sees the other's numbers until the agreement check.
    worker = IndependentWorker(IndependentScorer(prompts.model, settings["max_length"]),
                               {idx: prompts.expected[idx].pairs() for idx in shards.mine(ids)})
    worker.start()
    independent = None
    try:
        share = f" ({len(shards.mine(ids))} in each of {shards.world} processes)" if shards.world > 1 else ""
        with phase(f"official path: lm-eval simple_evaluate on {len(ids)} rows{share}", timings, "official",
                   announce=True):
            official = run_official(prompts.model, prompts.tokenizer, settings, options.spec,
                                    data_files_of(Path(options.cache).resolve(), setup.manifest, options.spec), ids,
                                    sort_ids=options.sort_ids, shards=shards)
        if shards.world > 1:  # every share at rank 0 before a check can stop it: a collective each process reaches
            worker.finish()
            independent = shards.gather(worker.scores)
            if not shards.lead:
                return None
        public_results = _write_lm_eval_output(options, official, setup.scrub)
        check_start = time.perf_counter()
        mismatches = check_logged_samples(official.samples, ids, prompts.expected,
                                          lambda c, k: official_encode_pair(official.lm, c, k))
        if mismatches:
            rows_named = sorted(m.claimed_id for m in mismatches if m.claimed_id is not None)
            _fail(options, "identity",
                  f"identity check failed: {len(mismatches)} logged sample(s) do not match the dataset row their "
                  f"doc_id names (logged doc_ids {shown_ids(rows_named)}); lm-eval was given the dev ids "
                  + ("sorted." if settings["doc_id_order"] == "sorted" else
                     "in hash order (--unsorted-ids: reproducing upstream issue #4084 on purpose)."),
                  mismatches, settings)
        timings["checks"] = time.perf_counter() - check_start
    except BaseException:
        worker.stop.set()  # the run is failing: the independent path stops at its next row
        raise
    finally:
        worker.finish()
    timings["independent"] = worker.elapsed
    return Scores(official, public_results, worker.scores if independent is None else independent)


def _agreement(options: RunOptions, setup: Setup, prompts: Prompts, scores: Scores) -> tuple:
    """Every candidate score equal on both paths (else the run fails here): (question records, max abs diff)."""
    check_start, ids = time.perf_counter(), prompts.scored_ids
    logged = {sample["doc_id"]: sample for sample in scores.official.samples}
    official_scores = {idx: [float(resp[0][0]) for resp in logged[idx]["resps"]] for idx in ids}
    max_abs_diff, disagreements = compare_scores(
        ids, official_scores, {idx: list(scores.independent[idx].candidate_scores) for idx in ids})
    if disagreements:
        _fail(options, "agreement", describe(disagreements, max_abs_diff), disagreements, setup.settings)
    questions = [_question_record(options.spec, prompts.expected[idx], logged[idx], {
        "official": official_scores[idx], "independent": list(scores.independent[idx].candidate_scores)})
                 for idx in ids]
    wrong = _value_disagreements(options.spec, questions)
    if wrong:
        rows = [m.claimed_id for m in wrong][:8]
        _fail(options, "agreement", f"{len(wrong)} question(s) whose value we re-derive from the scores differ from "
              f"the value lm-eval logged (required bit for bit: the same order, the same exp) (rows {rows}).",
              wrong, setup.settings)
    setup.timings["checks"] = round(setup.timings["checks"] + time.perf_counter() - check_start, 3)
    return questions, max_abs_diff


def _record(options: RunOptions, setup: Setup, prompts: Prompts, scores: Scores, agreement: tuple,
            total: float) -> records.RunRecord:
    """The run record, built once from the stages' outputs."""
    lock, profile, spec, official = options.lock, options.profile, options.spec, scores.official
    questions, max_abs_diff = agreement
    task_result = official.results["results"][official.effective_config["task"]]
    resources = list(setup.manifest.files)
    evaluator = evaluator_record(lock, setup.evaluator_files, spec)
    return records.RunRecord(
        run_name=options.run_name, mode=mode_for(prompts.scored_ids, prompts.split.dev_ids, prompts.split.confirm_ids),
        profile=profile.name,
        task=spec.name, metrics=list(spec.metrics), demo=profile.demo, notice=notice_for(profile),
        lock_sha256=lock.sha256, lock_fully_hashed=setup.manifest.lock_fully_hashed,
        resources=resources, evaluator=evaluator, settings=setup.settings,
        split=records.SplitRecord(
            salt=lock.split.salt, rule=lock.split.rule, dev_ids=list(prompts.split.dev_ids),
            scored_ids=prompts.scored_ids, row_hash_rule=ROW_HASH_RULE,
            confirm=[records.ConfirmRow(i, row_hash(prompts.by_idx[i].as_doc())) for i in prompts.split.confirm_ids]),
        task_config=scrub_paths({"effective": official.effective_config, "differences": official.config_differences},
                                setup.scrub),
        versions=versions(),
        timings={**{k: round(v, 3) for k, v in setup.timings.items()}, "total": round(total, 3)},
        peak_rss_bytes=peak_rss_bytes(),
        summaries=summaries(spec, questions, setup.settings),
        labels=label_counts(spec, questions),
        max_abs_diff=max_abs_diff,
        identity_checks_passed=len(official.samples),
        lm_eval_reported={key: task_result[result_key(reported)] for metric in spec.metrics
                          for key, reported in ((metric, METRICS[metric].reported_as),
                                                (f"{metric}_stderr", f"{METRICS[metric].reported_as}_stderr"))},
        questions=questions,
        platform=cast(records.PlatformRecord, setup.platform),
        lm_eval_notes=lm_eval_notes.notes(scores.public_results, spec.name, resources, len(questions),
                                          evaluator["commit"]),
        third_party_log=console.count_known(setup.log_path),
        processes=options.shards.world,
    )


def _write_records(options: RunOptions, setup: Setup, prompts: Prompts, record: records.RunRecord) -> None:
    """Private records and page, environment, public page; run.json last: its presence means complete."""

    ids, by_idx, expected = prompts.scored_ids, prompts.by_idx, prompts.expected
    private = records.PrivateRecord(options.run_name, [
        records.PrivateQuestion(idx, by_idx[idx].as_doc(), expected[idx].context, list(expected[idx].context_tokens),
                                [list(tokens) for tokens in expected[idx].candidate_token_ids]) for idx in ids])
    records.write(options.private / records.PRIVATE_FILE, private)
    docs = {idx: by_idx[idx].as_doc() for idx in ids}
    atomic.write_text(options.private / records.REPORT_FILE, render(record, options.lock, options.spec, docs))
    atomic.write_json(options.out / records.ENVIRONMENT_FILE,
                      scrub_paths(dict(snapshot(), platform=setup.platform), setup.scrub))
    atomic.write_text(options.out / records.REPORT_FILE, render(record, options.lock, options.spec))
    records.write(options.out / records.RUN_FILE, record)


def _execute(options: RunOptions, scratch: Path, stack) -> records.RunRecord | None:
    """The run's stages in order; each takes the outputs of those before it. None in a process other than rank 0,
    once its share is gathered."""
    start = time.perf_counter()
    setup = _setup(options, scratch, stack)
    prompts = _prompts(options, setup)
    scores = _score(options, setup, prompts)
    if scores is None:
        return None
    agreement = _agreement(options, setup, prompts, scores)
    record = _record(options, setup, prompts, scores, agreement, time.perf_counter() - start)
    _write_records(options, setup, prompts, record)
    return record
