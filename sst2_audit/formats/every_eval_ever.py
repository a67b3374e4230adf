"""An adopted task as Every Eval Ever records (issue 62): the `every-eval-ever` package's aggregate record
(eval.schema.json) and its instance-level JSON Lines (instance_level_eval.schema.json), schema 0.3.0, laid out as
its datastore lays them (data/<evaluation>/<developer>/<model>/<uuid>.json and <uuid>_samples.jsonl), written from
lm-eval's own files at adoption. Every instance and every metric carries the audit's verdict, the row's class and
the reviewer's rescored number, so the verdict travels with the records into the shared database.

The instance fields follow the package's own lm-eval converter (sample_hash: the sha256 of the JSON of the prompt
and the reference; evaluation_result_id: the metric, or `metric:filter`); the uuid is derived from the adopted
record's sha256: the file names say which adopted record they were exported with."""

import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.util import atomic

SCHEMA_VERSION = "0.3.0"


@dataclass
class ExportedRow:
    """One logged sample, as the export needs it (lm-eval's own file: the text is there)."""
    doc_id: int
    prompt: str  # the first request's context (arg_0), as lm-eval logged it
    reference: str  # lm-eval's target
    choices: list[str] | None  # a multiple_choice task's continuations, stripped as the package's converter does
    output: str  # the predicted choice's text, or the generation
    extracted: str  # the answer the metric read: the predicted choice, or the filter's answer
    filter: str
    scores: dict[str, float]  # lm-eval's per-sample value of each metric (by lm-eval's name)
    hashes: dict[str, str]  # doc_hash, prompt_hash, target_hash
    audit: dict[str, str]  # the row's class, logged and rescored scores: what the reviewer found of it


@dataclass
class ExportedTask:
    task: str
    model_id: str  # HF form ORG/NAME (the lock's hub repo), or local/<profile>
    library_version: str  # the run's lm_eval_version, or "unknown" (0.4.8 and earlier log none)
    evaluated_at: str  # lm-eval's results `date` (Unix time), as logged
    dataset: dict  # an EEE source_data object (the lock's data source)
    results: dict[str, dict]  # evaluation_result_id -> {metric, filter, reported, stderr, rescored}
    rows: list[ExportedRow]
    verdict: dict[str, str]  # verdict, exit_code, line, adopted_sha256, tool: the audit's, as strings
    library: str = "lm_eval"  # the run's writer (eval_library.name): lm_eval or lighteval


def _uuid(seed: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(seed.encode()).digest()[:16], version=4))


def result_key_id(metric: str, filter_name: str) -> str:
    """The package's evaluation_result_id of an lm-eval metric under a filter (its lm-eval converter's rule)."""
    return metric if not filter_name or filter_name == "none" else f"{metric}:{filter_name}"


def _instances(task: ExportedTask, evaluation_id: str) -> list:
    lines = []
    for row in task.rows:
        sample_hash = hashlib.sha256(json.dumps({"raw": row.prompt, "reference": row.reference},
                                                sort_keys=True).encode()).hexdigest()
        metadata: dict[str, str] = {**row.hashes, "filter": row.filter,
                                    **{f"sst2_audit_{k}": v for k, v in row.audit.items()},
                                    **{f"sst2_audit_{k}": v for k, v in task.verdict.items()}}
        for metric, score in row.scores.items():
            lines.append({
                "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "model_id": task.model_id,
                "evaluation_name": task.task if row.filter == "none" else f"{task.task}/{row.filter}",
                "evaluation_result_id": result_key_id(metric, row.filter), "sample_id": str(row.doc_id),
                "sample_hash": sample_hash, "interaction_type": "single_turn",
                "input": {"raw": row.prompt, "reference": [row.reference], "choices": row.choices},
                "output": {"raw": [row.output]},
                "answer_attribution": [{"turn_idx": 0, "source": "output.raw", "extracted_value": row.extracted,
                                        "extraction_method": row.filter, "is_terminal": True}],
                "evaluation": {"score": float(score), "is_correct": float(score) == 1.0},
                "metadata": metadata})
    return lines


def _aggregate(task: ExportedTask, evaluation_id: str, retrieved: str, samples_path: str, samples: bytes,
               count: int) -> dict:
    developer, _, name = task.model_id.partition("/")
    return {
        "schema_version": SCHEMA_VERSION, "evaluation_id": evaluation_id, "evaluation_timestamp": task.evaluated_at,
        "retrieved_timestamp": retrieved,
        "source_metadata": {"source_name": "sst2-audit adopt", "source_type": "evaluation_run",
                            "source_organization_name": "sst2-audit reviewer", "evaluator_relationship": "third_party",
                            "additional_details": {f"sst2_audit_{k}": v for k, v in task.verdict.items()}},
        "model_info": {"name": name or task.model_id, "id": task.model_id, "developer": developer,
                       "additional_details": {"deployment_type": "self_deployed", "model_availability": "unknown"}},
        "eval_library": {"name": task.library, "version": task.library_version,
                         "additional_details": {"audited_by": task.verdict.get("tool", "sst2-audit")}},
        "evaluation_results": [{
            "evaluation_result_id": key, "evaluation_name": task.task, "source_data": task.dataset,
            "metric_config": {"metric_id": entry["metric"], "metric_name": entry["metric"], "lower_is_better": False,
                              "metric_unit": "proportion"},
            "score_details": {"score": entry["reported"],
                              "details": {"filter": entry["filter"], "sst2_audit_rescored": str(entry["rescored"]),
                                          **{f"sst2_audit_{k}": v for k, v in task.verdict.items()}},
                              **({"uncertainty": {"standard_error": {"value": entry["stderr"], "method": "analytic"}}}
                                 if isinstance(entry.get("stderr"), float) else {})}}
            for key, entry in task.results.items()],
        "detailed_evaluation_results": {"format": "jsonl", "file_path": samples_path, "hash_algorithm": "sha256",
                                        "checksum": hashlib.sha256(samples).hexdigest(), "total_rows": count}}


def write(folder: Path, task: ExportedTask, retrieved: str) -> tuple[Path, Path]:
    """(aggregate record, instance records) under folder/data/..., each written new (nothing is overwritten)."""
    evaluation_id = f"{task.task}/{task.model_id}/{retrieved}"
    name = _uuid(task.verdict.get("adopted_sha256", "") + task.task)
    developer, _, model = task.model_id.partition("/")
    relative = Path("data") / task.task / (developer if model else "local") / (model or developer)
    instances = _instances(task, evaluation_id)
    samples = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in instances).encode()
    samples_path = (relative / f"{name}_samples.jsonl").as_posix()
    record = _aggregate(task, evaluation_id, retrieved, samples_path, samples, len(instances))
    target = Path(folder) / relative
    target.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(target / f"{name}_samples.jsonl", samples)
    atomic.write_json(target / f"{name}.json", record)
    return target / f"{name}.json", target / f"{name}_samples.jsonl"
