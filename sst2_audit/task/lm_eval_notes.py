"""Fields of lm-eval's own results that a reviewer misreads for a `samples=` run, and the truth.

The public copy of lm-eval's results keeps lm-eval's fields as they are; run.json states next to
them what the true values are (the run writes these notes, the audit re-derives and compares them,
the card and report.html show them).
"""

def notes_for(lm_eval_results: dict, record) -> list:
    """The notes a run record must hold (the audit re-derives them)."""
    return notes(lm_eval_results, record.task, record.resources, len(record.questions), record.evaluator["commit"])


def notes(lm_eval_results: dict, task: str, resources: list, rows: int, commit: str) -> list:
    """[{field, lm_eval_says, truth, why}] from lm-eval's results and the run's checked facts."""
    model_pins = sorted(f"{entry.path} {entry.sha256[:12]}" for entry in resources
                        if entry.role == "model" and entry.path.endswith(".safetensors"))
    found = []
    effective = (lm_eval_results.get("n-samples") or {}).get(task, {}).get("effective")
    if effective is not None and effective != rows:
        found.append({"field": f"n-samples.{task}.effective", "lm_eval_says": effective,
                      "truth": rows,
                      "why": "lm-eval counts every document of the evaluated split; with samples= it scores only "
                             "the ids it is given (the scored ids are in run.json)"})
    revision = (lm_eval_results.get("config") or {}).get("model_revision")
    if revision is not None:
        found.append({"field": "config.model_revision", "lm_eval_says": revision,
                      "truth": "; ".join(model_pins) or "see run.json resources",
                      "why": "lm-eval reports its default revision for a model object it was handed; the weights "
                             "are the cached files run.json's resources pin by sha256"})
    git_hash = lm_eval_results.get("git_hash")
    if git_hash is not None:
        found.append({"field": "git_hash", "lm_eval_says": git_hash, "truth": commit,
                      "why": "lm-eval records the git commit of the folder it was started from (this audit tool's "
                             "own repository); the evaluator is lm-eval at the pinned commit"})
    return found
