"""The record schema, defined once: run.py writes these and audit.py reads them.

Public records (run.json, failure.json) carry ids, hashes, scores and settings,
never text or token ids of the data; private.json carries those.
"""

import dataclasses
import typing
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.manifest import ManifestFile
from sst2_audit.formats.schema import convert
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import canonical_json, sha256_text

# The run record's version (each kind's: KIND_VERSIONS). 7: `processes`; 6: a summary's `value` (was `accuracy`);
# 4: paths and metrics are keys (scores[path], predictions[path][metric], logged[metric], summaries[path][metric]);
# 3: any task (task, metrics, acc_norm, token counts and hashes instead of public token ids); 2: run.json gained
# `platform` (the numeric fingerprint). Older records are read and upgraded.
RECORD_SCHEMA_VERSION = 7
# One envelope (kind, schema_version), a version per kind: a kind's version moves only when its own fields do.
# The kinds shared one number up to 5, so each kind's chain runs through the shared versions from the one it
# was first written at (FIRST_VERSION); from 5 on each kind counts alone.
KIND_VERSIONS = {"sst2-audit/run": RECORD_SCHEMA_VERSION, "sst2-audit/failure": 5, "sst2-audit/private": 5,
                 "sst2-audit/group": 5}
# What schema 5 changed, for the readers that keep older records' pages and rules: the card and page show the
# submitter's machine facts apart, as claims (issue 28); a value metric (mc2) is re-derived in lm-eval's order
# of operations, bit for bit (issue 29); the page's audit hint names the lock and cache it needs, its question
# table puts the closest calls (smallest |margin|) first, scores at fixed precision (issue 31).
SCHEMA_CLAIMS_APART = SCHEMA_VALUES_IN_LM_EVAL_ORDER = SCHEMA_PAGE_5 = 5
PATHS = ("official", "independent")  # the two scorings of every question; the order of every per-path listing
RUN_FILE = "run.json"
FAILURE_FILE = "failure.json"
PRIVATE_FILE = "private.json"
ENVIRONMENT_FILE = "environment.json"
REPORT_FILE = "report.html"
LM_EVAL_RESULTS_FILE = "lm_eval_results.json"
LM_EVAL_SAMPLES_FILE = "lm_eval_samples.public.jsonl"
LM_EVAL_PRIVATE_SAMPLES_FILE = "lm_eval_samples.jsonl"
# an adopted lighteval run's public copy: its results file (paths scrubbed) and its details as digests, one row a line
LIGHTEVAL_RESULTS_FILE = "lighteval_results.json"
LIGHTEVAL_DETAILS_FILE = "lighteval_details.public.jsonl"


class SharedCode(typing.TypedDict):
    """A task code hook both paths ran (hooks.py): shared pinned code, not an independent re-derivation."""
    step: str  # the config field: process_docs, doc_to_text, doc_to_choice, doc_to_target
    file: str  # relative to the folder holding the lm_eval package
    function: str
    sha256: str


class EvaluatorRecord(typing.TypedDict):
    package: str
    version: str
    commit: str
    task: str
    task_yaml: str
    task_yaml_sha256: str
    task_yaml_files: dict[str, str]  # every YAML the task's loader read -> sha256
    files_verified: int
    shared_code: typing.NotRequired[list[SharedCode]]  # only a task with `!function` hooks
    rederived_code: typing.NotRequired[list[SharedCode]]  # a process_results hook lm-eval alone ran (mc2)


class PlatformRecord(typing.TypedDict):
    """numeric.fingerprint()."""

    cpu_vendor: str | None
    cpu_model_name: str | None
    cpu_family: str | None
    cpu_model: str | None
    isa_flags: dict[str, bool]
    torch: str
    torch_cpu_capability: str
    blas: str | None
    onednn: str | None
    threads: int
    mode: dict[str, str | None]
    mode_in_effect: bool
    probe_sha256: str


class LmEvalNote(typing.TypedDict):
    """task/lm_eval_notes.py: a field of lm-eval's results that misleads for a samples= run, and the truth."""

    field: str
    lm_eval_says: typing.Any
    truth: typing.Any
    why: str


@dataclass
class QuestionRecord:
    idx: int  # row position in the evaluated split = lm-eval's doc_id
    label: int  # the gold choice index (doc_to_target)
    logged_doc_id: int
    doc_hash: str
    prompt_hash: str
    context_length: int
    candidates: list[str]  # target_delimiter + choice when the YAML fixes the choices, else "sha256:" of it
    choice_lengths: list[int]  # characters of each choice without the delimiter: acc_norm's divisor
    candidate_token_counts: list[int]
    candidate_tokens_sha256: str  # of the candidates' token ids (canonical JSON); the ids stay private
    shots: list[int]  # positions of its few-shot examples in the shot split, in context order; [] at zero shots
    scores: dict[str, list[float]]  # path -> the candidates' log-likelihoods
    predictions: dict[str, dict[str, int]]  # path -> argmax metric -> the predicted choice index
    # metric -> the per-document value lm-eval logged ([gold, prediction]: f1, mcc)
    logged: dict[str, float | list[int]]
    true_choices: list[int] | None = None  # a value metric's true choices (mc2); written only for such a task


@dataclass
class PathSummary:
    value: float  # the metric's value: accuracy (acc, acc_norm), the per-question mean (mc2), the statistic (f1, mcc)
    stderr: float
    correct: int | None  # None for a value metric (no question is right or wrong)
    rows: int
    predictions: dict[str, int]  # candidate choice -> count


@dataclass
class ConfirmRow:
    idx: int
    row_hash: str


@dataclass
class SplitRecord:
    salt: str
    rule: str
    dev_ids: list[int]  # hash order; the run scored all of them or, with --smoke, the first two
    scored_ids: list[int]
    confirm: list[ConfirmRow]
    row_hash_rule: str = "sha256(canonical_json(doc))"  # split.ROW_HASH_RULE; older records: the legacy one


@dataclass
class RunRecord:
    run_name: str
    mode: str  # "full" or "smoke"
    profile: str
    task: str
    metrics: list[str]  # the task's reported metrics: acc, and acc_norm where the YAML lists it
    demo: bool
    notice: str
    lock_sha256: str
    lock_fully_hashed: bool
    resources: list[ManifestFile]  # the cache's manifest entries the run read
    evaluator: EvaluatorRecord
    settings: dict
    split: SplitRecord
    task_config: dict  # effective config and its differences from the official YAML
    versions: dict[str, str | None]
    timings: dict[str, float]
    peak_rss_bytes: int
    summaries: dict[str, dict[str, PathSummary]]  # path -> metric -> summary
    labels: dict[str, int]
    max_abs_diff: float
    identity_checks_passed: int
    lm_eval_reported: dict[str, float]  # metric and metric_stderr as lm-eval reported them (mc2: its `acc`)
    questions: list[QuestionRecord]
    platform: PlatformRecord | None = None  # None only in records upgraded from schema 1
    lm_eval_notes: list[LmEvalNote] | None = None  # None only in records upgraded from schema 2 or older
    third_party_log: dict[str, int] | None = None  # console.count_known: warnings kept off the console, by name
    processes: int = 1  # the processes a launcher started, which shared both paths' rows (scoring/shards.py)
    schema_version: int = RECORD_SCHEMA_VERSION
    kind: str = "sst2-audit/run"


@dataclass
class GroupMember:
    task: str
    profile: str
    run: str  # its run folder, inside the group's folder
    run_sha256: str  # of its run.json
    rows: int
    official: dict[str, float]  # lm-eval's reported numbers of the subtask (metric, metric_stderr)
    independent: dict[str, float]  # our independent path's


@dataclass
class GroupRecord:
    """group.json: an lm-eval group run as its subtasks (group.py), the group's numbers both ways."""
    run_name: str
    group_name: str  # the lock's key
    group: str  # lm-eval's group name
    demo: bool
    notice: str
    lock_sha256: str
    group_yaml_files: dict[str, str]  # every group YAML read -> sha256 (the lock's pins)
    aggregate: list[dict]  # [{"metric", "weight_by_size"}] from aggregate_metric_list
    leaves_installed: int  # leaf tasks of the group in the installed lm-eval (mmlu: 57)
    rows_per_subtask: int
    members: list[GroupMember]  # in aggregation order
    official: dict[str, float]  # lm-eval's aggregation functions on lm-eval's per-subtask numbers
    independent: dict[str, float]  # our re-derivation on our independent path's per-subtask numbers
    schema_version: int = KIND_VERSIONS["sst2-audit/group"]
    kind: str = "sst2-audit/group"


@dataclass
class Mismatch:
    logged_position: int  # position in the checked list; -1 for a whole-set check
    claimed_id: object  # the doc_id / idx the record claims to be
    fields: list[str]
    expected: dict
    logged: dict


@dataclass
class FailureRecord:
    run_name: str
    check: str
    message: str
    mismatches: list[Mismatch]
    settings: dict = field(default_factory=dict)
    schema_version: int = KIND_VERSIONS["sst2-audit/failure"]
    kind: str = "sst2-audit/failure"


@dataclass
class PrivateQuestion:
    idx: int
    doc: dict
    context: str
    context_tokens: list
    candidate_token_ids: list


@dataclass
class PrivateRecord:
    run_name: str
    questions: list[PrivateQuestion]
    schema_version: int = KIND_VERSIONS["sst2-audit/private"]
    kind: str = "sst2-audit/private"


def to_dict(record) -> dict:
    raw = dataclasses.asdict(record)
    for question in raw.get("questions") or []:  # an argmax task's questions keep schema 4's bytes
        if "true_choices" in question and question["true_choices"] is None:
            del question["true_choices"]
    return raw


def _upgrade_from_1(raw: dict) -> dict:
    """Schema 1 had no numeric platform; everything else is unchanged."""
    upgraded = dict(raw, schema_version=2)
    if raw.get("kind") == "sst2-audit/run":
        upgraded["platform"] = None
    return upgraded


def _upgrade_from_2(raw: dict) -> dict:
    """Schema 2 knew SST-2 only: choices ' negative' / ' positive', acc only, public token ids."""

    upgraded = dict(raw, schema_version=3)
    if raw.get("kind") == "sst2-audit/run":
        evaluator = raw.get("evaluator")
        if isinstance(evaluator, dict):
            evaluator = dict(evaluator, task_yaml_files={evaluator.get("task_yaml"): evaluator.get("task_yaml_sha256")})
            upgraded["task"] = evaluator.get("task")
        upgraded.update(evaluator=evaluator, metrics=["acc"], official_norm=None, independent_norm=None)
        if isinstance(raw.get("split"), dict):
            upgraded["split"] = dict(raw["split"], row_hash_rule="sha256(canonical_json([sentence, label]))")
        questions = []
        for question in listed if isinstance(listed := raw.get("questions"), list) else []:
            if isinstance(question, dict) and isinstance(question.get("candidate_token_ids"), list):
                ids = question.pop("candidate_token_ids")
                question = dict(question, candidate_token_counts=[len(i) if isinstance(i, list) else -1 for i in ids],
                                candidate_tokens_sha256=sha256_text(canonical_json(ids)),
                                choice_lengths=[len(c) - 1 if isinstance(c, str) else -1
                                                for c in question.get("candidates") or []])
            questions.append(question)
        upgraded["questions"] = questions
    if raw.get("kind") == "sst2-audit/private" and isinstance(listed := raw.get("questions"), list):
        upgraded["questions"] = [dict({k: v for k, v in q.items() if k != "sentence"}, doc={"sentence": q.get(
            "sentence")}) if isinstance(q, dict) else q for q in listed]  # not a list: the reader names it
    return upgraded


def _keyed_question(question: dict, metrics: list) -> dict:
    """A schema-3 question: official_/independent_ fields become scores[path], predictions[path][metric]."""
    names = {"acc": "{path}_prediction", "acc_norm": "{path}_norm_prediction"}  # what schema 3 called them
    old = set(f"{path}_scores" for path in PATHS) | {n.format(path=p) for n in names.values() for p in PATHS} | {
        "official_logged_acc", "official_logged_acc_norm"}
    upgraded = {k: v for k, v in question.items() if k not in old}
    upgraded["scores"] = {path: question.get(f"{path}_scores") for path in PATHS}
    upgraded["predictions"] = {path: {m: question.get(names.get(m, "").format(path=path)) for m in metrics}
                               for path in PATHS}
    upgraded["logged"] = {m: question.get(f"official_logged_{m}") for m in metrics}
    upgraded["shots"] = []  # schema 3 scored zero-shot only
    return upgraded


def _upgrade_from_3(raw: dict) -> dict:
    """Schema 3 named paths and metrics in its fields (official_scores, official_norm, ...): now they are keys."""
    upgraded = dict(raw, schema_version=4)
    if raw.get("kind") == "sst2-audit/run":
        metrics = named if isinstance(named := raw.get("metrics"), list) else []
        summaries = {path: {m: raw.get(path if m == "acc" else f"{path}_norm") for m in metrics} for path in PATHS}
        upgraded = {k: v for k, v in upgraded.items() if k not in (*PATHS, *(f"{p}_norm" for p in PATHS))}
        upgraded["summaries"] = summaries
        upgraded["questions"] = [_keyed_question(q, metrics) if isinstance(q, dict) else q
                                 for q in raw.get("questions") or []] if isinstance(raw.get("questions"), list) \
            else raw.get("questions")
    return upgraded


def _upgrade_from_4(raw: dict) -> dict:
    """Schema 5 changed no field: the card and page show the submitter's machine facts apart, as claims."""
    return dict(raw, schema_version=5)


def _upgrade_from_5(raw: dict) -> dict:
    """Run records of schema 5 called each summary's value `accuracy`, also where it held mc2, f1 or mcc."""
    upgraded = dict(raw, schema_version=6)
    summaries = raw.get("summaries")
    if isinstance(summaries, dict):
        upgraded["summaries"] = {
            path: {metric: ({("value" if key == "accuracy" else key): item for key, item in summary.items()}
                            if isinstance(summary, dict) and "value" not in summary else summary)  # else refused
                   for metric, summary in by_metric.items()}
            if isinstance(by_metric, dict) else by_metric for path, by_metric in summaries.items()}
    return upgraded


# schema_version -> function returning the next version's dict; 5 on: the run record's own (6: made in one process)
UPGRADES = {1: _upgrade_from_1, 2: _upgrade_from_2, 3: _upgrade_from_3, 4: _upgrade_from_4,
            5: _upgrade_from_5, 6: lambda raw: dict(raw, schema_version=7, processes=1)}
# The schema version each record kind was first written at: one version number is shared by the kinds, and
# an upgrade chain starts only where a kind existed (a group record "of version 1" never was).
FIRST_VERSION = {"sst2-audit/run": 1, "sst2-audit/failure": 1, "sst2-audit/private": 1, "sst2-audit/group": 4}


def from_dict(kind, raw: dict, where: str):
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object.")
    expected_kind = str(next(f.default for f in dataclasses.fields(kind) if f.name == "kind"))
    version = raw.get("schema_version")
    if type(version) is not int:  # `true` == 1 in Python; a schema version is an integer
        raise InputError(f"{where}: schema_version must be an integer, got {version!r}.")
    if raw.get("kind") == expected_kind and version < FIRST_VERSION[expected_kind]:  # an upgrade only from a
        raise InputError(f"{where}: {expected_kind} records begin at schema_version "  # version that existed
                         f"{FIRST_VERSION[expected_kind]}, got {version}.")
    current = KIND_VERSIONS[expected_kind]
    while version in UPGRADES and version < current and raw.get("kind") == expected_kind:
        raw = UPGRADES[version](raw)
        version = raw.get("schema_version")
    if raw.get("kind") != expected_kind or raw.get("schema_version") != current:
        raise InputError(f"{where}: expected kind {expected_kind!r} schema_version {current}, "
                         f"got {raw.get('kind')!r} {raw.get('schema_version')!r}.")
    record = convert(kind, raw, where)
    if isinstance(record, RunRecord):
        _check_keys(record, where)
    return record


def _check_keys(record: "RunRecord", where: str) -> None:
    """Every per-path and per-metric map holds exactly the two paths and the record's metrics, so that no
    later step meets a missing key."""
    unknown = [m for m in record.metrics if m not in METRICS]
    if unknown or len(set(record.metrics)) != len(record.metrics) or not record.metrics:
        raise InputError(f"{where}.metrics: expected distinct metrics of {sorted(METRICS)}, got {record.metrics!r}.")
    paths, metrics = sorted(PATHS), sorted(record.metrics)

    def need(here, mapping, expected):
        if sorted(mapping) != expected:
            raise InputError(f"{where}.{here}: expected keys {expected}, got {sorted(mapping)}.")

    need("summaries", record.summaries, paths)
    for path in PATHS:
        need(f"summaries.{path}", record.summaries[path], metrics)
    argmax = sorted(m for m in record.metrics if METRICS[m].argmax)
    values = any(METRICS[m].per_question_value for m in record.metrics)  # mc2 needs each question's true choices
    for number, question in enumerate(record.questions):
        here = f"questions[{number}]"
        need(f"{here}.scores", question.scores, paths)
        need(f"{here}.predictions", question.predictions, paths)
        for path in PATHS:
            need(f"{here}.predictions.{path}", question.predictions[path], argmax)
        need(f"{here}.logged", question.logged, metrics)
        if values != (question.true_choices is not None):
            raise InputError(f"{where}.{here}.true_choices: expected {'a list' if values else 'no field'} for "
                             f"metrics {record.metrics}, got {question.true_choices!r}.")


def write(path: Path, record) -> None:
    atomic.write_json(path, to_dict(record))


def read(path: Path, kind):
    return from_dict(kind, strict_json.read(Path(path)), str(path))


