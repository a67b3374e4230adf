"""Level 1, arithmetic: from the public records alone.

Recomputes every argmax (ties to the first candidate), the agreement of the two
paths, accuracy, its standard error and the counts, and compares them with what
lm-eval logged and reported and with what our summary said. Settings and every
other field a person reads are checked by the claims level (claims.py).
"""

from sst2_audit.pages.card import largest_value_difference
from sst2_audit.scoring.identity import public_candidate
from sst2_audit.protocol.metrics import METRICS, needs_nonempty_choices, predictions, result_key, VALUE_TOLERANCE
from sst2_audit.protocol.numeric import here_flags, numpy_exp
from sst2_audit.scoring.summaries import label_counts, lm_eval_aggregate, path_summaries
from sst2_audit.formats.records import PATHS, SCHEMA_VALUES_IN_LM_EVAL_ORDER
from sst2_audit.task.chat import ChatSettings, target_delimiter
from sst2_audit.task.split import rows_of
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.loading import RunFolder


def _questions(result: LevelResult, record) -> list:
    split = record.split
    expected_ids = rows_of(record.mode, split.dev_ids, [c.idx for c in split.confirm])  # the record's own ids
    result.expect("split", "scored_ids", expected_ids, split.scored_ids)
    seen: dict = {}
    for position, question in enumerate(record.questions):
        if question.idx in seen:
            result.fail(f"row idx {question.idx}: duplicated (questions[{seen[question.idx]}] and "
                        f"questions[{position}])")
        seen.setdefault(question.idx, position)
    for idx in split.scored_ids:
        if idx not in seen:
            result.fail(f"row idx {idx}: scored id has no question record (row dropped)")
    for idx in seen:
        if idx not in split.scored_ids:
            result.fail(f"row idx {idx}: question record for an id that was not scored")
    result.expect("questions", "order (idx)", list(split.scored_ids), [q.idx for q in record.questions])
    return record.questions


def _per_question(result: LevelResult, spec, question, exact: bool, delimiter: str) -> bool:
    """False when the question's shape is broken (its summaries cannot be recomputed). delimiter: the target
    delimiter the run scored with (none under a chat template: task/chat.py)."""
    where = f"row idx {question.idx}"
    count = len(question.candidates)
    nonempty = needs_nonempty_choices(spec.metrics)  # one rule with the run: lengths > 0 only where divided by
    if spec.fixed_choices is not None:
        result.expect(where, "candidates (the task's)", [public_candidate(spec, delimiter + c)
                                                        for c in spec.fixed_choices], question.candidates)
        result.expect(where, "choice_lengths (the task's)", [len(c) for c in spec.fixed_choices],
                      question.choice_lengths)
    result.expect(where, "logged_doc_id", question.idx, question.logged_doc_id)
    shaped = all([
        result.expect(where, "label (a choice index)", True, type(question.label) is int
                      and 0 <= question.label < count),
        result.expect(where, "choice_lengths (count" + (", all > 0)" if nonempty else ")"),
                      (count, True), (len(question.choice_lengths), not nonempty or
                                      all(n > 0 for n in question.choice_lengths))),
        *(result.expect(where, f"scores.{path} (count)", count, len(question.scores[path])) for path in PATHS),
    ])
    if not shaped:
        return False
    for path in PATHS:
        for metric, predicted in predictions(spec.metrics, question.scores[path], question).items():
            result.expect(where, f"predictions.{path}.{metric}", predicted, question.predictions[path][metric])
    for number, (official, independent) in enumerate(zip(*(question.scores[path] for path in PATHS))):
        name = repr(question.candidates[number]) if spec.fixed_choices is not None else str(number)  # never data text
        result.expect(where, f"candidate {name} score: independent == official", official, independent)
    if question.true_choices is not None:
        result.expect(where, "true_choices (distinct choice indices)", True,
                      all(type(i) is int and 0 <= i < count for i in question.true_choices)
                      and len(set(question.true_choices)) == len(question.true_choices))
    for metric in spec.metrics:  # our own value of each metric (mc2 re-derived) against lm-eval's logged one
        entry = METRICS[metric]
        try:
            ours = entry.value(question.scores["official"], question)
        except (ValueError, IndexError) as error:
            result.fail(f"{where}: logged.{metric}: cannot be re-derived from the scores ({error})")
            return False
        if not entry.per_question_value:
            result.expect(where, f"logged.{metric}", ours, question.logged[metric])
        elif not entry.agrees(ours, question.logged[metric], exact):
            result.fail(f"{where}: logged.{metric}: re-derived from the scores {ours!r}, lm-eval logged "
                        f"{question.logged[metric]!r} ({_accepted(exact)})")
        else:
            result.checks += 1
    return True


def _against_lm_eval(result: LevelResult, run: RunFolder, spec, record) -> None:
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
        result.expect(where, "scores.official", [r[0][0] for r in sample.resps], question.scores["official"])
        if type(sample.target) is int:  # text (winogrande's continuation) is checked against the row by identity
            result.expect(where, "label (target)", sample.target, question.label)
        for metric in spec.metrics:
            result.expect(where, metric, sample.metrics.get(METRICS[metric].reported_as), question.logged[metric])
        result.expect(where, "prompt_hash", sample.prompt_hash, question.prompt_hash)
        result.expect(where, "doc_hash", sample.doc_hash, question.doc_hash)
    reported = run.lm_eval_results.get("results", {}).get(spec.name, {})
    for metric in spec.metrics:  # run.json names lm-eval's numbers by our metric (mc2 is lm-eval's `acc`)
        reported_as = METRICS[metric].reported_as
        for key, name in ((metric, reported_as), (f"{metric}_stderr", f"{reported_as}_stderr")):
            result.expect("lm-eval results", result_key(name), reported.get(result_key(name)),
                          record.lm_eval_reported.get(key))
    result.expect("lm-eval reported", "keys", sorted(k for m in spec.metrics for k in (m, f"{m}_stderr")),
                  sorted(record.lm_eval_reported))
    config = run.lm_eval_results.get("configs", {}).get(spec.name, {})
    result.expect("lm-eval config", "num_fewshot", record.settings.get("num_fewshot"), config.get("num_fewshot"))
    result.expect("lm-eval config", "n-shot", record.settings.get("num_fewshot"),
                  run.lm_eval_results.get("n-shot", {}).get(spec.name))
    result.expect("lm-eval config", "random_seed", record.settings.get("seed"),
                  run.lm_eval_results.get("config", {}).get("random_seed"))


def _summaries(result: LevelResult, spec, record, exact: bool) -> None:
    primary = spec.metrics[0]  # lm-eval's first metric_list entry: the headline number
    for path in PATHS:
        for metric, recomputed in path_summaries(spec, record.questions, path, record.settings).items():
            claimed = record.summaries[path][metric]
            label = f"summary {path}" if metric == primary else f"summary {path} {metric}"
            for name in ("value", "stderr", "correct", "rows", "predictions"):
                ours, theirs = getattr(recomputed, name), getattr(claimed, name)
                if not exact and METRICS[metric].per_question_value and name in ("value", "stderr") \
                        and type(theirs) is float and METRICS[metric].agrees(ours, theirs, exact):
                    ours = theirs  # equal to rounding where the machines' exps differ
                result.expect(label, name, ours, theirs)
            if path == "official":
                _reported(result, metric, recomputed, record, exact)
    result.expect("summary", "labels", label_counts(spec, record.questions), record.labels)
    diffs = [abs(a - b) for q in record.questions for a, b in zip(*(q.scores[path] for path in PATHS))]
    result.expect("summary", "max_abs_diff", max(diffs, default=0.0), record.max_abs_diff)
    result.expect("summary", "identity_checks_passed", len(record.questions), record.identity_checks_passed)


def _reported(result: LevelResult, metric: str, ours, record, exact: bool) -> None:
    """lm-eval's reported mean and stderr: re-derived from its own logged values in its own order (bit for bit),
    and equal to our summary bit for bit (a value metric from a machine whose numpy exp differs: to rounding)."""
    mean, stderr = lm_eval_aggregate(metric, record.questions, record.settings)
    claimed = record.lm_eval_reported.get(metric), record.lm_eval_reported.get(f"{metric}_stderr")
    result.expect("lm-eval reported (from its logged values)", metric, mean, claimed[0])
    result.expect("lm-eval reported (from its logged values)", f"{metric}_stderr", stderr, claimed[1])
    for name, value, other in ((metric, ours.value, claimed[0]), (f"{metric}_stderr", ours.stderr, claimed[1])):
        if not METRICS[metric].per_question_value or exact:
            result.expect("lm-eval reported", name, value, other)
        elif not (type(other) is float and METRICS[metric].agrees(value, other, exact)):
            result.fail(f"lm-eval reported: {name}: our re-derivation {value!r}, lm-eval {other!r} "
                        f"({_accepted(exact)})")


def check(run: RunFolder, context) -> LevelResult:
    result = LevelResult("arithmetic")
    record = run.record
    if record is None:
        failure = run.failure
        result.fail(f"the run stopped on its own {failure.check} check: {failure.message}" if failure is not None
                    else "the run folder holds neither a record nor a failure record")
        return result
    if not record.questions:
        result.fail("run.json holds no question records")
        return result
    spec = run.task_spec()
    if spec is None:
        result.fail(f"profile {record.profile!r} is not in the audit's lock, so its task is unknown")
        return result
    if not result.expect("run", "metrics (the task's)", list(spec.metrics), record.metrics):
        return result  # every per-question map is keyed by the record's metrics
    here, there = numpy_exp(here_flags()), numpy_exp(record.platform.get("isa_flags") if record.platform else None)
    # bit for bit where both machines run the same exp and the record re-derives in lm-eval's order (schema 5
    # on; older records summed exactly, in another order); the claimed flags only ever widen it to rounding
    exact = here == there and (run.record_schema or 0) >= SCHEMA_VALUES_IN_LM_EVAL_ORDER
    delimiter = target_delimiter(spec, ChatSettings.of(record.settings))
    shaped = [_per_question(result, spec, question, exact, delimiter) for question in _questions(result, record)]
    _against_lm_eval(result, run, spec, record)
    if all(shaped):
        _summaries(result, spec, record, exact)
        for metric in (m for m in spec.metrics if METRICS[m].per_question_value):
            result.notes.append(f"{metric}: re-derived from the scores by sst2-audit's own code in lm-eval's order "
                                "(lm-eval ran the task's process_results); largest difference from lm-eval's "
                                f"logged values {largest_value_difference(record, metric)!r} ({_accepted(exact)}; "
                                f"this machine runs {here}, the record claims {there})")
    return result


def _accepted(exact: bool) -> str:
    return "required bit for bit: both machines run the same exp" if exact else \
        f"accepted up to {VALUE_TOLERANCE}: numpy's exp differs between the machines"
