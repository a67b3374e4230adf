"""An adoption as Every Eval Ever records (`adopt --export-eee DIR`, issue 62): the rows from lm-eval's own files
(their text is there, never in our public copy), each with the reviewer's class and scores, and the task's numbers,
reported and rescored, with the verdict (formats/every_eval_ever.py writes them)."""

import json
from importlib import metadata

from sst2_audit.audit.verdict import head_of
from sst2_audit.formats.every_eval_ever import ExportedRow, ExportedTask, result_key_id
from sst2_audit.protocol.metrics import METRICS, result_key
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_bytes


def choice_rows(adoption) -> list:
    """A multiple_choice task's rows: the prediction is the logged scores' argmax (acc's), as the package's own
    lm-eval converter reads it."""
    rows = []
    for sample in adoption.output.samples:
        choices = [continuation.strip() for _, continuation in sample.arguments or []]
        best = max(range(len(sample.scores)), key=sample.scores.__getitem__)
        audit = row_audit(adoption, sample.doc_id)
        predicted = choices[best] if best < len(choices) else str(best)  # the output and the answer read from it
        rows.append(ExportedRow(sample.doc_id, (sample.arguments or [("", "")])[0][0], sample.target or "", choices,
                                predicted, predicted, sample.filter,
                                {name: value for name, value in sample.metrics.items() if isinstance(value, float)},
                                _hashes(sample), audit))
    return rows


def row_audit(adoption, doc_id: int) -> dict:
    """What the reviewer found of a row: its class, logged and rescored scores (none for a row not adopted)."""
    question = adoption.questions.get(doc_id)
    return {} if question is None else {"row_class": question.row_class, "logged": json.dumps(question.logged),
                                        "rescored": json.dumps(question.rescored)}


def generated_rows(adoption) -> list:
    """A generate_until task's lines, one per document and filter: the generation and the filter's answer."""
    return [ExportedRow(sample.doc_id, (sample.arguments or [("", {})])[0][0], sample.target or "", None,
                        sample.response or "", sample.filtered or "", sample.filter,
                        {"exact_match": sample.exact_match}, _hashes(sample), {})
            for sample in adoption.output.samples]


def _hashes(sample) -> dict:
    return {"doc_hash": sample.doc_hash, "prompt_hash": sample.prompt_hash, "target_hash": sample.target_hash}


def exported(adoption, outcome) -> ExportedTask:
    """The task's records, built before anything is printed or written (a failure here is never after a verdict);
    the adopted record's sha256 is added once it is written (with_record). Refused for our public copy."""
    if adoption.output.public:
        raise InputError("--export-eee: an adopted folder's public copy holds no text; export at adoption, from "
                         "lm-eval's own files.")
    whose, pairs = adoption.shape.reviewer_pairs(adoption)
    library, version, evaluated_at, numbers = adoption.shape.exported_source(adoption, pairs)
    model = adoption.profile.model
    model_id = model.get("repo_id") if model.source == "hub" else f"local/{adoption.profile.name}"
    verdict = {"verdict": head_of(outcome.verdict()), "exit_code": str(outcome.exit_code), "line": outcome.verdict(),
               "reviewer_numbers": whose, "lock_sha256": adoption.lock.sha256,
               "tool": f"sst2-audit {metadata.version('sst2-audit')}"}
    return ExportedTask(adoption.spec.name, str(model_id), version, evaluated_at, _dataset(adoption), numbers,
                        adoption.shape.exported_rows(adoption), verdict, library)


def lm_eval_source(adoption, pairs: list) -> tuple[str, str, str, dict]:
    """(library, its version, when the run was made, {evaluation_result_id: numbers}) of an lm-eval run: every
    "metric,filter" number the results report, with the reviewer's beside it (pairs: reviewer_pairs')."""
    results, task = adoption.output.results, adoption.spec.name
    reported = results["results"].get(task, {})
    # a multiple_choice pair names our metric (acc, mc2), a generate_until pair lm-eval's "exact_match,<filter>"
    rescored = {name if "," in name else result_key(METRICS[name].reported_as): ours for name, _, ours, _ in pairs}
    numbers = {}
    for key, value in reported.items():
        metric, _, filter_name = key.partition(",")
        if filter_name and not metric.endswith("_stderr") and isinstance(value, (int, float)) \
                and not isinstance(value, bool):
            numbers[result_key_id(metric, filter_name)] = {
                "metric": metric, "filter": filter_name, "reported": float(value),
                "stderr": reported.get(result_key(metric, filter_name, True)), "rescored": rescored.get(key)}
    return "lm_eval", str(results.get("lm_eval_version") or "unknown"), str(results.get("date", "")), numbers


def with_record(task: ExportedTask, adopted_bytes: bytes) -> ExportedTask:
    """The export once the adopted record is written: its sha256 on every record (and in the files' names)."""
    task.verdict = {**task.verdict, "adopted_sha256": sha256_bytes(adopted_bytes)}
    return task


def _dataset(adoption) -> dict:
    data, split = adoption.profile.data, adoption.spec.eval_split
    if data.source == "hub":
        repo = str(data.get("repo_id"))
        return {"dataset_name": repo, "source_type": "hf_dataset", "hf_repo": repo, "hf_split": split,
                "additional_details": {"revision": str(data.get("revision"))}}
    files = ";".join(f"{f.path}:{f.sha256}" for f in data.files)
    return {"dataset_name": f"{adoption.profile.name} ({split} split)", "source_type": "other",
            "additional_details": {"source": data.source, "files_sha256": files}}
