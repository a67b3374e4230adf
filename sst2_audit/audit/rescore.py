"""Level 3, rescore: re-run the independent forward pass on rows the submitter cannot predict.

The rows are drawn at random (a seed the reviewer gives, or one drawn fresh and printed)
from the dev set re-derived from the reviewer's lock and cache, never from ids the run
record names. Scoring them needs no claim, so it starts beside the earlier levels (Prefetch);
the record's scores are compared with them only after those levels passed (check). Scores
are compared bit for bit on the same numeric platform, within the drift bound otherwise.
"""

import random
import secrets
import threading
import time
from dataclasses import dataclass, field
from math import comb
from pathlib import Path

from sst2_audit.protocol.drift import DRIFT, DRIFT_BOUND, IDENTICAL, judge
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.scoring.identity import expected_question, longest_recorded
from sst2_audit.scoring.independent import IndependentScorer
from sst2_audit.scoring.model import load as load_model, memory_statement
from sst2_audit.util.environment import available_memory_bytes
from sst2_audit.protocol.numeric import fingerprint, mode_words, one_line, runs_the_mode, same_platform
from sst2_audit.util.progress import say, say_wrapped, Ticker
from sst2_audit.protocol.rules import predict
from sst2_audit.audit.findings import Finding, LevelResult, shown
from sst2_audit.audit.inputs import build as build_inputs
from sst2_audit.audit.loading import RunFolder
from sst2_audit.task.split import CONFIRM_MODE


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


@dataclass
class Rescoring:
    """The rescore's work that needs no claim but the run's profile and mode: the reviewer's files
    verified, the model loaded, and the drawn rows of the reviewer's own dev set scored."""
    seed: int
    scored: list = field(default_factory=list)  # the dev ids the mode scores, from the reviewer's lock and data
    chosen: list = field(default_factory=list)
    rescored: dict = field(default_factory=dict)  # idx -> this machine's independent scores
    here: dict | None = None  # this machine's numeric platform
    bits: bool = False  # bit for bit required (this machine runs the lock's numeric mode)
    why: str = ""  # the reason, in words (numeric.runs_the_mode)
    error: BaseException | None = None


def _score(run: RunFolder, context, rescoring: Rescoring, stop: threading.Event) -> None:
    import torch

    record, spec, cache, rows = run.record, run.task_spec(), context.cache, context.policy.rescore
    inputs = context.inputs
    if inputs is None:  # a rescore without the identity level before it: its own inputs, its own tokenizer
        inputs = build_inputs(run, cache)
        inputs.tokenizer_free.set()
    if inputs.error is not None:
        raise inputs.error
    data, shots, rescoring.scored = inputs.data, inputs.shots, inputs.scored
    rescoring.chosen = draw(rescoring.scored, rows, rescoring.seed)
    if record.mode == CONFIRM_MODE and context.policy.confirmation:  # a verified chain: its confirmation rows
        data.split.require_confirm(rescoring.chosen)
    else:
        data.split.require_dev(rescoring.chosen)  # never a confirmation row, whatever the record says
    settings = run.lock.settings_for(record.profile, spec)
    shards = context.shards  # the rescore is the only scoring path: every core, shared by the processes
    torch.set_num_threads(shards.threads(settings))
    if stop.is_set():  # an earlier level failed while the files were hashed: no model, no output
        return
    chosen = set(rescoring.chosen)  # the longest input the record states (a claim the identity level checks)
    longest = longest_recorded(q for q in record.questions if q.idx in chosen)
    memory = memory_statement(Path(cache) / "model", settings, available_memory_bytes(), shards.local, longest)
    say_wrapped("rescore: memory", memory)  # before the load: a machine it cannot fit is refused with the arithmetic
    start = time.perf_counter()
    model, tokenizer = load_model(Path(cache) / "model", settings, inputs.tokenizer)
    if stop.is_set():  # the levels failed meanwhile: nothing more is said or scored
        return
    say(f"[rescore: load model] done in {time.perf_counter() - start:.1f} s")
    scorer = IndependentScorer(model, settings["max_length"])
    rescoring.here = fingerprint(settings["numeric_mode"], shards.threads(settings))
    # The reviewer's side alone decides the bound: where this machine's probe gives the lock's pinned
    # digest, every score must be equal bit for bit, whatever platform the record claims; the claim is
    # printed, never believed.
    rescoring.bits, rescoring.why = runs_the_mode(settings, rescoring.here)
    mine = shards.mine(rescoring.chosen)  # every world-th row from this rank's (scoring/shards.py)
    share = f" ({len(mine)} in each of {shards.world} processes)" if shards.world > 1 else ""
    name, start = f"rescore: {len(rescoring.chosen)} rows drawn with seed {rescoring.seed}{share}", time.perf_counter()
    say(f"[{name}] ...")
    inputs.tokenizer_free.wait()  # one tokenizer, used by one thread at a time: the identity level's first
    ticker = Ticker(name.split(" drawn")[0], len(mine))
    for number, idx in enumerate(mine, start=1):
        if stop.is_set():  # the record's scores will not be compared: stop quietly
            return
        question = expected_question(data.by_idx[idx], spec, tokenizer, settings["max_length"],
                                     settings["add_bos_token"], shots)  # as run's independent path builds it
        rescoring.rescored[idx] = list(scorer.score(idx, question.pairs()).candidate_scores)
        ticker.tick(number)
    say(f"[{name}] done in {time.perf_counter() - start:.1f} s")


class Prefetch(threading.Thread):
    """Starts the rescore's record-free work while the earlier levels run (torch releases the GIL, so the
    forward passes use the other core); its scores meet the record only in check(), after the gate."""

    def __init__(self, run: RunFolder, context):
        super().__init__(name="rescore", daemon=True)
        self.run_folder, self.context, self.stop = run, context, threading.Event()
        seed = context.policy.seed
        self.rescoring = Rescoring(secrets.randbelow(2 ** 32) if seed is None else seed)

    def run(self):
        try:  # every import it needs was made in the main thread (inputs.build): no import lock
            _score(self.run_folder, self.context, self.rescoring, self.stop)
        except BaseException as error:  # noqa: BLE001 - handed to check()
            self.rescoring.error = error

    def result(self) -> Rescoring:
        self.join()
        return self.rescoring


def start(run: RunFolder, context) -> Prefetch | None:
    """The prefetch of a run whose profile the reviewer's lock defines, else None."""
    try:
        if run.record is None or run.task_spec() is None:
            return None
    except (CheckFailed, InputError):  # the levels meet the same problem and report it as their FAIL
        return None
    prefetch = Prefetch(run, context)
    prefetch.start()
    return prefetch


def _judged(result: LevelResult, run: RunFolder, pairs: dict, rescoring: Rescoring) -> None:
    record, here, change = run.record, rescoring.here, run.numeric_mode_change
    # A run made in another numeric mode (its lock is the reviewer's but for the mode) is held to bits
    # only where they came out equal; otherwise it is drift at best, never PASS, and the mode is named.
    bits = rescoring.bits and change is None
    basis = (f"{rescoring.why}: bit for bit required" if bits else
             f"the run was made in another numeric mode ({mode_words(change[0])}): drift bound {DRIFT_BOUND:g} "
             "per score" if change is not None else f"{rescoring.why}: drift bound {DRIFT_BOUND:g} per score")
    verdict = judge(pairs, bits, predict, basis=basis)
    result.checks += verdict.compared
    result.notes.append(verdict.line())
    if not same_platform(here, record.platform):
        result.notes.append(f"run's platform (claimed):  {one_line(record.platform)}")
        result.notes.append(f"this platform:             {one_line(here)}")
    if verdict.verdict == DRIFT or (verdict.verdict == IDENTICAL and not rescoring.bits):
        # equal scores from a machine that does not run the mode say less than bits in the mode: never PASS
        result.drift_only = True
        result.drift_reason = (f"the run was made in numeric mode {mode_words(change[0])}, not the lock's"
                               if change is not None and rescoring.bits else rescoring.why)
        result.notes.append(f"scores held to the drift bound {DRIFT_BOUND:g} only, not bit for bit: "
                            f"{result.drift_reason}")
    if verdict.verdict not in (IDENTICAL, DRIFT):
        for idx, (claimed, rescored) in pairs.items():
            if claimed != rescored:
                result.problems.append(Finding(f"row idx {idx}: scores.independent: the record says {claimed!r}, "
                                               f"rescored here {rescored!r}", result.name, "mismatch", f"row idx {idx}",
                                               "scores.independent", shown(claimed), shown(rescored)))


def check(run: RunFolder, context, prefetch: Prefetch | None = None) -> LevelResult:
    rows, record = context.policy.rescore, run.record
    prefetch = prefetch or start(run, context)
    rescoring = prefetch.result() if prefetch is not None else Rescoring(0)
    result = LevelResult(f"rescore ({rows} rows, seed {rescoring.seed})")
    if record is None:
        result.skipped = "the run has no run record"
        return result
    if isinstance(rescoring.error, CheckFailed):
        result.fail(str(rescoring.error))
        return result
    if rescoring.error is not None:
        raise rescoring.error
    rescored = context.shards.gather(rescoring.rescored)  # every process's share, at rank 0
    if rescored is None:  # another rank: its share was gathered; rank 0 judges and reports
        return result
    rescoring.rescored = rescored
    questions = {q.idx: q for q in record.questions}
    pairs = {}
    for idx in rescoring.chosen:
        if idx not in questions:
            result.fail(f"row idx {idx}: a dev row the run scored has no question record")
            continue
        pairs[idx] = (list(questions[idx].scores["independent"]), rescoring.rescored[idx])
    chosen, scored = rescoring.chosen, rescoring.scored
    result.notes.append(f"rows drawn with seed {rescoring.seed} (repeat with --seed {rescoring.seed}): "
                        f"{sorted(chosen) if len(chosen) <= 16 else f'{len(chosen)} rows'}")
    _judged(result, run, pairs, rescoring)
    if len(chosen) < len(scored):
        result.sampled.append(f"{len(scored) - len(chosen)} of {len(scored)} scored rows not rescored "
                              f"(--rescore {rows}); " + sample_odds(len(scored), len(chosen)))
    else:
        result.notes.append(f"all {len(scored)} scored rows rescored")
    return result
