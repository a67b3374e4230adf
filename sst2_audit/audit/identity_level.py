"""Level 2, identity: the cache's data and tokenizer, no model.

Rebuilds every prompt from the template, recomputes prompt and doc hashes,
re-tokenizes every context/candidate boundary, re-derives the dev and
confirmation ids from the lock's split rule, and checks that no confirmation id
appears anywhere in the records (a confirmation run: that it scored exactly the confirmation ids).
"""


from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.scoring.identity import check_question_records, expected_question, public_target
from sst2_audit.task.split import CONFIRM_MODE, row_hash
from sst2_audit.task.rows import verified_rows
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.loading import RunFolder


def _resources(result: LevelResult, run: RunFolder, spec, profile, context):
    """The reviewer's cache re-hashed (once per audit: context.inputs), and the run's resources equal to it: the
    split rows, or None. A record that failed an earlier level gets its splits hashed here, never the model."""
    try:
        if context.inputs is None:
            data = verified_rows(run.lock, profile, spec, context.cache, roles=spec.splits)
        elif context.inputs.data is None:
            raise context.inputs.error
        else:
            data = context.inputs.data
            if context.inputs.unhashed:
                result.notes.append(f"not hashed: the model's weights ({', '.join(context.inputs.unhashed)}); no "
                                    "level of this audit loads them")
        result.checks += 1
    except CheckFailed as error:
        result.fail(str(error))
        return None
    recorded = {entry.path: [entry.sha256, entry.locked_sha256] for entry in run.record.resources}
    for entry in data.manifest.files:
        if entry.role != "download":
            result.expect(f"resource {entry.path}", "sha256 and the lock's pin (run record vs this cache)",
                          [entry.sha256, entry.locked_sha256], recorded.get(entry.path))
    return data


def _split(result: LevelResult, run: RunFolder, data) -> None:
    """Dev and confirmation ids re-derived from the reviewer's lock; no confirmation id anywhere."""
    record, split, by_idx = run.record, data.split, data.by_idx
    result.expect("split", "dev_ids (re-derived from the lock's rule)", list(split.dev_ids), record.split.dev_ids)
    try:
        confirm = [(i, row_hash(by_idx[i].as_doc(), record.split.row_hash_rule)) for i in split.confirm_ids]
    except InputError as error:
        result.fail(str(error))
        confirm = []
    result.expect("split", "confirmation ids and row hashes", confirm,
                  [(c.idx, c.row_hash) for c in record.split.confirm])
    if record.mode == CONFIRM_MODE:  # a confirmation run scores the sealed rows and no dev row (claims: its chain)
        result.expect("split", "scored_ids (the confirmation ids re-derived from the lock's rule)",
                      list(split.confirm_ids), record.split.scored_ids)
        return
    sealed = set(split.confirm_ids)
    places = {
        "split.scored_ids": record.split.scored_ids,
        "questions": [q.idx for q in record.questions],
        "questions.logged_doc_id": [q.logged_doc_id for q in record.questions],
        "lm-eval samples": [s.doc_id for s in run.lm_eval_samples or []],
    }
    for place, ids in places.items():
        for idx in ids:
            result.checks += 1
            if idx in sealed:
                result.fail(f"row idx {idx}: a confirmation id appears in {place}; the confirmation set is sealed")


def _questions(result: LevelResult, run: RunFolder, spec, inputs) -> None:
    """Every question's prompt, hashes and token boundary rebuilt from the row and the cached tokenizer."""
    if inputs.error is not None:  # the shots re-derived from the reviewer's lock and data were refused
        raise inputs.error
    record, data, tokenizer, shots = run.record, inputs.data, inputs.tokenizer, inputs.shots
    sealed = set(data.split.confirm_ids)  # a confirmation run's rows are the sealed ones; any other run's never
    settings = run.lock.settings_for(record.profile, spec)
    expected = {idx: expected_question(data.by_idx[idx], spec, tokenizer, settings["max_length"],
                                       settings["add_bos_token"], shots)
                for idx in record.split.scored_ids if idx in data.by_idx
                and (idx in sealed) == (record.mode == CONFIRM_MODE)
                and (shots is None or idx in shots.positions)}  # an id the reviewer does not score: named below
    mismatches = check_question_records(record.questions, expected)
    for sample in run.lm_eval_samples or []:  # a text target (multiple input): its hash, from the row
        if isinstance(sample.target, str) and sample.doc_id in expected:
            row_target = expected[sample.doc_id].target
            if sample.target.startswith("sha256:"):
                result.expect(f"row idx {sample.doc_id}", "lm-eval sample target (sha256 of the row's)",
                              public_target(row_target), sample.target)
            else:  # a run written before targets were hashed published the text itself: still the row's
                result.expect(f"row idx {sample.doc_id}", "lm-eval sample target (the row's)", row_target,
                              sample.target)
    fields_per_question = len(next(iter(expected.values())).public_fields()) + 1 if expected else 1
    result.checks += len(record.questions) * fields_per_question - sum(len(m.fields) for m in mismatches)
    for mismatch in mismatches:
        for name in mismatch.fields:
            result.fail(f"row idx {mismatch.claimed_id}: {name}: expected {mismatch.expected[name]!r}, "
                        f"got {mismatch.logged[name]!r}")


def check(run: RunFolder, context) -> LevelResult:
    result = LevelResult("identity")
    record = run.record
    if record is None:
        result.skipped = "the run has no run record"
        return result
    spec = run.task_spec()
    if spec is None:
        result.skipped = f"profile {record.profile!r} is not in the audit's lock"
        return result
    data = _resources(result, run, spec, run.lock.profile(record.profile), context)
    if data is None:
        return result
    _split(result, run, data)
    if context.records_failed:  # a hostile record costs no tokenizer load, no transformers import, no model hashing
        result.notes.append("prompts and token boundaries not rebuilt: an earlier level did not pass (the tokenizer "
                            "is loaded only for a record that passed them)")
        return result
    _questions(result, run, spec, context.inputs)
    return result
