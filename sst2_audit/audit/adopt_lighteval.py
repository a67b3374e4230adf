"""Adopting a lighteval run (issue 62): its details held to the reviewer's profile as an lm-eval run is. lighteval's
prompt function is its own code, so nothing about it is taken on trust: every row's scored context, choices, gold
index and tokens are re-derived from the reviewer's pinned rows by the profile's YAML (the identity level), the rows
are the ones lighteval's own row rule picks, each row's acc and the aggregate are re-derived from the logged
log-likelihoods as lighteval computes them (arithmetic), and every row not sealed is rescored on the independent path
(lighteval 0.11+ logs its log-likelihoods rounded to 10 digits by its response cache: the rescore is rounded the
same way before it is compared). The lighteval side of the computation is mapped in SOURCE_MAP.md ("lighteval")."""

import json
import math
import random
from datetime import datetime, timezone

from sst2_audit.audit import adopt, adopt_export, adopt_rescore
from sst2_audit.audit.adopt_choice import ChoiceAdoption
from sst2_audit.audit.adopt_scores import bound_for, dtype_claimed
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.row_set import RowSet
from sst2_audit.formats import lighteval_details
from sst2_audit.formats.every_eval_ever import ExportedRow
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_text, tokens_hash

SHUFFLE_SEED = 42  # lighteval's LightevalTask.get_docs: random.Random(42).shuffle(docs), then the first max_samples


def row_rule(split_rows: int, max_samples: int | None) -> list:
    """The doc positions lighteval scores, in its order: the split shuffled by random.Random(42) (a shuffle depends
    only on the list's length), the first max_samples of it (all without --max-samples)."""
    ids = list(range(split_rows))
    shuffler = random.Random()
    shuffler.seed(SHUFFLE_SEED)
    shuffler.shuffle(ids)
    return ids[:max_samples] if max_samples else ids


def schema_words(flat: bool) -> str:
    return "lighteval before 0.11" if flat else "lighteval 0.11 and later"


def rule_words(max_samples: int | None) -> str:
    limit = f"the first {max_samples}" if max_samples else "all"
    return f"lighteval's row rule: the split shuffled by random.Random({SHUFFLE_SEED}), {limit}, in that order"


def as_logged(score: float) -> float:
    """A log-likelihood as lighteval 0.11+ logs it: its response cache reads each response back through pandas'
    Series.to_json (double_precision 10) before the details are written (utils/cache_management.py::_load_sample)."""
    import pandas

    return float(json.loads(pandas.Series([score]).to_json())["0"])


def mean_and_stderr(values: list) -> tuple[float, float]:
    """lighteval's corpus mean (numpy's, pairwise) and its stderr (metrics/utils/stderr.py::mean_stderr)."""
    import numpy

    mu = numpy.mean(values)
    stddev = math.sqrt(sum((x - mu) ** 2 for x in values) / (len(values) - 1))
    return float(mu), stddev / math.sqrt(len(values))


def _rows_checked(adoption, level: LevelResult) -> None:
    """The logged rows against lighteval's row rule; before 0.11 no doc id is logged: each row is named by the rule's
    position, and the identity level holds it to that row."""
    output, claims = adoption.output, adoption.output.claims
    split = len(adoption.split_rows.by_idx)
    expected = row_rule(split, claims.max_samples)
    if output.flat:
        level.expect("details", f"rows ({rule_words(claims.max_samples)})", len(expected), len(output.samples))
        for row, idx in zip(output.samples, expected):
            row.doc_id = idx
        level.notes.append("lighteval before 0.11 logs no doc id: each row is named by its position under "
                           f"{rule_words(claims.max_samples)}, and the identity level holds it to that row")
    else:
        logged = [row.doc_id for row in output.samples]
        if len(logged) != len(expected):
            level.fail(f"details: {len(logged)} rows, where {rule_words(claims.max_samples)} gives {len(expected)}")
        for position, (want, got) in enumerate(zip(expected, logged)):
            if want != got:
                level.fail(f"doc_id {got}: at row {position} of the details, where {rule_words(claims.max_samples)} "
                           f"puts row idx {want}", row=got)
    if not level.problems:
        adoption.row_set = RowSet(len(output.samples), split, f"{rule_words(claims.max_samples)} (max_samples "
                                  f"{claims.max_samples})")
        level.notes.append(adoption.row_set.words())


def check_claims(adoption) -> LevelResult:
    level, claims, settings = LevelResult("claims"), adoption.output.claims, adoption.settings
    task = claims.task
    level.expect("results", f"{task}: the shots", settings["num_fewshot"], claims.shots)
    level.expect("results", f"config_tasks {task}: evaluation_splits", [adoption.spec.eval_split], claims.splits)
    level.expect("results", f"config_tasks {task}: metrics", ["acc"], claims.metrics)
    level.expect("details", "few-shot samples of every row", [settings["num_fewshot"]],
                 sorted({row.fewshots for row in adoption.output.samples}))
    _rows_checked(adoption, level)
    if not level.problems:
        adoption.dtype, words = dtype_claimed((claims.dtype,), (claims.said.get("device"),))
        adoption.bound = bound_for(adoption.bound_given, adoption.dtype, False, words)
    adoption.claims = {"model_name": claims.said.get("model_name"), "model_dtype": claims.dtype,
                       "device": claims.said.get("device"), "batch_size": claims.said.get("batch_size"),
                       "lighteval_task": task, "lighteval_details": schema_words(adoption.output.flat)}
    level.notes.append(f"the details' schema: {schema_words(adoption.output.flat)} (lighteval logs no release of "
                       "its own)")
    level.notes.append(f"claimed, not checkable here: model {claims.said.get('model_name')!r}, dtype {claims.dtype!r}, "
                       f"device {claims.said.get('device')!r}, batch size {claims.said.get('batch_size')!r}; the "
                       "prompt function is lighteval code: its output is held row by row to your profile's YAML")
    return level


def identity_for(flat: bool):
    """The (expected, logged) fields of one row: the digests lighteval's details give, against the pinned row's."""
    def identity_of(sample, expected) -> tuple:
        if len(set(expected.contexts)) > 1:
            raise InputError(f"row idx {expected.idx}: a multiple-input task (each choice in its own context) is not "
                             "one lighteval query: a lighteval run of it is not held to this profile.")
        inputs = ([tokens_hash([list(context) + list(continuation[:-1])]) for context, continuation in
                   zip(expected.contexts_tokens, expected.candidate_token_ids)] if flat
                  else [tokens_hash([expected.context_tokens])])
        continuations = [tokens_hash([ids]) for ids in expected.candidate_token_ids]
        inputs_words = ("input_tokens (tokens_hash: each choice's context and continuation but its last token, "
                        "padding removed)" if flat else "input_tokens (tokens_hash of the context)")
        want = {"query (sha256 of the scored context)": sha256_text(expected.context),
                "choices (sha256 of each continuation)": [sha256_text(c) for c in expected.candidates],
                "gold_index": [expected.label], inputs_words: inputs,
                "continuation tokens (tokens_hash of each logged)": continuations[:len(sample.continuations_sha256)]}
        got = {"query (sha256 of the scored context)": sample.query_sha256,
               "choices (sha256 of each continuation)": sample.choices_sha256, "gold_index": sample.gold,
               inputs_words: sample.inputs_sha256,
               "continuation tokens (tokens_hash of each logged)": sample.continuations_sha256}
        return want, got
    return identity_of


def check_arithmetic(adoption) -> LevelResult:
    """Each row's acc from its logged log-likelihoods (numpy's argmax: the first maximum, in gold_index), and the
    task's acc and acc_stderr from those, in the file's order, as lighteval aggregates them."""
    level, output = LevelResult("arithmetic"), adoption.output
    values = []
    for sample in output.samples:
        best = max(range(len(sample.scores)), key=sample.scores.__getitem__)
        values.append(1.0 if best in sample.gold else 0.0)
        level.expect(f"doc_id {sample.doc_id}", "metric acc (the logged log-likelihoods' argmax in gold_index)",
                     values[-1], sample.metrics.get("acc"))
    if level.problems:
        return level
    acc, stderr = mean_and_stderr(values)
    adoption.rederived.update({"acc": acc, "acc_stderr": stderr})
    level.expect("results", f"results.{output.task}.acc", acc, output.claims.reported["acc"])
    level.expect("results", f"results.{output.task}.acc_stderr", stderr, output.claims.reported["acc_stderr"])
    return level


class LightevalChoiceAdoption(ChoiceAdoption):
    """A lighteval run of a multiple_choice profile: the claims, identity and arithmetic levels are lighteval's, the
    rescore is the tool's (rounded as lighteval 0.11+ logs); kept as adopted.json beside lighteval's results file and
    the details' digests (formats/lighteval_details.py::public_copy), which `audit` reads back."""
    writer = "lighteval"

    def __init__(self, flat: bool):
        self.flat = flat
        self.rescored_as = "rescored bit for bit" if flat else "rescored, equal at the 10 digits lighteval logs"

    def claims_level(self):
        return check_claims

    def tokenizes(self, adoption) -> bool:
        return True  # lighteval logs each request's tokens: the identity level holds them to the reviewer's

    def record_checks(self) -> tuple:
        return (lambda adoption, tokenizer: adopt.check_identity(adoption, tokenizer, identity_for(self.flat)),
                check_arithmetic)

    def as_logged(self, scores: list) -> list:
        return list(scores) if self.flat else [as_logged(score) for score in scores]

    def reviewer_pairs(self, adoption) -> tuple:
        summary = adopt_rescore.rescored_summary(adoption.questions.values(), adoption.spec.metrics, 0)
        return "yours", [("acc", adoption.output.claims.reported["acc"], summary.get("acc"), summary.get("rows", 0))]

    def record(self, adoption, common: dict):
        source = {**common["source"], "writer": self.writer}  # which public copy the folder holds
        return adopt_rescore.choice_record(adoption, {**common, "source": source},
                                           reported=dict(adoption.output.claims.reported))

    def public_copy(self, adoption) -> dict[str, bytes]:
        return lighteval_details.public_copy(adoption.output)

    def exported_source(self, adoption, pairs: list) -> tuple[str, str, str, dict]:
        """lighteval logs no release ("?" from a wheel) and no wall-clock time but its files' names."""
        reported = adoption.output.claims.reported
        numbers = {"acc": {"metric": "acc", "filter": "none", "reported": reported["acc"],
                           "stderr": reported["acc_stderr"], "rescored": pairs[0][2]}}
        return "lighteval", "unknown", made_at(adoption.output.results_path.stem), numbers

    def exported_rows(self, adoption) -> list:
        """Each details row with its text (read with the details for the export): the predicted choice is the
        logged log-likelihoods' argmax (acc's), the reference the gold choice."""
        rows = []
        for sample, (query, choices) in zip(adoption.output.samples, adoption.output.texts or []):
            best = max(range(len(sample.scores)), key=sample.scores.__getitem__)
            stripped = [choice.strip() for choice in choices]
            rows.append(ExportedRow(sample.doc_id, query, stripped[sample.gold[0]], stripped, stripped[best],
                                    stripped[best], "none", {"acc": sample.metrics["acc"]},
                                    {"query_sha256": sample.query_sha256}, adopt_export.row_audit(adoption,
                                                                                                sample.doc_id)))
        return rows


def made_at(stem: str) -> str:
    """A results file's time as a Unix time string, from its name (results_2026-12-06T18-30-18.356252), read as UTC:
    lighteval names it by the machine's local time, with no zone (logging/evaluation_tracker.py); "" where the name
    holds no time."""
    try:
        stamp = datetime.strptime(stem.removeprefix("results_"), "%Y-%m-%dT%H-%M-%S.%f")
    except ValueError:
        return ""
    return str(stamp.replace(tzinfo=timezone.utc).timestamp())


def refuse_unsupported(spec, settings) -> None:
    """What a lighteval run of this profile cannot be held to yet, refused before any file is read (exit 2)."""
    if spec.shape.decodes or tuple(spec.metrics) != ("acc",) or spec.draws_random:
        raise InputError(f"profile task {spec.name}: a lighteval run is adopted against a multiple_choice profile "
                         f"whose one metric is acc and whose docs are drawn by no seed (this one: metrics "
                         f"{list(spec.metrics)}{', generates' if spec.shape.decodes else ''}"
                         f"{', draws at random' if spec.draws_random else ''}).")
    if settings["num_fewshot"]:
        raise InputError(f"profile task {spec.name}: {settings['num_fewshot']} shots; a lighteval run is adopted at "
                         "zero shots for now (its few-shot sampler is not re-derived yet).")
