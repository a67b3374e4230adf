"""Level 1, arithmetic: from the public records alone.

Recomputes every argmax (ties to the first candidate), the agreement of the two
paths, accuracy, its standard error and the counts, and compares them with what
lm-eval logged and reported and with what our summary said. Settings and every
other field a person reads are checked by the claims level (claims.py).
"""

from ..dataset import LABEL_NAMES
from ..protocol import CANDIDATES, TASK_NAME, predict
from ..metrics import summarize
from ..split import SMOKE_ROWS
from .findings import LevelResult
from .loading import RunFolder


def _questions(result: LevelResult, record) -> list:
    split = record.split
    expected_ids = split.dev_ids[:SMOKE_ROWS] if record.mode == "smoke" else split.dev_ids
    result.expect("split", "scored_ids", expected_ids, split.scored_ids)
    seen = {}
    for position, question in enumerate(record.questions):
        if question.idx in seen:
            result.fail(f"row idx {question.idx}: duplicated (questions[{seen[question.idx]}] and questions[{position}])")
        seen.setdefault(question.idx, position)
    for idx in split.scored_ids:
        if idx not in seen:
            result.fail(f"row idx {idx}: scored id has no question record (row dropped)")
    for idx in seen:
        if idx not in split.scored_ids:
            result.fail(f"row idx {idx}: question record for an id that was not scored")
    result.expect("questions", "order (idx)", list(split.scored_ids), [q.idx for q in record.questions])
    return record.questions


def _per_question(result: LevelResult, question) -> None:
    where = f"row idx {question.idx}"
    result.expect(where, "candidates", list(CANDIDATES), question.candidates)
    result.expect(where, "logged_doc_id", question.idx, question.logged_doc_id)
    for path in ("official", "independent"):
        scores = getattr(question, f"{path}_scores")
        if not result.expect(where, f"{path}_scores (count)", len(CANDIDATES), len(scores)):
            continue
        result.expect(where, f"{path}_prediction", predict(scores), getattr(question, f"{path}_prediction"))
    for number, (official, independent) in enumerate(zip(question.official_scores, question.independent_scores)):
        result.expect(where, f"candidate {CANDIDATES[number]!r} score: independent == official", official, independent)
    result.expect(where, "official_logged_acc", float(predict(question.official_scores) == question.label),
                  question.official_logged_acc)


def _against_lm_eval(result: LevelResult, run: RunFolder, record) -> None:
    if run.lm_eval_samples is None or run.lm_eval_results is None:
        result.fail("lm-eval's public output is missing (lm_eval_results.json / lm_eval_samples.public.jsonl)")
        return
    by_id = {}
    for sample in run.lm_eval_samples:
        if sample.doc_id in by_id:
            result.fail(f"lm-eval sample doc_id {sample.doc_id}: logged twice")
        by_id[sample.doc_id] = sample
    result.expect("lm-eval samples", "doc_id set", sorted(record.split.scored_ids), sorted(by_id))
    for question in record.questions:
        sample = by_id.get(question.idx)
        if sample is None:
            continue
        where = f"row idx {question.idx} vs lm-eval sample"
        result.expect(where, "official_scores", [r[0][0] for r in sample.resps], question.official_scores)
        result.expect(where, "label (target)", sample.target, question.label)
        result.expect(where, "acc", sample.acc, question.official_logged_acc)
        result.expect(where, "prompt_hash", sample.prompt_hash, question.prompt_hash)
        result.expect(where, "doc_hash", sample.doc_hash, question.doc_hash)
    reported = run.lm_eval_results.get("results", {}).get(TASK_NAME, {})
    result.expect("lm-eval results", "acc,none", reported.get("acc,none"), record.lm_eval_reported.get("acc"))
    result.expect("lm-eval results", "acc_stderr,none", reported.get("acc_stderr,none"),
                  record.lm_eval_reported.get("acc_stderr"))
    config = run.lm_eval_results.get("configs", {}).get(TASK_NAME, {})
    result.expect("lm-eval config", "num_fewshot", record.settings.get("num_fewshot"), config.get("num_fewshot"))
    result.expect("lm-eval config", "n-shot", record.settings.get("num_fewshot"),
                  run.lm_eval_results.get("n-shot", {}).get(TASK_NAME))
    result.expect("lm-eval config", "random_seed", record.settings.get("seed"),
                  run.lm_eval_results.get("config", {}).get("random_seed"))


def _summaries(result: LevelResult, record) -> None:
    labels = [q.label for q in record.questions]
    for path in ("official", "independent"):
        predictions = [predict(getattr(q, f"{path}_scores")) for q in record.questions]
        recomputed = summarize(predictions, labels)
        claimed = getattr(record, path)
        for name in ("accuracy", "stderr", "correct", "rows", "predictions"):
            result.expect(f"summary {path}", name, getattr(recomputed, name), getattr(claimed, name))
        if path == "official":
            result.expect("lm-eval reported", "acc", recomputed.accuracy, record.lm_eval_reported.get("acc"))
            result.expect("lm-eval reported", "acc_stderr", recomputed.stderr, record.lm_eval_reported.get("acc_stderr"))
    result.expect("summary", "labels", {name: labels.count(i) for i, name in enumerate(LABEL_NAMES)}, record.labels)
    diffs = [abs(a - b) for q in record.questions for a, b in zip(q.official_scores, q.independent_scores)]
    result.expect("summary", "max_abs_diff", max(diffs, default=0.0), record.max_abs_diff)
    result.expect("summary", "identity_checks_passed", len(record.questions), record.identity_checks_passed)


def check(run: RunFolder) -> LevelResult:
    result = LevelResult("arithmetic")
    record = run.record
    if record is None:
        result.fail(f"the run stopped on its own {run.failure.check} check: {run.failure.message}")
        return result
    for question in _questions(result, record):
        _per_question(result, question)
    _against_lm_eval(result, run, record)
    _summaries(result, record)
    return result
