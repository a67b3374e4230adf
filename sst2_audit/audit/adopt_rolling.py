"""A loglikelihood_rolling task's adoption (audit/adopt_shape.py; lm-eval's perplexity tasks): every logged
document's text held to the pinned row, each logged [log-likelihood, count] and the task's perplexities re-derived,
and each text rescored on the independent path in lm-eval's rolling windows (scoring/rolling.py), its summed
log-likelihood held bit for bit (or to a claimed dtype's bound over all its predicted tokens). The verdict is
printed; an adopted folder, bundle and export are not written for this shape yet (writes_record)."""

import math
import typing
from dataclasses import dataclass, field

from sst2_audit.audit import adopt, adopt_rescore
from sst2_audit.audit.adopt_scores import bound_for
from sst2_audit.audit.adopt_shape import AdoptShape
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats.adopted import BITS, NOT_DRAWN, OUT, ROW_CLASSES, SEALED, WITHIN
from sst2_audit.formats.lm_eval_rolling import public_rolled_sample
from sst2_audit.protocol.metrics import result_key
from sst2_audit.protocol.perplexity import NO_STDERR, ROLLING_METRICS
from sst2_audit.protocol.rules import doc_hash
from sst2_audit.scoring.rolling import prefix_token, rolling_windows, text_tokens
from sst2_audit.task.rows import shown_ids
from sst2_audit.util.errors import InternalError
from sst2_audit.util.hashing import sha256_text


@dataclass
class RolledQuestion:
    """One logged document as the levels find it; `pairs`: its windows, the rescore's input (kept only then)."""
    idx: int
    logged: float  # the run's summed log-likelihood (a claim)
    counts: dict  # metric -> the words or bytes of the reviewer's row
    tokens: int = 0  # the tokens its windows predict, by the reviewer's tokenizer
    windows: int = 0
    pairs: list | None = None
    rescored: float | None = None
    row_class: str = NOT_DRAWN
    max_abs_diff: float | None = None
    window_scores: list = field(default_factory=list)


def check_identity(adoption, tokenizer) -> LevelResult:
    """Every logged document against the reviewer's row its doc_id names: the doc, the one request's text (lm-eval's
    prompt_hash and target_hash are both of it) and, in lm-eval's own file, the logged doc, request and target."""
    level, spec, settings = LevelResult("identity"), adoption.spec, adoption.settings
    prefix, located = prefix_token(tokenizer), None
    for sample in adoption.output.samples:
        where = f"doc_id {sample.doc_id}"
        row = adoption.split_rows.by_idx.get(sample.doc_id)
        if row is None or sample.doc_id in adoption.questions:
            level.fail(f"{where}: " + ("logged twice" if row is not None else
                                       f"not a row of the {spec.eval_split} split ({len(adoption.split_rows.by_idx)} "
                                       "rows)"), row=sample.doc_id)
            continue
        text, doc = spec.rolling_text(row.doc), row.as_doc()
        want: dict = {"doc_hash": doc_hash(doc), "prompt_hash": sha256_text(text), "target_hash": sha256_text(text)}
        got: dict = {"doc_hash": sample.doc_hash, "prompt_hash": sample.prompt_hash, "target_hash": sample.target_hash}
        if sample.logged is not None:  # lm-eval's own file: its text, compared as digests (no data in a finding)
            want.update({"doc_hash (of the logged doc)": want["doc_hash"], "arguments (sha256 of the text)": [
                sha256_text(text)], "target (sha256)": sha256_text(text)})
            got.update({"doc_hash (of the logged doc)": sample.logged.doc_hash,
                        "arguments (sha256 of the text)": sample.logged.contexts,
                        "target (sha256)": sample.logged.target})
        for name in want:
            if not level.expect(where, name, want[name], got[name]) and name == "doc_hash":
                located = located or adopt._located(adoption)
                holders = located.get(sample.doc_hash)
                level.notes.append(f"logged doc_id {sample.doc_id} holds the doc of row idx {holders} (mislabelled: "
                                   "lm-eval #4084)" if holders else f"logged doc_id {sample.doc_id}: its doc is no "
                                   "row of the split")
        windows = rolling_windows(text_tokens(tokenizer, text, settings["add_bos_token"]), prefix,
                                  settings["max_length"])
        adoption.questions[sample.doc_id] = RolledQuestion(
            sample.doc_id, sample.score, spec.rolling_counts(row.doc),
            sum(len(w.continuation_tokens) for w in windows), len(windows), windows if adoption.rescore else None)
    return level


def check_arithmetic(adoption) -> LevelResult:
    """Each logged [log-likelihood, count] from the logged score and the reviewer's row; each perplexity as lm-eval
    aggregates them (doc_id order), and its stderr as lm-eval reports none."""
    level, spec = LevelResult("arithmetic"), adoption.spec
    for sample in adoption.output.samples:
        question, where = adoption.questions[sample.doc_id], f"doc_id {sample.doc_id}"
        level.expect(where, "filtered_resps (filter none: the response)", sample.score, sample.filtered)
        level.expect(where, "metrics (the task's)", sorted(spec.metrics), sorted(sample.metrics))
        for metric in spec.metrics:
            if metric in sample.metrics:
                level.expect(where, f"{metric} ([log-likelihood, {ROLLING_METRICS[metric].unit}])",
                             [sample.score, question.counts[metric]], sample.metrics[metric])
    if level.problems:
        return level
    ordered = [adoption.questions[idx] for idx in sorted(adoption.questions)]  # lm-eval aggregates in doc_id order
    task = adoption.output.results["results"][spec.name]
    for metric in spec.metrics:
        number = ROLLING_METRICS[metric].aggregate([(q.logged, q.counts[metric]) for q in ordered])
        adoption.rederived.update({metric: number, f"{metric}_stderr": NO_STDERR})
        level.expect("results", result_key(metric), number, task[result_key(metric)])
        level.expect("results", result_key(metric, stderr=True), NO_STDERR, task[result_key(metric, stderr=True)])
    return level


def _bound(question: RolledQuestion, bound) -> float:
    """A document's bound (nats): its predicted tokens are one continuation of a sum, as a candidate's are."""
    return bound.relative * abs(question.rescored or 0.0) + bound.absolute + bound.per_token * math.sqrt(
        max(question.tokens, 1))


def _classed(adoption, chosen: list) -> None:
    for idx in chosen:
        question = adoption.questions[idx]
        question.max_abs_diff = abs(question.logged - question.rescored)
        question.row_class = (BITS if question.logged == question.rescored else
                              WITHIN if question.max_abs_diff <= _bound(question, adoption.bound) else OUT)


def check_rescore(adoption, model, seed: int) -> LevelResult | None:
    """Each chosen document's windows scored on the independent path and summed in window order (lm-eval's
    Python sum); sealed rows never reach the model."""
    chosen, sealed, open_ids = adopt_rescore._chosen(adoption, seed)
    scored = adopt_rescore._scored(adoption, model, chosen)
    if scored is None:
        return None
    level = LevelResult(f"rescore ({adoption.rescore} rows, seed {seed})")
    for idx in chosen:
        question = adoption.questions[idx]
        question.window_scores, question.rescored = scored[idx], sum(scored[idx])
    _classed(adoption, chosen)
    bits = [idx for idx in chosen if adoption.questions[idx].row_class == BITS]
    if bits and adoption.bound_given is None and adoption.dtype not in (None, "float32"):
        adoption.bound = bound_for(None, "float32", False, f"float32: {len(bits)} of {len(chosen)} rescored rows of "
                                   f"this run, which claims {adoption.dtype}, equal the float32 rescore bit for bit "
                                   f"(row idx {shown_ids(bits, 4)}), so the claim is not taken")
        _classed(adoption, chosen)
    for idx in sealed:
        adoption.questions[idx].row_class = SEALED
    counts = {name: sum(q.row_class == name for q in adoption.questions.values()) for name in ROW_CLASSES}
    level.checks = len(chosen)
    level.notes.append(f"bound: {adoption.bound.per_score} over each document's predicted tokens "
                       f"({adoption.bound.basis})")
    level.notes.append("rows: " + ", ".join(f"{counts[name]} {name}" for name in ROW_CLASSES if counts[name]))
    for question in (adoption.questions[idx] for idx in chosen):
        if question.row_class == OUT:
            level.fail(f"row idx {question.idx}: logged log-likelihood {question.logged!r}, rescored here "
                       f"{question.rescored!r} over {question.windows} rolling window(s) of {question.tokens} "
                       f"tokens: {question.max_abs_diff:.4g} apart, beyond the bound "
                       f"{_bound(question, adoption.bound):.4g}",
                       row=question.idx)
    adopt_rescore._sampled(level, sealed, chosen, open_ids, adoption.rescore)
    if counts[WITHIN] and not level.problems:
        level.drift_only = True
        level.drift_reason = (f"{counts[WITHIN]} rescored row(s) within the bound {adoption.bound.per_score} "
                              f"({adoption.bound.basis}): consistent with rounding; your perplexities above are "
                              "the measurement" + adopt.drift_causes(adoption))
    return level


def rescored_numbers(adoption) -> tuple:
    """({metric: the reviewer's number}, rows) from the rescored documents, in doc_id order."""
    rescored = [adoption.questions[idx] for idx in sorted(adoption.questions)
                if adoption.questions[idx].rescored is not None]
    return ({metric: ROLLING_METRICS[metric].aggregate([(q.rescored, q.counts[metric]) for q in rescored])
             for metric in adoption.spec.metrics} if rescored else {}), len(rescored)


def _not_written(what: str) -> typing.NoReturn:
    raise InternalError(f"a loglikelihood_rolling adoption writes no {what} (cli/adopt.py refuses first)")


class RollingAdoption(AdoptShape):
    rescored_as = "rescored bit for bit"
    writes_record = False

    def record_checks(self) -> tuple:
        return check_identity, check_arithmetic

    def longest(self, adoption) -> int:
        return max((len(w.input_tokens) for q in adoption.questions.values() for w in q.pairs or ()), default=0)

    def rescore(self, adoption, model, tokenizer, seed: int) -> LevelResult | None:
        return check_rescore(adoption, model, seed)

    def reviewer_pairs(self, adoption) -> tuple:
        reported = adoption.output.results["results"].get(adoption.spec.name, {})
        mine, rows = rescored_numbers(adoption)
        return "yours", [(metric, reported.get(result_key(metric)), mine.get(metric), rows)
                         for metric in adoption.spec.metrics]

    def record(self, adoption, common: dict):
        _not_written("adopted record")

    def public_sample(self, sample) -> dict:
        return public_rolled_sample(sample)

    def write(self, path, record) -> None:
        _not_written("adopted.json")

    def take_claims(self, adoption, claimed) -> None:
        _not_written("adopted record to take claims from")

    def check_adopted(self, claimed, here, bits: bool, settings: dict) -> LevelResult:
        _not_written("adopted record to re-check")

    def exported_rows(self, adoption) -> list:
        _not_written("Every Eval Ever export")
