"""An adoption's last level and its record: every logged row the lock does not seal rescored by the independent
path (or a drawn sample), each row classed against the bound (adopt_scores.py), and the public record built."""

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sst2_audit.audit import adopt
from sst2_audit.audit.adopt_scores import flip_line, row_class
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.rescore import draw, sample_odds
from sst2_audit.formats import adopted
from sst2_audit.formats.manifest import verify_files
from sst2_audit.formats.adopted import BITS, FLIP, NOT_DRAWN, OUT, ROW_CLASSES, SEALED, WITHIN
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.numeric import fingerprint, runs_the_mode
from sst2_audit.protocol.rules import notice_for
from sst2_audit.scoring.independent import IndependentScorer
from sst2_audit.scoring.model import load as load_model, load_tokenizer, memory_statement
from sst2_audit.scoring.summaries import bootstrap_iters
from sst2_audit.task.rows import shown_ids
from sst2_audit.util.environment import available_memory_bytes, scrub_absolute_paths, versions
from sst2_audit.util.progress import phase, say


def _chosen(adoption, seed: int) -> tuple:
    """(drawn ids, sealed ids): the sealed confirmation rows never reach a model here, whoever logged them."""
    sealed = set(adoption.data.split.confirm_ids)
    open_ids = [idx for idx in sorted(adoption.questions) if idx not in sealed]
    rows = adoption.rescore
    chosen = draw(open_ids, rows if rows == "all" else min(rows, len(open_ids)), seed)
    return sorted(chosen), sorted(sealed & set(adoption.questions)), open_ids


def _scored(adoption, model, chosen: list) -> dict | None:
    """{idx: rescored candidate scores} of every chosen row at rank 0 (None on the other ranks): each process
    scores its share (scoring/shards.py), at the threads its share of the cores gives."""
    import torch

    shards, settings = adoption.shards, adoption.settings
    torch.set_num_threads(shards.threads(settings))  # the count the record's platform states
    scorer, mine = IndependentScorer(model, settings["max_length"]), shards.mine(chosen)
    share = f" ({len(mine)} in each of {shards.world} processes)" if shards.world > 1 else ""
    with phase(f"rescore: {len(chosen)} rows on the independent path{share}"), torch.inference_mode():
        scored = {idx: list(scorer.score(idx, adoption.questions[idx].pairs).candidate_scores) for idx in mine}
    return shards.gather(scored)


def check_rescore(adoption, model, seed: int) -> LevelResult | None:
    """The rescore level at rank 0; None on the other ranks (they only score their share)."""
    chosen, sealed, open_ids = _chosen(adoption, seed)
    scored = _scored(adoption, model, chosen)
    if scored is None:
        return None
    level = LevelResult(f"rescore ({adoption.rescore} rows, seed {seed})")
    for idx in chosen:
        question = adoption.questions[idx]
        question.rescored = scored[idx]
        question.row_class, question.max_abs_diff = row_class(question.logged, question.rescored, adoption.bound)
    for idx in sealed:
        adoption.questions[idx].row_class = SEALED
    counts = {name: sum(q.row_class == name for q in adoption.questions.values()) for name in ROW_CLASSES}
    level.checks = len(chosen)
    level.notes.append(f"bound: {adoption.bound.per_score} ({adoption.bound.basis})")
    level.notes.append("rows: " + ", ".join(f"{counts[name]} {name}" for name in ROW_CLASSES if counts[name]))
    for question in (adoption.questions[idx] for idx in chosen):
        if question.row_class == OUT:
            level.fail(f"row idx {question.idx}: logged scores {question.logged!r}, rescored here "
                       f"{question.rescored!r}: {question.max_abs_diff:.4g} apart, beyond the bound")
        elif question.row_class == FLIP:
            level.notes.append("flip: " + flip_line(question))
    level.sampled += ([f"{len(sealed)} logged rows are sealed confirmation rows of the lock, never rescored here "
                       f"(ids {shown_ids(sealed, 8)})"] if sealed else [])
    if len(chosen) < len(open_ids):
        level.sampled.append(f"{len(open_ids) - len(chosen)} of {len(open_ids)} rows not rescored (--rescore "
                             f"{adoption.rescore}); " + sample_odds(len(open_ids), len(chosen)))
    within = counts[WITHIN] + counts[FLIP]
    if within and not level.problems:
        level.drift_only = True
        level.drift_reason = (f"{within} rescored row(s) within the bound {adoption.bound.per_score} "
                              f"({adoption.bound.basis}), {counts[FLIP]} of them prediction flips")
    return level


def run_levels(adoption, timings: dict, seed: int):
    """Every level in order: (outcome, the tokenizer-and-model work done). The model loads only when the
    record levels and the identity level passed."""
    with phase("verify the reviewer's data (hash before read)", timings, "verify"):
        adopt.prepare_rows(adoption, roles=tuple(adoption.spec.splits))
    model_dir, loaded = Path(adoption.cache) / "model", []
    # the model's files are hashed on the other core while the record levels run and transformers imports; the
    # load waits for the result (hash before load), and nothing is loaded when a level failed
    hashing = ThreadPoolExecutor(1, "hash the model") if adoption.rescore else None
    model_hashed = hashing and hashing.submit(verify_files, adoption.cache, adoption.data.manifest, ("model",))
    if hashing:
        hashing.shutdown(wait=False)

    def tokenizer():  # loaded once the claims passed
        with phase("load the tokenizer", timings, "tokenizer"):
            loaded.append(load_tokenizer(model_dir))
        return loaded[0]

    outcome = adopt.record_levels(adoption, tokenizer)
    if outcome.failed or not adoption.rescore:
        if not adoption.rescore:
            outcome.levels.append(LevelResult("rescore", skipped="--structural"))
            outcome.scores_unverified.append(f"none of the {len(adoption.questions)} logged rows was rescored "
                                             "(--structural)")
        return outcome
    with phase("rescore: verify and load the model (hash before load)", timings, "model_load"):
        model_hashed.result()  # raises what the hashing found: a changed file is exit 1
        # the headers are read only now that their bytes are the manifest's, and before the load
        say(f"[memory] {memory_statement(model_dir, adoption.settings, available_memory_bytes())}")
        model, _ = load_model(model_dir, adoption.settings, loaded[0])
    start = time.perf_counter()
    level = check_rescore(adoption, model, seed)
    timings["rescore"] = round(time.perf_counter() - start, 3)
    if level is None:  # not rank 0: its share was gathered there
        return outcome
    outcome.levels.append(level)
    outcome.scores_unverified += level.sampled
    if level.drift_only:
        outcome.drift_only = True
        outcome.limits.append(level.drift_reason)
    return outcome


def _rescored_summary(adoption) -> dict:
    """The metric from the rescored scores, over the rows rescored (a sample's number is its own)."""
    rescored = [q for _, q in sorted(adoption.questions.items()) if q.rescored is not None]
    summary = {}
    for metric in adoption.spec.metrics if rescored else ():
        values = [METRICS[metric].value(q.rescored, q) for q in rescored]
        number, stderr = METRICS[metric].aggregate(values, bootstrap_iters(adoption.settings))
        summary.update({metric: number, f"{metric}_stderr": stderr, "rows": len(rescored)})
    return summary


def record(adoption, run_name: str, seed: int, timings: dict) -> adopted.AdoptedRecord:
    output, task, settings = adoption.output, adoption.spec.name, adoption.settings
    here = fingerprint(settings["numeric_mode"], adoption.shards.threads(settings))
    reported = output.results["results"][task]
    questions = [adoption.questions[idx] for idx in sorted(adoption.questions)]
    return adopted.AdoptedRecord(
        run_name=run_name, profile=adoption.profile.name, task=task, metrics=list(adoption.spec.metrics),
        demo=adoption.profile.demo, notice=notice_for(adoption.profile), lock_sha256=adoption.lock.sha256,
        resources=list(adoption.data.manifest.files),
        source={"results_file": output.results_path.name, "results_sha256": output.results_sha256,
                "samples_file": output.samples_path.name, "samples_sha256": output.samples_sha256},
        claims=scrub_absolute_paths(adoption.claims),
        config_differences=scrub_absolute_paths(adoption.differences), bound=adoption.bound,
        rescore={"rows": adoption.rescore, "seed": seed, "processes": adoption.shards.world}, platform=here,
        bits_required=runs_the_mode(settings, here)[0], versions=versions(),
        reported={key: reported[f"{METRICS[m].reported_as}{suffix},none"] for m in adoption.spec.metrics
                  for key, suffix in ((m, ""), (f"{m}_stderr", "_stderr"))},
        rederived=adoption.rederived, rescored_summary=_rescored_summary(adoption),
        row_classes={name: sum(q.row_class == name for q in questions) for name in ROW_CLASSES},
        questions=questions, timings=timings)


BIT_CLASSES = (BITS, SEALED, NOT_DRAWN)  # the classes a PASS may hold (sealed and undrawn rows limit it)
