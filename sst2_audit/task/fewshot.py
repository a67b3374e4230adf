"""Few-shot contexts as lm-eval 0.4.9.2 builds them, re-derived without importing lm_eval.

Used by run (the independent path's contexts), the identity level and the rescore when a profile
pins `num_fewshot` above 0. What lm-eval does:
- The shots come from `fewshot_split`, else `fewshot_config.samples` (a literal list in the YAML: BBH), else the
  training split, else the validation split, else the test split, the evaluated one (ConfigurableTask.fewshot_docs,
  Task.fewshot_docs: inverse_scaling).
- ONE `random.Random(fewshot_random_seed)` per task object is shared by every document and consumed
  in the order the requests are built (ContextSampler.sample: `rnd.sample(docs, n)`), so a question's
  shots depend on which questions were built before it.
- The `default` sampler draws `num_fewshot + 1` docs only when `fewshot_split == test_split` (compared
  as they are: two unset names are equal, so sst2 draws 6 docs for 5 shots), else `num_fewshot`; it
  then drops every drawn doc equal (dict `!=`) to the evaluated one and keeps the first `num_fewshot`.
  A task that evaluates its validation split and takes shots from it therefore
  gets `num_fewshot - 1` shots whenever the evaluated doc is drawn. `first_n` takes `docs[:n]`.
- A shot is doc_to_text + target_delimiter + the target (a choice's text for multiple_choice) +
  fewshot_delimiter; the context is description + the shots + doc_to_text (fewshot_context, get_context).
`random.sample` picks by position, so drawing from `range(len(docs))` picks the same positions as
drawing from the docs themselves.
"""

import random
from dataclasses import dataclass, field

from sst2_audit.protocol.corpus import BOOTSTRAP_ITERS
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.rules import PROTOCOL_SETTINGS
from sst2_audit.task.support import fewshot_reason
from sst2_audit.util.errors import InputError

FEWSHOT_DELIMITER = "\n\n"  # TaskConfig's default
CHAT_SETTINGS = {"apply_chat_template": False, "system_instruction": None, "fewshot_as_multiturn": False}  # lm-eval's
LITERAL = "fewshot_config.samples"  # the shots are the YAML's own list of documents (BBH), not a split's rows


def shot_docs(spec, rows_of) -> list:
    """The documents the shots are drawn from, in order: the YAML's literal samples, or the rows of the shot split
    (rows_of(split) -> its rows, processed as lm-eval's docs)."""
    split = rule_for(spec).split
    if split == LITERAL:  # pinned with the YAML: no split is read
        return [dict(doc) for doc in spec.official["fewshot_config"]["samples"]]
    return [row.as_doc() for row in rows_of(split)]


@dataclass(frozen=True)
class ShotRule:
    split: str  # the split the shots come from
    sampler: str  # "default" or "first_n"
    extra_draw: bool  # lm-eval draws one more when fewshot_split == test_split
    delimiter: str  # fewshot_delimiter, after every shot


def rule_for(spec) -> ShotRule:
    """The task's few-shot rule from its official config; what this re-derivation does not cover is refused."""

    config = spec.official
    reason = fewshot_reason(config)
    if reason:
        raise InputError(f"task {spec.name}: it {reason}.")
    sampler = (config.get("fewshot_config") or {}).get("sampler", "default")
    # fewshot_docs: the fewshot split, else fewshot_config's literal samples, else training, else validation, else
    # (with a warning) the test split (SOURCE_MAP step 48)
    literal = config.get("fewshot_split") is None and "samples" in (config.get("fewshot_config") or {})
    split = LITERAL if literal else (config.get("fewshot_split") or config.get("training_split")
                                     or config.get("validation_split") or config.get("test_split"))
    if split is None:
        raise InputError(f"task {spec.name}: no split to take shots from.")
    # lm-eval compares the two names as they are: None == None, so a task naming neither (sst2: shots
    # from train, validation evaluated) also draws one extra doc, and consumes the generator for it
    return ShotRule(split, sampler, config.get("fewshot_split") == config.get("test_split"),
                    config.get("fewshot_delimiter", FEWSHOT_DELIMITER))


def draws(rule: ShotRule, num_fewshot: int, seed: int, shot_docs: list, evaluated: list,
          resamples: bool = False, wasted_draw: bool = False) -> dict:
    """{idx: positions of its shots in shot_docs} for `evaluated` [(idx, doc)] in the order lm-eval builds
    their requests, with one generator for them all, as lm-eval shares one per task. `resamples`: the sampler
    of lm-eval 0.4.13 (formats/releases.py::Release.fewshot_resamples), else 0.4.9.2's. `wasted_draw`: 0.4.9.2's
    get_chat_context under a chat template with the shots in one user turn draws once, throws the draw away and
    calls get_context, which draws again (SOURCE_MAP step 89): every question consumes the generator twice."""
    generator = random.Random(seed)
    shots: dict = {}
    count = num_fewshot + 1 if rule.extra_draw else num_fewshot
    for idx, doc in evaluated:
        if num_fewshot == 0:  # fewshot_context does not call the sampler: nothing is drawn
            shots[idx] = []
            continue
        if wasted_draw and rule.sampler != "first_n":  # first_n takes docs[:n] without the generator
            generator.sample(range(len(shot_docs)), count)
        if resamples:
            shots[idx] = _draw_0413(rule, num_fewshot, generator, shot_docs, doc)
            continue
        if rule.sampler == "first_n":
            if count > len(shot_docs):
                raise InputError(f"first_n needs {count} shots, the {rule.split} split has {len(shot_docs)}.")
            drawn = list(range(count))
        else:
            drawn = generator.sample(range(len(shot_docs)), count)
        shots[idx] = [position for position in drawn if shot_docs[position] != doc][:num_fewshot]
    return shots


def _draw_0413(rule: ShotRule, n: int, generator, shot_docs: list, doc: dict) -> list:
    """0.4.13's ContextSampler.sample / FirstNSampler.sample (SOURCE_MAP-0.4.13.md steps 51 and 53): the evaluated
    doc is passed (and dropped, dict `!=`) only when fewshot_split == test_split; a draw left short is drawn
    again from the pool without it, on the same generator. Positions sample like the docs (random.sample picks
    by index)."""
    if rule.sampler == "first_n":
        pool = [p for p in range(len(shot_docs)) if not (rule.extra_draw and shot_docs[p] == doc)]
        if n > len(pool):
            raise InputError(f"first_n needs {n} shots, the {rule.split} split has {len(pool)} to give.")
        return pool[:n]
    if not rule.extra_draw:
        return generator.sample(range(len(shot_docs)), n)
    kept = [p for p in generator.sample(range(len(shot_docs)), n + 1) if shot_docs[p] != doc][:n]
    if len(kept) < n:
        kept = generator.sample([p for p in range(len(shot_docs)) if shot_docs[p] != doc], n)
    return kept


def shot_answer(spec, doc: dict) -> str | None:
    """A shot's answer as text (a choice's text for an index, a list's first target), None for an empty target."""
    target = spec.target(doc)
    if target == "":
        return None
    if isinstance(target, list):
        return str(target[0])
    if isinstance(target, str):
        return target
    return str(spec.choices(doc)[target])


def shot_text(spec, doc: dict, delimiter: str) -> str:
    """One labelled example: its text, the target delimiter, its answer as text, the few-shot delimiter."""
    answer, question = shot_answer(spec, doc), spec.shot_question(doc)
    if answer is None:
        return question
    return question + spec.target_delimiter + answer + delimiter


def rule_delimiter(spec) -> str:
    """The few-shot delimiter, which also joins a system instruction to the description (zero shots too)."""
    return spec.official.get("fewshot_delimiter", FEWSHOT_DELIMITER)


def prefix(spec, doc: dict, shots: list, delimiter: str) -> str:
    """description + every shot: what fewshot_context puts before the question (a multiple-input task's
    whole context, each choice then appended by construct_requests)."""
    return spec.prefix(doc) + "".join(shot_text(spec, shot, delimiter) for shot in shots)


def context(spec, doc: dict, shots: list, delimiter: str) -> str:
    """description + every shot + the question's own text (fewshot_context without a chat template)."""
    return prefix(spec, doc, shots, delimiter) + spec.text(doc)


@dataclass(frozen=True)
class Plan:
    """Every scored question's shots: positions in the shot split, drawn as lm-eval draws them."""
    rule: ShotRule
    docs: tuple  # the shot split's documents, in dataset order
    positions: dict  # idx -> positions of its shots
    evaluated: dict  # idx -> the scored document
    # position -> its shot_text: a shot split's few documents recur in every question's context (first_n: the same
    # five), rendered once each (the model-free adoption of a leaderboard run re-derives 11,000 such contexts)
    texts: dict = field(default_factory=dict, compare=False, repr=False)

    def prefix(self, spec, idx: int, doc: dict) -> str:
        texts, delimiter = self.texts.setdefault(spec.name, {}), self.rule.delimiter
        shots = "".join(texts.get(p) or texts.setdefault(p, shot_text(spec, self.docs[p], delimiter))
                        for p in self.positions[idx])
        return spec.prefix(doc) + shots

    def requests(self, spec, idx: int, doc: dict) -> list:
        """The question's requests with its shots (a chat.ChatPlan answers the same)."""
        return spec.requests(doc, self.prefix(spec, idx, doc))

    def own_question(self, spec) -> list:
        """Scored ids shown their own question as a shot: a shot whose requests (its text and choices; a
        multiple-input task's whole sentences) equal the question's, a duplicate row (lm-eval drops only a
        dict-equal doc). Its answer would be in its own prompt."""
        return sorted(idx for idx, positions in self.positions.items() for doc in [self.evaluated[idx]]
                      if any(spec.requests(self.docs[p], "") == spec.requests(doc, "") for p in positions))

    def sealed(self, spec, confirm_ids) -> list:
        """Sealed confirmation rows it would show as shots (only when shots come from the evaluated split)."""
        if self.rule.split != spec.eval_split:
            return []
        return sorted({p for positions in self.positions.values() for p in positions} & set(confirm_ids))


def plan(spec, num_fewshot: int, seed: int, shot_docs: list, scored_rows: list, resamples: bool = False,
         wasted_draw: bool = False) -> Plan:
    """lm-eval builds the requests of the scored documents in dataset order (Task.doc_iterator over
    `samples`), one shared generator for them all: a smoke run's question can get other shots than the
    same question in a full run. shot_docs: the shot split's documents, or the YAML's literal samples."""
    rule = rule_for(spec)
    docs = tuple(shot_docs)
    evaluated = [(row.idx, row.as_doc()) for row in sorted(scored_rows, key=lambda row: row.idx)]
    return Plan(rule, docs, draws(rule, num_fewshot, seed, list(docs), evaluated, resamples, wasted_draw),
                dict(evaluated))


def recorded(spec, num_fewshot: int) -> dict:
    """What run.json's settings say about the shots (written by run, checked by the claims level): the
    split they come from and the sampler; nothing at zero shots, so zero-shot records keep their bytes."""
    if num_fewshot == 0:
        return {}
    rule = rule_for(spec)
    return {"fewshot_split": rule.split, "fewshot_sampler": rule.sampler,
            "shots_from_evaluated_split": rule.split == spec.eval_split}


def shown_as_shots(questions) -> list:
    """Scored ids shown (with their answers) as another question's shot, from the records' shot positions;
    meaningful only when the shots come from the evaluated split (positions are then its ids)."""
    scored = {q.idx for q in questions}
    return sorted({p for q in questions for p in q.shots if p in scored and p != q.idx})


def settings_record(run_settings: dict, spec, sort_ids: bool = True) -> dict:
    """run.json's settings: the lock's run settings, where the shots come from (a few-shot profile), and
    the protocol's fixed choices (run writes, audit checks)."""
    # a corpus metric's stderr is a bootstrap whose resample count lm-eval takes from simple_evaluate: recorded
    corpus = any(METRICS[m].corpus_statistic for m in spec.metrics)
    return dict(run_settings, **recorded(spec, run_settings["num_fewshot"]),
                **({"bootstrap_iters": run_settings.get("bootstrap_iters", BOOTSTRAP_ITERS)} if corpus else {}),
                doc_id_order="sorted" if sort_ids else "hash order (unsorted)", **protocol_settings(run_settings))


def protocol_settings(run_settings: dict) -> dict:
    """The protocol's fixed choices, but for the chat settings a profile sets (task/chat.py): stated in full when
    any is set, so that a plain profile's records keep their bytes."""
    chat = {key: run_settings[key] for key in CHAT_SETTINGS if key in run_settings}
    if not chat:
        return dict(PROTOCOL_SETTINGS)
    return dict(PROTOCOL_SETTINGS, **{key: chat.get(key, default) for key, default in CHAT_SETTINGS.items()})
