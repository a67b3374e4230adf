"""An adoption's last level and its record: every logged row the lock does not seal rescored by the independent
path (or a drawn sample), each row classed against the bound (adopt_scores.py), and the public record built."""

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sst2_audit.audit import adopt, adopt_generation, leaderboard
from sst2_audit.audit.adopt_scores import (candidate_bounds, drift_causes, FLIP_ALPHA,
                                          flip_test, row_class, take_claim_back, TIE_BUDGET)
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.rescore import draw, sample_odds
from sst2_audit.formats import adopted, adopted_generation as generation
from sst2_audit.formats.manifest import verify_files
from sst2_audit.formats.adopted import BITS, FLIP, NOT_DRAWN, OUT, ROW_CLASSES, SEALED, WITHIN
from sst2_audit.protocol.generation import EXACT_MATCH
from sst2_audit.protocol.metrics import METRICS, result_key
from sst2_audit.protocol.rules import notice_for
from sst2_audit.protocol.numeric import fingerprint, runs_the_mode, unscored_platform
from sst2_audit.scoring.independent import IndependentScorer
from sst2_audit.scoring.model import load as load_model, load_tokenizer, memory_statement
from sst2_audit.scoring.summaries import bootstrap_iters
from sst2_audit.task.rows import shown_ids
from sst2_audit.util.environment import available_memory_bytes, scrub_absolute_paths, versions
from sst2_audit.util.errors import InternalError
from sst2_audit.util.hashing import tokens_hash
from sst2_audit.util.progress import phase, say, say_wrapped, Ticker


def _chosen(adoption, seed: int) -> tuple:
    """(drawn ids, sealed ids): the sealed confirmation rows never reach a model here, whoever logged them."""
    sealed = set(adoption.split_rows.split.confirm_ids)
    open_ids = [idx for idx in sorted(adoption.questions) if idx not in sealed]
    rows = adoption.rescore
    chosen = draw(open_ids, rows if rows == "all" else min(rows, len(open_ids)), seed)
    return sorted(chosen), sorted(sealed & set(adoption.questions)), open_ids


def _scored(adoption, model, chosen: list) -> dict | None:
    """{idx: rescored scores of its requests} of every chosen row at rank 0 (None on the other ranks): each process
    scores its share (scoring/shards.py), at the threads its share of the cores gives."""
    import torch

    shards, settings = adoption.shards, adoption.settings
    threads = shards.threads(settings)
    torch.set_num_threads(threads)  # the count the record's platform states
    scorer, mine = IndependentScorer(model, settings["max_length"]), shards.mine(chosen)
    share = f" ({len(mine)} in each of {shards.world} processes)" if shards.world > 1 else ""
    earlier = _earlier_scores(adoption)
    with phase(f"rescore: {len(chosen)} rows on the independent path{share}"), torch.inference_mode():
        scored, ticker, again = {}, Ticker("rescore", len(mine)), 0
        for number, idx in enumerate(mine, start=1):
            pairs = adoption.requests[idx]
            key = (threads, tokens_hash([p.context_tokens for p in pairs] + [p.continuation_tokens for p in pairs]))
            again += key in earlier
            if key not in earlier:
                earlier[key] = tuple(scorer.score(idx, pairs).candidate_scores)
            scored[idx] = list(earlier[key])
            ticker.tick(number)
    if again:
        say(f"[rescore] {again} of {len(mine)} rows: requests this process rescored before (the same model, tokens "
            "and threads), their scores taken again")
    return shards.gather(scored)


def _earlier_scores(adoption) -> dict:
    """{(threads, the requests' tokens): scores} this process's rescores of the model held (adoption.models) gave:
    a corpus of one model's runs, or a run's tasks, asking again for the same requests get the same floats without
    a second forward pass (a pair's forward pass depends on its tokens and the thread count alone; batch 1)."""
    held = adoption.models.get(model_key(adoption))
    return held[2] if held else {}


def _classed(adoption, chosen: list) -> dict:
    """Each chosen row's class under the adoption's bound; {idx: the prediction flips row_class found in it}."""
    flips = {}
    for idx in chosen:
        question = adoption.questions[idx]
        question.row_class, question.max_abs_diff, flips[idx] = row_class(question, adoption.bound,
                                                                          adoption.spec.metrics)
    return flips


def check_rescore(adoption, model, seed: int) -> LevelResult | None:
    """The rescore level at rank 0; None on the other ranks (they only score their share)."""
    chosen, sealed, open_ids = _chosen(adoption, seed)
    scored = _scored(adoption, model, chosen)
    if scored is None:
        return None
    level = LevelResult(f"rescore ({adoption.rescore} rows, seed {seed})")
    for idx in chosen:
        adoption.questions[idx].rescored = adoption.shape.as_logged(scored[idx])
    flips = _classed(adoption, chosen)
    bits = [idx for idx in chosen if adoption.questions[idx].row_class == BITS]
    if take_claim_back(adoption, chosen, bits):
        flips = _classed(adoption, chosen)
    for idx in sealed:
        adoption.questions[idx].row_class = SEALED
    counts = {name: sum(q.row_class == name for q in adoption.questions.values()) for name in ROW_CLASSES}
    level.checks = len(chosen)
    level.notes.append(f"bound: {adoption.bound.per_score} ({adoption.bound.basis})")
    level.notes.append("rows: " + ", ".join(f"{counts[name]} {name}" for name in ROW_CLASSES if counts[name]))
    for question in (adoption.questions[idx] for idx in chosen):
        if question.row_class == OUT:
            level.fail(f"row idx {question.idx}: logged scores {question.logged!r}, rescored here "
                       f"{question.rescored!r}: {question.max_abs_diff:.4g} apart"
                       + _beyond(question, flips[question.idx], adoption.bound))
    within = [flip for idx in chosen if adoption.questions[idx].row_class == FLIP for flip in flips[idx]]
    adoption.flips = flip_test(within)
    level.notes += [f"flip: {flip.line()}" for flip in within] + adoption.flips.words()
    for words in adoption.flips.one_way:
        level.fail(f"prediction flips {words}")
    _sampled(level, sealed, chosen, open_ids, adoption.rescore)
    within = counts[WITHIN] + counts[FLIP]
    if within and not level.problems:
        level.drift_only = True
        level.drift_reason = (f"{within} rescored row(s) within the bound {adoption.bound.per_score} "
                              f"({adoption.bound.basis}), {counts[FLIP]} of them prediction flips at near ties "
                              f"({'; '.join(adoption.flips.words()) or 'none'}): consistent with rounding"
                              + drift_causes(adoption))
    return level


def _beyond(question, flips: list, bound) -> str:
    """Why a row is out of the bound: a score beyond its candidate's bound, or a flip beyond the near-tie band."""
    wide = [flip for flip in flips if flip.margin > flip.band]
    if wide:
        flip = wide[0]
        return (f", within each score's bound but its {flip.metric} prediction flips ({flip.logged} logged, "
                f"{flip.rescored} yours) where your margin {flip.margin:.4g} is beyond the near-tie band "
                f"{flip.band:.4g}: not a tie rounding can break")
    bounds = ", ".join(f"{b:.4g}" for b in candidate_bounds(question, bound))
    return f", beyond the bound (per candidate: {bounds})"


def check_generation_rescore(adoption, model, tokenizer, seed: int) -> LevelResult | None:
    """A generate_until task's rescore at rank 0: each chosen row re-decoded (its share in each process)."""
    import torch

    chosen, sealed, open_ids = _chosen(adoption, seed)
    shards = adoption.shards
    torch.set_num_threads(shards.threads(adoption.settings))
    share = f" ({len(shards.mine(chosen))} in each of {shards.world} processes)" if shards.world > 1 else ""
    with phase(f"rescore: {len(chosen)} generations re-decoded greedily on the independent path{share}"):
        found = shards.gather(adopt_generation.rescore_rows(adoption, model, tokenizer, shards.mine(chosen)))
    if found is None:
        return None
    level = LevelResult(f"rescore ({adoption.rescore} rows, seed {seed})")
    for idx in chosen:
        adopt_generation.judge_row(adoption, idx, found[idx], level)
    for idx in sealed:
        adoption.questions[idx].row_class = generation.SEALED
    counts = {name: sum(q.row_class == name for q in adoption.questions.values())
              for name in generation.GENERATION_CLASSES}
    level.checks += len(chosen)
    level.notes.append(f"a logged token other than our maximum is a near tie when {adoption.bound.per_score} "
                       f"({adoption.bound.basis})")
    level.notes.append("rows: " + ", ".join(f"{counts[n]} {n}" for n in generation.GENERATION_CLASSES if counts[n]))
    closest = min((q for q in adoption.questions.values() if q.closest_margin is not None),
                  key=lambda q: q.closest_margin, default=None)
    if closest is not None:
        level.notes.append(f"closest call: row idx {closest.idx}, step {closest.closest_step}, margin "
                           f"{closest.closest_margin:.4g} logits")
    _sampled(level, sealed, chosen, open_ids, adoption.rescore)
    unfollowed = [idx for idx in chosen if adoption.output.public and adoption.questions[idx].row_class ==
                  generation.DRIFT and adoption.questions[idx].rescored_response_sha256 !=
                  adoption.questions[idx].response_sha256]
    if unfollowed:
        level.sampled.append(f"{len(unfollowed)} rows (ids {shown_ids(unfollowed, 8)}): the decode here, greedy but "
                             "for the near ties adopted.json records, differs from the logged generation, and the "
                             "public copy holds no text to follow it again (the adoption's near ties are the "
                             "record's)")
    changes = adopt_generation.answer_changes([adoption.questions[idx] for idx in chosen],
                                              adoption.spec.generation.filter_names)
    for name, change in changes.items():
        toward, away = change["toward the reference"], change["away from it"]
        if toward or away:
            level.notes.append(f"{name}: your greedy decode changes {len(toward) + len(away)} answer(s): {len(toward)} "
                               f"the logged generation gets right and yours not (row idx {shown_ids(toward, 8)}), "
                               f"{len(away)} the other way (row idx {shown_ids(away, 8)})")
        if change["one_way"]:
            level.fail(f"{name}: the near ties the logged generations take change {len(toward)} answers toward the "
                       f"reference and {len(away)} away: exact two-sided sign test p = {change['p']:.3g} < "
                       f"{FLIP_ALPHA:g}: rounding changes answers both ways, these run one way")
    if counts[generation.DRIFT] and not level.problems:
        level.drift_only = True
        level.drift_reason = (f"{counts[generation.DRIFT]} generation(s) differ at near ties within the tie budget "
                              f"{TIE_BUDGET:g} a row: consistent with rounding" + drift_causes(adoption))
    return level


def _sampled(level, sealed: list, chosen: list, open_ids: list, rows) -> None:
    level.sampled += ([f"{len(sealed)} logged rows are sealed confirmation rows of the lock, never rescored here "
                       f"(ids {shown_ids(sealed, 8)})"] if sealed else [])
    if len(chosen) < len(open_ids):
        level.sampled.append(f"{len(open_ids) - len(chosen)} of {len(open_ids)} rows not rescored (--rescore "
                             f"{rows}); " + sample_odds(len(open_ids), len(chosen)))


def model_key(adoption) -> tuple:
    """What a loaded model is, for reuse across the tasks of one run: its files' hashes (as this profile's manifest
    pins them, just verified) and the lock's dtype and attention. Two profiles with the same key load the same bytes
    the same way, so the model one verified and loaded serves the other (hash before load holds: same hashes)."""
    files = tuple(sorted((f.path.split("/", 1)[-1], f.sha256) for f in adoption.split_rows.manifest.model_files()))
    return files, adoption.settings["dtype"], adoption.settings["attention"]


# the name of the thread that hashes the model beside the record levels (tests join it to count what it read)
MODEL_HASH_THREAD = "hash the model"


def run_levels(adoption, timings: dict, seed: int):
    """Every level in order: (outcome, the tokenizer-and-model work done). The model loads only when the
    record levels and the identity level passed, and once per process: adoption.models keeps what was loaded (a
    tokenizer alone too: the tasks of a run, the runs of a corpus, adopted model-free)."""
    with phase("verify the reviewer's data and tokenizer (hash before read)", timings, "verify"):
        adopt.prepare_rows(adoption, roles=tuple(adoption.spec.splits))
    if adoption.rescore and adoption.split_rows.manifest.weightless:  # the reviewer has the data, not the model
        adoption.rescore, adoption.no_rescore = 0, "your cache holds no weights: prepare --no-weights"
    model_dir, loaded, key = Path(adoption.cache) / "model", [], model_key(adoption)
    reused = adoption.models.get(key)  # (the model or None, the tokenizer, its earlier scores: _earlier_scores)
    reused_model = reused[0] if reused else None
    # the model's files are hashed on the other core while the record levels run and transformers imports; the
    # load waits for the result (hash before load). When a level fails nothing is loaded, and the hash stops: a
    # pool's thread is joined at exit, and a corpus's next run would share the cores with it (0.45 s a time here)
    hashing = ThreadPoolExecutor(1, MODEL_HASH_THREAD) if adoption.rescore and reused_model is None else None
    unwanted = threading.Event()
    model_hashed = hashing.submit(verify_files, adoption.cache, adoption.split_rows.manifest, ("model",),
                                  stop=unwanted) if hashing else None
    if hashing:
        hashing.shutdown(wait=False)

    def tokenizer():  # loaded once the claims passed; its files were hashed with the data (prepare_rows)
        if reused:
            loaded.append(reused[1])
            return reused[1]
        with phase("load the tokenizer", timings, "tokenizer"):
            loaded.append(load_tokenizer(model_dir))
        _hold(adoption.models, key, (None, loaded[0], {}))
        return loaded[0]

    try:
        outcome = adopt.record_levels(adoption, tokenizer)
    except BaseException:  # bad input, Ctrl-C: nobody will load the model
        unwanted.set()
        raise
    if outcome.failed or not adoption.rescore:
        unwanted.set()
        if not adoption.rescore:
            outcome.levels.append(LevelResult("rescore", skipped=adoption.no_rescore))
            outcome.scores_unverified.append(f"none of the {len(adoption.questions)} logged rows was rescored "
                                             f"({adoption.no_rescore})")
        return outcome
    model = _model(adoption, reused_model, model_hashed, loaded[0], timings)
    _hold(adoption.models, key, (model, loaded[0], {}))
    start = time.perf_counter()
    level = adoption.shape.rescore(adoption, model, loaded[0], seed)
    timings["rescore"] = round(time.perf_counter() - start, 3)
    if level is None:  # not rank 0: its share was gathered there
        return outcome
    outcome.levels.append(level)
    outcome.scores_unverified += level.sampled
    if level.drift_only:
        outcome.drift_only = True
        outcome.limits.append(level.drift_reason)
    return outcome


def _hold(models: dict, key: tuple, loaded: tuple) -> None:
    """One model (or tokenizer) held at a time: a corpus of many models' runs loads each in turn."""
    if key not in models or models[key][0] is None:
        models.clear()
        models[key] = loaded


def _model(adoption, reused_model, model_hashed, tokenizer, timings: dict):
    """The model an earlier adoption of this process verified and loaded, or this cache's, hashed first."""
    if reused_model is not None:
        say("[model] the model verified and loaded for an earlier task in this process (the same files, dtype and "
            "attention)")
        return reused_model
    model_dir = Path(adoption.cache) / "model"
    with phase("rescore: verify and load the model (hash before load)", timings, "model_load"):
        if model_hashed is None:
            raise InternalError("the model's files were not hashed before its load")
        model_hashed.result()  # raises what the hashing found: a changed file is exit 1
        # the headers are read only now that their bytes are the manifest's, and before the load
        memory = memory_statement(model_dir, adoption.settings, available_memory_bytes(), adoption.shards.local,
                                  adoption.shape.longest(adoption))
        say_wrapped("memory", memory)
        return load_model(model_dir, adoption.settings, tokenizer)[0]


def reviewer_pairs(adoption) -> tuple:
    """(whose, [(metric, reported, the reviewer's number or None, rows)]): per metric (per filter), the submitter's
    number beside the reviewer's own from the rescore (a generate_until task: the reviewer's pure greedy decode)."""
    return adoption.shape.reviewer_pairs(adoption)


def reviewer_numbers(adoption, found: tuple | None = None) -> list:
    """The lines right under the verdict, from reviewer_pairs (`found`: already computed)."""
    whose, pairs = found or reviewer_pairs(adoption)
    task, rows = adoption.spec.name, adoption.row_set
    chose = rows is not None and rows.rule is None  # a row set no rule gives: the numbers are over the run's choice
    over = f", over the {rows.logged} of {rows.split_rows} rows the run chose" if chose else ""
    return [f"{task} {metric}: reported {shown_number(theirs)} (their scores) / rescored {shown_number(ours)} "
            f"({whose}, {count} rows{over})" if ours is not None else
            f"{task} {metric}: reported {shown_number(theirs)} (their scores) / not rescored here"
            for metric, theirs, ours, count in pairs] + leaderboard.task_numbers(adoption, pairs)[0]


def reviewer_json(adoption, found: tuple | None = None) -> list:
    """reviewer_pairs as the `--format json` verdict's numbers (docs/formats.md)."""
    whose, pairs = found or reviewer_pairs(adoption)
    return [{"task": adoption.spec.name, "metric": metric, "reported": theirs, "rescored": ours,
             "rows": count if ours is not None else 0, "whose": whose} for metric, theirs, ours, count in pairs] \
        + leaderboard.task_numbers(adoption, pairs)[1]


def shown_number(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else repr(value)


def _rescored_summary(adoption) -> dict:
    """The metric from the rescored scores, over the rows rescored (a sample's number is its own)."""
    return rescored_summary(adoption.questions.values(), adoption.spec.metrics, bootstrap_iters(adoption.settings))


def rescored_summary(questions, metrics, iters: int) -> dict:
    """{metric, metric_stderr, rows} over the questions that hold a rescore, in doc_id order (lm-eval's)."""
    rescored = sorted((q for q in questions if q.rescored is not None), key=lambda q: q.idx)
    summary = {}
    for metric in metrics if rescored else ():
        values = [METRICS[metric].value(q.rescored, q) for q in rescored]
        number, stderr = METRICS[metric].aggregate(values, iters)
        summary.update({metric: number, f"{metric}_stderr": stderr, "rows": len(rescored)})
    return summary


def generation_record(adoption, common: dict) -> generation.AdoptedGenerationRecord:
    reported = adoption.output.results["results"][adoption.spec.name]
    rows = [adoption.questions[idx] for idx in sorted(adoption.questions)]
    filters = adoption.spec.generation.filter_names
    return generation.AdoptedGenerationRecord(
        **common, filters=filters, generation_kwargs=adoption.spec.generation.generation_kwargs,
        reported={key: reported[key] for name in filters for key in (result_key(EXACT_MATCH, name),
                                                                     result_key(EXACT_MATCH, name, stderr=True))},
        rederived=adoption.rederived,
        rescored_summary=adopt_generation.exact_match_summary(rows, filters, "rescored_exact_match"),
        greedy_summary=adopt_generation.exact_match_summary(rows, filters, "greedy_exact_match"),
        row_classes={name: sum(row.row_class == name for row in rows) for name in generation.GENERATION_CLASSES},
        row_set=dataclasses.asdict(adoption.row_set), answer_changes=adopt_generation.answer_changes(rows, filters),
        rows=rows)


def record(adoption, run_name: str, seed: int, timings: dict):
    """The adoption's public record: adopted.AdoptedRecord, or a generate_until task's AdoptedGenerationRecord."""
    output, task, settings = adoption.output, adoption.spec.name, adoption.settings
    threads = adoption.shards.threads(settings)
    here = fingerprint(settings["numeric_mode"], threads) if adoption.rescore else unscored_platform(threads)
    common = dict(
        run_name=run_name, profile=adoption.profile.name, task=task,
        demo=adoption.profile.demo, notice=notice_for(adoption.profile), lock_sha256=adoption.lock.sha256,
        resources=list(adoption.split_rows.manifest.files),
        source={"results_file": output.results_path.name, "results_sha256": output.results_sha256,
                "samples_file": output.samples_path.name, "samples_sha256": output.samples_sha256},
        claims=scrub_absolute_paths(adoption.claims),
        config_differences=scrub_absolute_paths(adoption.differences), bound=adoption.bound,
        rescore={"rows": adoption.rescore, "seed": seed, "processes": adoption.shards.world}, platform=here,
        bits_required=bool(adoption.rescore) and runs_the_mode(settings, here)[0], versions=versions(),
        timings=timings)
    return adoption.shape.record(adoption, common)


def choice_record(adoption, common: dict, reported: dict | None = None) -> adopted.AdoptedRecord:
    """reported: the results file's numbers as {metric: value, metric_stderr: value} (default: lm-eval's, by its
    result keys)."""
    if reported is None:
        logged = adoption.output.results["results"][adoption.spec.name]
        reported = {key: logged[result_key(METRICS[m].reported_as, stderr=bool(suffix))] for m in adoption.spec.metrics
                    for key, suffix in ((m, ""), (f"{m}_stderr", "_stderr"))}
    questions = [adoption.questions[idx] for idx in sorted(adoption.questions)]
    return adopted.AdoptedRecord(
        **common, metrics=list(adoption.spec.metrics), reported=reported,
        rederived=adoption.rederived, rescored_summary=_rescored_summary(adoption),
        row_classes={name: sum(q.row_class == name for q in questions) for name in ROW_CLASSES},
        row_set=dataclasses.asdict(adoption.row_set),
        flips={"counts": adoption.flips.counts, "one_way": adoption.flips.one_way} if adoption.flips else {},
        questions=questions)


BIT_CLASSES = (BITS, SEALED, NOT_DRAWN)  # the classes a PASS may hold (sealed and undrawn rows limit it)
