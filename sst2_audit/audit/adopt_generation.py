"""Adopting a plain lm-eval run of a generate_until task: its lines checked against the reviewer's lock and cache,
and every generation re-decoded by the independent greedy decoder (scoring/decode.py).

Levels (after the claims level adopt.py shares with multiple_choice): identity (each doc_id's row, its prompt with
its shots, its target, the request's generation_kwargs, one line per filter agreeing on the rest), arithmetic
(each filter re-run on the logged generation, exact_match re-derived against the row's reference, lm-eval's mean
and stderr per filter against the results file), rescore (each row not sealed re-decoded: the same text token for
token, or where and by what margin it leaves the logged one; the filters and exact_match again on our text).
An adopted folder's public copy holds no text: there, the filters are re-run on the re-decoded generation only.
"""

from sst2_audit.audit.adopt_scores import FLIP_ALPHA, TIE_BUDGET, tie_spend
from sst2_audit.audit.adopt_shape import UNTOKENIZED
from sst2_audit.audit.findings import LevelResult, shown
from sst2_audit.formats.adopted_generation import DIFFERS, DRIFT, GeneratedRow, SAME
from sst2_audit.protocol.generation import EXACT_MATCH
from sst2_audit.protocol.metrics import result_key
from sst2_audit.protocol.rules import accuracy, accuracy_stderr, doc_hash, prompt_hash
from sst2_audit.protocol.stats import mcnemar_exact
from sst2_audit.scoring.decode import context_tokens, GreedyDecoder, stop_rule
from sst2_audit.task.rows import shot_plan
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_text
from sst2_audit.util.progress import Ticker


def _lines_by_row(adoption, level: LevelResult) -> dict:
    """doc_id -> {filter: sample}: every row logged once per filter of the task, nothing else."""
    filters = adoption.spec.generation.filter_names
    rows: dict = {}
    for sample in adoption.output.samples:
        where = f"doc_id {sample.doc_id}"
        if sample.doc_id not in adoption.split_rows.by_idx:
            level.fail(f"{where}: not a row of the {adoption.spec.eval_split} split "
                       f"({len(adoption.split_rows.by_idx)} rows)")
        elif sample.filter not in filters:
            level.fail(f"{where}: filter {shown(sample.filter)} is not one of the task's {filters}")
        elif sample.filter in rows.setdefault(sample.doc_id, {}):
            level.fail(f"{where}: logged twice for filter {sample.filter}")
        else:
            rows[sample.doc_id][sample.filter] = sample
    for idx, lines in rows.items():
        if sorted(lines) != sorted(filters):
            level.fail(f"doc_id {idx}: logged for filters {sorted(lines)}, the task has {sorted(filters)}")
        for sample in lines.values():  # what lm-eval logs once per request, the same on every filter's line
            level.expect(f"doc_id {idx}", f"{sample.filter}: the generation (sha256)",
                         next(iter(lines.values())).response_sha256, sample.response_sha256)
    return rows


def check_identity(adoption, tokenizer) -> LevelResult:
    level, spec, settings = LevelResult("identity"), adoption.spec, adoption.settings
    rows = _lines_by_row(adoption, level)
    if level.problems:
        return level
    shots = shot_plan(adoption.lock, adoption.profile, spec, adoption.cache, adoption.split_rows.manifest,
                      adoption.split_rows, sorted(rows))
    kwargs = spec.generation.generation_kwargs
    for idx, lines in sorted(rows.items()):
        doc = adoption.split_rows.by_idx[idx].doc
        context = (shots.requests(spec, idx, doc) if shots is not None else spec.requests(doc, spec.prefix(doc)))[0][0]
        want = {"doc_hash": doc_hash(adoption.split_rows.by_idx[idx].as_doc()), "prompt_hash": prompt_hash(context),
                "target_hash": sha256_text(str(spec.target(doc)))}
        for sample in lines.values():
            where = f"doc_id {idx} ({sample.filter})"
            for name, value in want.items():
                level.expect(where, name, value, getattr(sample, name))
            if sample.logged is not None:  # lm-eval's own file: the digests of its text
                level.expect(where, "doc_hash (of the logged doc)", want["doc_hash"], sample.logged.doc_hash)
                level.expect(where, "context (sha256)", sha256_text(context), sample.logged.contexts[0])
                level.expect(where, "generation_kwargs", kwargs, sample.generation_kwargs)
                level.expect(where, "target (sha256)", want["target_hash"], sample.logged.target)
        tokens = context_tokens(tokenizer, context, settings["add_bos_token"]) if tokenizer is not None else None
        if tokens is not None and len(tokens) + spec.generation.max_gen_toks > settings["max_length"]:
            raise InputError(f"row idx {idx}: the context is {len(tokens)} tokens, and with max_gen_toks "
                             f"{spec.generation.max_gen_toks} it exceeds max_length {settings['max_length']}: lm-eval "
                             "would cut the context from the left; the protocol never truncates.")
        first = next(iter(lines.values()))
        adoption.questions[idx] = GeneratedRow(
            idx, want["doc_hash"], want["prompt_hash"], want["target_hash"], None if tokens is None else len(tokens),
            list(shots.positions[idx]) if shots is not None else [], first.response_sha256,
            {f: s.filtered_sha256 for f, s in sorted(lines.items())},
            {f: s.exact_match for f, s in sorted(lines.items())}, "not drawn")
        if tokens is not None:
            adoption.contexts[idx] = tokens  # the rescore's input; not a record field
        adoption.references[idx] = spec.reference(doc)
        adoption.lines[idx] = lines
    if tokenizer is None:  # lm-eval logs no tokens: only a re-decode reads them (AdoptShape.tokenizes)
        level.notes.append(UNTOKENIZED)
    return level


def answers(rule, response: str, reference: str) -> dict:
    """{filter: (its answer, exact_match)} of one generation."""
    found = {}
    for pipeline in rule.pipelines:
        answer = pipeline.apply(response)
        found[pipeline.name] = (answer, rule.exact_match.score(answer, reference))
    return found


def check_arithmetic(adoption) -> LevelResult:
    level, rule, spec = LevelResult("arithmetic"), adoption.spec.generation, adoption.spec
    for idx, lines in sorted(adoption.lines.items()):
        response = next(iter(lines.values())).response
        if response is None:  # our public copy: no text; the rescore re-derives the answers from its own decode
            continue
        for name, (answer, score) in answers(rule, response, adoption.references[idx]).items():
            sample = lines[name]
            level.expect(f"doc_id {idx}", f"{name}: the filtered answer (sha256)", sha256_text(answer),
                         sample.filtered_sha256)
            level.expect(f"doc_id {idx}", f"{name}: exact_match", score, sample.exact_match)
    if level.problems:
        return level
    reported = adoption.output.results["results"][spec.name]
    for name in rule.filter_names:  # lm-eval aggregates in doc_id order: mean, and mean_stderr
        values = [adoption.lines[idx][name].exact_match for idx in sorted(adoption.lines)]
        number, stderr = accuracy(values), accuracy_stderr(values)
        key, stderr_key = result_key(EXACT_MATCH, name), result_key(EXACT_MATCH, name, stderr=True)
        adoption.rederived.update({key: number, stderr_key: stderr})
        level.expect("results", key, number, reported[key])
        level.expect("results", stderr_key, stderr, reported[stderr_key])
    return level


def near_rule(bound):
    """near(gap, logit): a logged token whose logit is within the bound of the maximum's is a near tie. The bound
    is in logits: bound.relative of the maximum's magnitude plus bound.absolute (the generation bound of the
    claimed dtype, audit/adopt_scores.py::bound_for with decodes=True, or --bound)."""
    return lambda gap, logit: gap <= bound.relative * abs(logit) + bound.absolute


def rescore_rows(adoption, model, tokenizer, chosen: list) -> dict:
    """{idx: Generation} of the chosen rows this process decodes: following the logged text where the file has it
    (lm-eval's own); where it has only its hash (our public copy), greedy but for the near ties adopted.json records
    (each taken at its rank, and only within the bound: a claim, held to the logged hash in judge_row)."""
    import json
    from pathlib import Path

    where = Path(adoption.cache) / "model" / "generation_config.json"
    config = json.loads(where.read_text(encoding="utf-8")) if where.is_file() else {}
    rule = stop_rule(tokenizer, adoption.spec.generation.generation_kwargs, config)
    decoder, near = GreedyDecoder(model, tokenizer, adoption.settings["max_length"]), near_rule(adoption.bound)
    found, ticker = {}, Ticker("rescore", len(chosen))
    for number, idx in enumerate(chosen, start=1):
        ticker.tick(number - 1)
        logged = next(iter(adoption.lines[idx].values())).response
        forced = {tie["step"]: tie["rank"] for tie in adoption.recorded_ties.get(idx, ())} if logged is None else None
        followed = decoder.decode(adoption.contexts[idx], rule, logged, near, forced)
        # a row that took a tie is decoded greedily too: the reviewer's own answer, beside the one the tie gave
        off = followed.ties or followed.left_at is not None or (logged is not None and followed.text != logged)
        found[idx] = (followed, decoder.decode(adoption.contexts[idx], rule) if off else None)
    return found


def judge_row(adoption, idx: int, decoded: tuple, level: LevelResult) -> None:
    """One re-decoded row into its record and the level: the same text, near ties taken the logged way (within the
    tie budget), a logged text no decode within the bound gives, or (our public copy) a hash that differs from the
    greedy decode's. A row that took a tie gets the reviewer's own greedy answer beside it."""
    (generation, greedy), row, rule = decoded, adoption.questions[idx], adoption.spec.generation
    tokens = ",".join(map(str, generation.tokens))
    row.rescored_response_sha256 = sha256_text(generation.text)
    row.generated_tokens_sha256, row.generated_tokens = sha256_text(tokens), len(generation.tokens)
    row.stopped = generation.stopped
    row.closest_step, row.closest_margin = generation.closest
    row.ties, row.left_at = [dict(t) for t in generation.ties], generation.left_at
    found = answers(rule, generation.text, adoption.references[idx])
    row.rescored_exact_match = {name: score for name, (_, score) in found.items()}
    mine = answers(rule, greedy.text, adoption.references[idx]) if greedy is not None else found
    row.greedy_response_sha256 = sha256_text(greedy.text if greedy is not None else generation.text)
    row.greedy_exact_match = {name: score for name, (_, score) in mine.items()}
    if generation.left_at is None and row.rescored_response_sha256 == row.response_sha256:
        row.row_class = DRIFT if generation.ties else SAME
        for name, (answer, score) in found.items():
            level.expect(f"doc_id {idx}", f"{name}: the filtered answer (sha256)", sha256_text(answer),
                         row.filtered_sha256[name])
            level.expect(f"doc_id {idx}", f"{name}: exact_match", score, row.logged_exact_match[name])
        if generation.ties:
            how = "as adopted.json records them" if adoption.output.public else "the logged generation's way"
            gaps = sum(t["gap"] for t in generation.ties)
            level.notes.append(f"near tie: row idx {idx}: taken {how} at "
                               + ", ".join(f"step {t['step']} (rank {t['rank']}, gap {t['gap']:.4g} of logit "
                                           f"{t['logit']:.4g})" for t in generation.ties)
                               + f" (summed gap {gaps:.4g}); your greedy answer: "
                               + ", ".join(f"{name} exact_match {score:g}" for name, score in
                                           row.greedy_exact_match.items()) + ": consistent with rounding")
            spent = tie_spend(generation.ties, adoption.bound)
            if spent > TIE_BUDGET:
                level.fail(f"row idx {idx}: the logged generation takes {len(generation.ties)} near ties (summed gap "
                           f"{gaps:.4g} logits) that spend {spent:.3g} of the tie budget {TIE_BUDGET:g} (each tie's "
                           "gap over its bound, summed; honest bfloat16 rows measured at most 0.49): a generation "
                           "steered through ties, not one rounding gives")
    elif adoption.output.public:  # the recorded ties do not give the logged hash here: said as not re-verified
        # (adopt_rescore.check_generation_rescore names these rows)
        row.row_class = DRIFT
    else:
        row.row_class = DIFFERS
        left = generation.left_at or {"step": len(generation.tokens), "logit": float("nan")}
        level.fail(f"row idx {idx}: the logged generation is not one the model decodes here: at step {left['step']} "
                   f"no token within the bound {adoption.bound.per_score} of the maximum logit {left['logit']:.4g} "
                   "keeps to it")


def answer_changes(rows, filters) -> dict:
    """Per filter: rows whose logged exact_match the reviewer's greedy decode does not give, by direction, and the
    exact sign test on them (stats.mcnemar_exact): a forger's steering runs toward the reference."""
    found, rows = {}, [row for row in rows if row.greedy_exact_match is not None]
    for name in filters:
        logged, greedy = ({r.idx: getattr(r, side).get(name, 0.0) for r in rows}
                          for side in ("logged_exact_match", "greedy_exact_match"))
        toward = sorted(idx for idx in logged if logged[idx] > greedy[idx])
        away = sorted(idx for idx in logged if logged[idx] < greedy[idx])
        p = mcnemar_exact(len(toward), len(away))  # the sign test: exact two-sided binomial at 1/2
        found[name] = {"toward the reference": toward, "away from it": away, "p": p, "one_way": p < FLIP_ALPHA}
    return found


def exact_match_summary(rows, filters, per_row: str) -> dict:
    """{"exact_match,<filter>": mean, ..., "rows": n} of the rows holding `per_row` (rescored_exact_match: the decode
    that followed the logged text; greedy_exact_match: the reviewer's own greedy decode)."""
    rows = [row for row in rows if getattr(row, per_row) is not None]
    # .get: a hostile adopted.json may leave a filter out of a row; its row-by-row comparison names that (exit 1)
    summary = {result_key(EXACT_MATCH, name): accuracy([getattr(row, per_row).get(name, 0.0) for row in rows])
               for name in filters} if rows else {}
    return {**summary, "rows": len(rows)}
