"""A loglikelihood_rolling task's adoption (audit/adopt_shape.py; lm-eval's perplexity tasks): every logged
document's text held to the pinned row, each logged [log-likelihood, count] and the task's perplexities re-derived,
and each text rescored on the independent path in lm-eval's rolling windows (scoring/rolling.py), its summed
log-likelihood held bit for bit (or to a claimed dtype's bound over all its predicted tokens). Kept as an adopted
folder and bundle (formats/adopted_rolling.py) like any adoption; no Every Eval Ever export (exports: its instance
record requires a per-sample is_correct, which a document's perplexity does not have)."""

import dataclasses
import typing

from sst2_audit.audit import adopt, adopt_rescore, adopt_scores, adopted_level
from sst2_audit.audit.adopt_scores import drift_causes, score_bound
from sst2_audit.audit.adopt_shape import AdoptShape, UNTOKENIZED
from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats.adopted import BITS, OUT, SEALED, WITHIN
from sst2_audit.formats.adopted_rolling import AdoptedRollingRecord, ROLLING_CLASSES, RolledRow
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.formats.lm_eval_rolling import public_rolled_sample
from sst2_audit.protocol.metrics import result_key
from sst2_audit.protocol.perplexity import NO_STDERR, ROLLING_METRICS
from sst2_audit.protocol.rules import doc_hash
from sst2_audit.scoring.rolling import prefix_token, rolling_windows, text_tokens
from sst2_audit.util.errors import InternalError
from sst2_audit.util.hashing import sha256_text, tokens_hash


def check_claims(adoption) -> LevelResult:
    """lm-eval's claims (audit/adopt.py::check_claims), and the one a document's windows hang on: the max_length the
    run's model cut them at (results `max_length`, what lm-eval's HFLM used) against the profile's. A float32
    claim's bound is a document's (document_bound) from here on, rescored or not, so a record says the bound its
    audit will hold."""
    level = adopt.check_claims(adoption)
    if adoption.bound is not None and adoption.bound_given is None and adoption.dtype == "float32":
        adoption.bound = document_bound(adoption.bound)
    logged = adoption.output.results.get("max_length")
    if logged is None:
        level.unchecked.append("results: max_length is not logged: the rolling windows' length is not checked before "
                               "the rescore (a run cut at another length differs there, row by row)")
    else:
        level.expect("results", "max_length (the rolling windows are cut at it)", adoption.settings["max_length"],
                     logged)
    return level


def check_identity(adoption, tokenizer) -> LevelResult:
    """Every logged document against the reviewer's row its doc_id names: the doc, the one request's text (lm-eval's
    prompt_hash and target_hash are both of it) and, in lm-eval's own file, the logged doc, request and target."""
    level, spec, settings = LevelResult("identity"), adoption.spec, adoption.settings
    prefix = prefix_token(tokenizer) if tokenizer is not None else 0  # read only with the tokenizer
    for sample in adoption.output.samples:
        where = f"doc_id {sample.doc_id}"
        row = adoption.split_rows.by_idx.get(sample.doc_id)
        if row is None or sample.doc_id in adoption.questions:
            level.fail(f"{where}: " + ("logged twice" if row is not None else
                                       f"not a row of the {spec.eval_split} split ({len(adoption.split_rows.by_idx)} "
                                       "rows)"), row=sample.doc_id)
            continue
        text = spec.rolling_text(row.doc)
        digest = sha256_text(text)
        want: dict = {"doc_hash": doc_hash(row.as_doc()), "prompt_hash": digest, "target_hash": digest}
        got: dict = {"doc_hash": sample.doc_hash, "prompt_hash": sample.prompt_hash, "target_hash": sample.target_hash}
        if sample.logged is not None:  # lm-eval's own file: its text, compared as digests (no data in a finding)
            want.update({"doc_hash (of the logged doc)": want["doc_hash"], "arguments (sha256 of the text)": [digest],
                         "target (sha256)": digest})
            got.update({"doc_hash (of the logged doc)": sample.logged.doc_hash,
                        "arguments (sha256 of the text)": sample.logged.contexts,
                        "target (sha256)": sample.logged.target})
        adopt.expect_identity(level, adoption, sample, want, got)
        tokens = text_tokens(tokenizer, text, settings["add_bos_token"]) if tokenizer is not None else None
        windows = rolling_windows(tokens, prefix, settings["max_length"]) if tokens is not None else None
        adoption.questions[sample.doc_id] = RolledRow(
            sample.doc_id, want["doc_hash"], want["prompt_hash"], want["target_hash"], spec.rolling_counts(row.doc),
            None if tokens is None else len(tokens), None if tokens is None else tokens_hash([tokens]),
            None if windows is None else len(windows), sample.score)
        if adoption.rescore:  # the rescore's input, kept only when a rescore will read it
            adoption.requests[sample.doc_id] = windows
    if tokenizer is None:  # lm-eval logs no tokens: only a rescore reads them (AdoptShape.tokenizes)
        level.notes.append(UNTOKENIZED)
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


def document_bound(bound):
    """A float32 claim's bound for a document: the drift bound between CPUs per sqrt(predicted token), not per score.
    A document's sum runs over hundreds of tokens' terms, and rounding adds up: measured (docs/measurements.md,
    "Perplexity tasks"), an honest float32 run outside the lock's numeric mode differs by 1.8e-5 to 5.4e-5 nats per
    sqrt(token), which the per-score bound (DRIFT_BOUND) would FAIL."""
    return dataclasses.replace(bound, per_score=f"|logged - rescored| <= {DRIFT_BOUND:g} * sqrt(tokens)", absolute=0.0,
                               per_token=DRIFT_BOUND, basis=bound.basis + ", per sqrt(token) of a document's sum")


def score_words(bound) -> str:
    """The bound's rule for one score (a document has no margin between candidates to hold)."""
    if not bound.per_token:
        return bound.per_score
    if not bound.relative:
        return f"|logged - rescored| <= {bound.per_token:g} * sqrt(tokens)"
    return f"|logged - rescored| <= {bound.relative:g} * |rescored| + {bound.per_token:g} * sqrt(tokens)"


def row_class_of(logged: float, rescored: float, tokens: int, bound) -> str:
    return (BITS if logged == rescored else
            WITHIN if abs(logged - rescored) <= score_bound(rescored, tokens, bound) else OUT)  # one continuation


def _classed(adoption, chosen: list) -> None:
    for idx in chosen:
        row = adoption.questions[idx]
        row.max_abs_diff = abs(row.logged - row.rescored)
        row.row_class = row_class_of(row.logged, row.rescored, row.tokens, adoption.bound)


def check_rescore(adoption, model, seed: int) -> LevelResult | None:
    """Each chosen document's windows scored on the independent path and summed in window order (lm-eval's
    Python sum); sealed rows never reach the model."""
    chosen, sealed, open_ids = adopt_rescore._chosen(adoption, seed)
    scored = adopt_rescore._scored(adoption, model, chosen)
    if scored is None:
        return None
    level = LevelResult(f"rescore ({adoption.rescore} rows, seed {seed})")
    for idx in chosen:
        adoption.questions[idx].rescored = sum(scored[idx])  # lm-eval's Python sum, in window order
    _classed(adoption, chosen)
    bits = [idx for idx in chosen if adoption.questions[idx].row_class == BITS]
    if adopt_scores.take_claim_back(adoption, chosen, bits, document_bound):
        _classed(adoption, chosen)
    for idx in sealed:
        adoption.questions[idx].row_class = SEALED
    counts = {name: sum(q.row_class == name for q in adoption.questions.values()) for name in ROLLING_CLASSES}
    level.checks = len(chosen)
    level.notes.append(f"bound: {score_words(adoption.bound)} over each document's predicted tokens "
                       f"({adoption.bound.basis})")
    level.notes.append("rows: " + ", ".join(f"{counts[name]} {name}" for name in ROLLING_CLASSES if counts[name]))
    for question in (adoption.questions[idx] for idx in chosen):
        if question.row_class == OUT:
            level.fail(f"row idx {question.idx}: logged log-likelihood {question.logged!r}, rescored here "
                       f"{question.rescored!r} over {question.windows} rolling window(s) of {question.tokens} "
                       f"tokens: {question.max_abs_diff:.4g} apart, beyond the bound "
                       f"{score_bound(question.rescored, question.tokens, adoption.bound):.4g}",
                       row=question.idx)
    adopt_rescore._sampled(level, sealed, chosen, open_ids, adoption.rescore)
    if counts[WITHIN] and not level.problems:
        level.drift_only = True
        level.drift_reason = (f"{counts[WITHIN]} rescored row(s) within the bound {score_words(adoption.bound)} "
                              f"({adoption.bound.basis}): consistent with rounding; your perplexities above are "
                              "the measurement" + drift_causes(adoption))
    return level


def rescored_summary(rows, metrics) -> dict:
    """{metric: the reviewer's number, "rows": how many} from the rescored documents, in doc_id order; {} when none
    was rescored."""
    rescored = sorted((row for row in rows if row.rescored is not None), key=lambda row: row.idx)
    if not rescored:
        return {}
    return {**{metric: ROLLING_METRICS[metric].aggregate([(row.rescored, row.counts[metric]) for row in rescored])
               for metric in metrics}, "rows": len(rescored)}


def rolling_record(adoption, common: dict) -> AdoptedRollingRecord:
    reported = adoption.output.results["results"][adoption.spec.name]
    rows = [adoption.questions[idx] for idx in sorted(adoption.questions)]
    return AdoptedRollingRecord(
        **common, metrics=list(adoption.spec.metrics),
        reported={key: reported[result_key(m, stderr=bool(suffix))] for m in adoption.spec.metrics
                  for key, suffix in ((m, ""), (f"{m}_stderr", "_stderr"))},
        rederived=adoption.rederived, rescored_summary=rescored_summary(rows, adoption.spec.metrics),
        row_classes={name: sum(row.row_class == name for row in rows) for name in ROLLING_CLASSES},
        row_set=dataclasses.asdict(adoption.row_set), rows=rows)


ROLLED_FIELDS = ("doc_hash", "prompt_hash", "target_hash", "counts", "tokens", "tokens_sha256", "windows", "logged")
TOKEN_FIELDS = ("tokens", "tokens_sha256", "windows")  # None where the adoption rescored nothing


def check_adopted(claimed, rederived, bits: bool) -> LevelResult:
    """A loglikelihood_rolling task's adopted.json against the record re-derived here: its own summary and classes
    from its rows first, then every row's fields, and each recorded rescore against this machine's (bits where it
    runs the lock's numeric mode, else the drift bound between CPUs)."""
    level = LevelResult("adopted record")
    level.expect("adopted.json", "rescored_summary (re-derived from its rows' rescored scores)",
                 rescored_summary(claimed.rows, claimed.metrics), claimed.rescored_summary)
    level.expect("adopted.json", "row_classes (counted from its rows)",
                 {name: sum(row.row_class == name for row in claimed.rows) for name in ROLLING_CLASSES},
                 claimed.row_classes)
    mine = adopted_level.compared_record(level, claimed, rederived, adopted_level.RECORD_FIELDS, "rows")
    drifted = 0
    for row in claimed.rows:
        where, here = f"row idx {row.idx}", mine.get(row.idx)
        if row.rescored is not None:
            level.expect(where, "row_class (its scores under the recorded bound)",
                         row_class_of(row.logged, row.rescored, row.tokens, claimed.bound), row.row_class)
        if here is None:
            continue
        for name in ROLLED_FIELDS:
            if adopted_level.tokens_unclaimed(row, name, TOKEN_FIELDS, row.rescored):
                continue
            level.expect(where, name, getattr(here, name), getattr(row, name))
        drifted += adopted_level._rescored(level, where, None if row.rescored is None else [row.rescored],
                                           None if here.rescored is None else [here.rescored], bits)
        if here.rescored is not None and row.rescored is None:
            adopted_level.undrawn_row(level, where, row, ("max_abs_diff",))
        elif here.rescored is not None or here.row_class == SEALED:
            level.expect(where, "row_class", here.row_class, row.row_class)
    adopted_level.drift_said(level, drifted)
    return level


class RollingAdoption(AdoptShape):
    rescored_as = "rescored bit for bit"
    exports = False  # Every Eval Ever's instance record requires is_correct: a perplexity has no right answer

    def record_checks(self) -> tuple:
        return check_identity, check_arithmetic

    def claims_level(self):
        return check_claims

    def longest(self, adoption) -> int:
        return max((len(w.input_tokens) for windows in adoption.requests.values() for w in windows), default=0)

    def rescore(self, adoption, model, tokenizer, seed: int) -> LevelResult | None:
        return check_rescore(adoption, model, seed)

    def reviewer_pairs(self, adoption) -> tuple:
        reported = adoption.output.results["results"].get(adoption.spec.name, {})
        mine = rescored_summary(adoption.questions.values(), adoption.spec.metrics)
        return "yours", [(metric, reported.get(result_key(metric)), mine.get(metric), mine.get("rows", 0))
                         for metric in adoption.spec.metrics]

    def record(self, adoption, common: dict):
        return rolling_record(adoption, common)

    def public_sample(self, sample) -> dict:
        return public_rolled_sample(sample)

    def take_claims(self, adoption, claimed) -> None:
        """A document's score is rescored from its row alone; a record whose rows hold tokens (or a rescore) has them
        checked against the tokens derived here."""
        adoption.tokens_claimed = adopted_level.claims_tokens(claimed.rows, TOKEN_FIELDS, "rescored")

    def check_adopted(self, claimed, here, bits: bool, settings: dict) -> LevelResult:
        return check_adopted(claimed, here, bits)

    def recorded_bound(self, adoption, claimed):
        return adopt_scores.recorded_bound(adoption, claimed.rows, document_bound)

    def exported_rows(self, adoption) -> typing.NoReturn:
        raise InternalError("a loglikelihood_rolling adoption is not exported (cli/adopt.py refuses --export-eee)")
