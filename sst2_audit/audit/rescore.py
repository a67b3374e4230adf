"""Level 3, rescore: re-run the independent forward pass on rows the submitter cannot predict.

The rows are drawn at random (a seed the reviewer gives, or one drawn fresh and printed)
from the dev set re-derived from the reviewer's lock and cache, never from ids the run
record names; the runner calls this level only after the identity level passed. Scores
are compared bit for bit on the same numeric platform, within the drift bound otherwise.
"""

import random
import secrets
from math import comb
from pathlib import Path

from ..drift import DRIFT, DRIFT_BOUND, IDENTICAL, judge
from ..errors import CheckFailed
from ..independent import IndependentScorer, encode_question
from ..model import load as load_model
from ..numeric import fingerprint, one_line, same_platform
from ..progress import phase
from ..protocol import predict
from ..split_rows import verified_rows
from .findings import LevelResult
from .loading import RunFolder


def draw(dev_ids: list, rows, seed: int) -> list:
    """rows ids of dev_ids drawn without replacement by seed; 'all' keeps them all (in hash order)."""
    if rows == "all":
        return list(dev_ids)
    return random.Random(seed).sample(list(dev_ids), rows)


def sample_odds(rows: int, drawn: int) -> str:
    """Chance that a draw of `drawn` of `rows` rows finds at least one of k forged rows (hypergeometric)."""
    parts = []
    for forged in (1, 2, 5, 10):
        if forged <= rows:
            found = 1 - comb(rows - forged, drawn) / comb(rows, drawn)
            parts.append(f"k={forged}: {found:.1%}")
    return "chance to draw at least one of k forged rows: " + ", ".join(parts)


def _rescored(result: LevelResult, run: RunFolder, spec, data, cache, chosen: list, seed: int) -> tuple:
    """({idx: (recorded independent scores, rescored)}, this machine's platform, bits required?)."""
    import torch

    record, questions = run.record, {q.idx: q for q in run.record.questions}
    settings = run.lock.settings_for(record.profile)
    torch.set_num_threads(settings["threads"])
    with phase("rescore: load model"):
        model, tokenizer = load_model(Path(cache) / "model", settings)
    scorer = IndependentScorer(model, settings["max_length"])
    here = fingerprint(settings["numeric_mode"], settings["threads"])
    # The reviewer's side alone decides the bound: in the lock's pinned mode every score must be
    # equal bit for bit, whatever platform the record claims; the claim is printed, never believed.
    bits = bool(settings["numeric_mode"]) and here["mode_in_effect"]
    pairs = {}
    with phase(f"rescore: {len(chosen)} rows drawn with seed {seed}", announce=True):
        for idx in chosen:
            if idx not in questions:
                result.fail(f"row idx {idx}: a dev row the run scored has no question record")
                continue
            doc = data.by_idx[idx].as_doc()
            encoded = encode_question(tokenizer, spec.context(doc), spec.candidates(doc), idx, settings["max_length"],
                                      settings["add_bos_token"])
            pairs[idx] = (list(questions[idx].scores["independent"]), list(scorer.score(idx, encoded).candidate_scores))
    return pairs, here, bits


def _judged(result: LevelResult, record, pairs: dict, here: dict, bits: bool) -> None:
    verdict = judge(pairs, bits, predict, basis=(
        "this machine runs the lock's numeric mode: bit for bit required" if bits else
        f"this machine cannot run the lock's numeric mode: drift bound {DRIFT_BOUND:g} per score"))
    result.checks += verdict.compared
    result.notes.append(verdict.line())
    if not same_platform(here, record.platform):
        result.notes.append(f"run's platform (claimed):  {one_line(record.platform)}")
        result.notes.append(f"this platform:             {one_line(here)}")
    if verdict.verdict == DRIFT:
        result.drift_only = True
        result.notes.append(f"scores equal within the drift bound {DRIFT_BOUND:g} only, not bit for bit: this "
                            "machine cannot run the lock's numeric mode")
    if verdict.verdict not in (IDENTICAL, DRIFT):
        for idx, (claimed, rescored) in pairs.items():
            if claimed != rescored:
                result.problems.append(f"row idx {idx}: scores.independent (rescored): expected {rescored!r}, "
                                       f"got {claimed!r}")


def check(run: RunFolder, context) -> LevelResult:
    cache, rows, seed = context.cache, context.policy.rescore, context.policy.seed
    record = run.record
    seed = secrets.randbelow(2 ** 32) if seed is None else seed
    result = LevelResult(f"rescore ({rows} rows, seed {seed})")
    if record is None:
        result.skipped = "the run has no run record"
        return result
    spec = run.task_spec()
    try:  # hash before load
        data = verified_rows(run.lock, run.lock.profile(record.profile), spec, cache, roles=("model", spec.eval_split))
    except CheckFailed as error:
        result.fail(str(error))
        return result
    scored = data.split.scored(record.mode)
    chosen = draw(scored, rows, seed)
    data.split.require_dev(chosen)  # never a confirmation row, whatever the record says
    pairs, here, bits = _rescored(result, run, spec, data, cache, chosen, seed)
    result.notes.append(f"rows drawn with seed {seed} (repeat with --seed {seed}): "
                        f"{sorted(chosen) if len(chosen) <= 16 else f'{len(chosen)} rows'}")
    _judged(result, record, pairs, here, bits)
    if len(chosen) < len(scored):
        result.sampled.append(f"{len(scored) - len(chosen)} of {len(scored)} scored rows not rescored "
                              f"(--rescore {rows}); " + sample_odds(len(scored), len(chosen)))
    else:
        result.notes.append(f"all {len(scored)} scored rows rescored")
    return result
