"""Identity: which dataset row is this record, really?

Every record, whether lm-eval's logged sample during a run or our own
QuestionRecord during an audit, is compared field by field with what the
dataset row it claims to be implies under the task spec. This module is the one
place that decides.
"""

from dataclasses import dataclass

from sst2_audit.task.dataset import Row
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_text, tokens_hash
from sst2_audit.scoring.independent import EncodedPair, encode_questions
from sst2_audit.protocol.rules import doc_hash, prompt_hash
from sst2_audit.formats.records import Mismatch
from sst2_audit.protocol.metrics import choice_count_needed, needs_nonempty_choices


@dataclass(frozen=True)
class ExpectedQuestion:
    idx: int
    label: int  # gold choice index
    doc_idx: int | None  # the document's own idx field, where the data has one (= idx)
    target: object  # doc_to_target as lm-eval logs it
    doc_hash: str
    prompt_hash: str  # of `context`, as lm-eval logs it
    candidates: tuple  # target_delimiter + choice (a multiple-input task: the shared continuation each time)
    public_candidates: tuple  # the text when the YAML fixes the choices, else its sha256
    choice_lengths: tuple
    candidate_token_ids: tuple | None  # None: not tokenized (an adoption that rescores nothing, expected_questions)
    shots: tuple  # positions of its shots in the shot split (few-shot), in context order; () at zero shots
    contexts: tuple  # each candidate's context: all the same but for a multiple-input task
    contexts_tokens: tuple | None  # each candidate's context tokens
    true_choices: tuple | None = None  # a value metric's true choices (mc2), None for an argmax task

    @property
    def context(self) -> str:
        """The first request's context: what lm-eval logs as the prompt."""
        return self.contexts[0]

    @property
    def context_tokens(self) -> tuple:
        assert self.contexts_tokens is not None, "tokens of a question that was not tokenized"
        return self.contexts_tokens[0]

    def pairs(self) -> list:
        """The encoded (context, candidate) pairs the independent path scores."""
        assert self.contexts_tokens is not None and self.candidate_token_ids is not None
        return [EncodedPair(tokens, ids) for tokens, ids in zip(self.contexts_tokens, self.candidate_token_ids)]

    def public_fields(self) -> dict:
        ids = self.candidate_token_ids
        return {
            "idx": self.idx, "label": self.label, "doc_hash": self.doc_hash, "prompt_hash": self.prompt_hash,
            "candidates": list(self.public_candidates), "choice_lengths": list(self.choice_lengths),
            "context_length": None if ids is None else len(self.context_tokens),
            "candidate_token_counts": None if ids is None else [len(i) for i in ids],
            "candidate_tokens_sha256": None if ids is None else tokens_hash(ids),
            "shots": list(self.shots),
            **({"true_choices": list(self.true_choices)} if self.true_choices is not None else {}),
        }


def longest_input(questions) -> int:
    """The most tokens one request scores (context and continuation): what the memory statement needs."""
    return max((len(q.context_tokens) + max(map(len, q.candidate_token_ids), default=0) for q in questions), default=0)


def longest_recorded(questions) -> int:
    """longest_input of questions as a record keeps them (context_length, candidate_token_counts)."""
    return max((q.context_length + max(q.candidate_token_counts, default=0) for q in questions), default=0)


def public_target(target):
    """A logged target as public records hold it: an index as it is, text by its sha256."""
    return target if not isinstance(target, str) else "sha256:" + sha256_text(target)


def public_candidate(spec, candidate: str) -> str:
    return candidate if spec.fixed_choices is not None else "sha256:" + sha256_text(candidate)


def expected_question(row: Row, spec, tokenizer, max_length: int, bos: bool = False,
                      shots=None) -> ExpectedQuestion:
    """shots: a fewshot.Plan when the profile pins num_fewshot > 0, a chat.ChatPlan when it sets chat settings, else
    None (zero-shot, plain). lm-eval logs the first request's context as the prompt (its prompt_hash): for a
    multiple-input task, with the first choice."""
    return next(expected_questions([row], spec, tokenizer, max_length, bos, shots))


# The questions whose strings go to the tokenizer in one call: at most CHUNK_ROWS, and no more once their requests
# hold CHUNK_CHARS characters (the tokenizer's encodings of a call are alive at once, about 100 bytes a token: 256
# leaderboard-shaped questions, ten 3 KB requests each, were 0.25 GB of them).
CHUNK_ROWS = 256
CHUNK_CHARS = 1 << 20


def expected_questions(rows: list, spec, tokenizer, max_length: int, bos: bool = False, shots=None):
    """expected_question of each row, in order, a chunk of rows' strings encoded in one tokenizer call; tokenizer
    None: the strings and hashes only, no tokens (what an adoption that rescores nothing needs: lm-eval logs no
    tokens, and tokenizing was most of a model-free adoption's time)."""
    part: list = []
    chars = 0
    for number, row in enumerate(rows, start=1):
        found = _requests(row, spec, shots)
        if tokenizer is None:
            yield _expected(row, spec, found, None, shots)
            continue
        part.append((row, found))
        chars += sum(2 * len(context) + len(candidate) for context, candidate in found)
        if len(part) == CHUNK_ROWS or chars >= CHUNK_CHARS or number == len(rows):
            encoded = encode_questions(tokenizer, [(requests, row.idx) for row, requests in part], max_length, bos)
            for (row, requests), pairs in zip(part, encoded):
                yield _expected(row, spec, requests, pairs, shots)
            part, chars = [], 0


def _requests(row: Row, spec, shots) -> list:
    """The row's (context, candidate) requests, its choices checked as lm-eval's metrics need them."""
    requests = (shots.requests(spec, row.idx, row.doc) if shots is not None
                else spec.requests(row.doc, spec.prefix(row.doc)))
    choices = spec.choices(row.doc)
    needed = choice_count_needed(spec.metrics)  # lm-eval's f1 is scikit-learn's binary f1 (class 1)
    if needed and len(choices) != needed[1]:
        raise InputError(f"task {spec.name}: {needed[0]} is defined for {needed[1]} choices (lm-eval's aggregation); "
                         f"row {row.idx} has {len(choices)}.")
    empty = [number for number, choice in enumerate(choices) if not len(choice)]
    if empty and needs_nonempty_choices(spec.metrics):  # lm-eval would divide by zero; the audit checks the same
        raise InputError(f"task {spec.name}: row idx {row.idx}: choice {empty[0]} is empty, and acc_norm divides each "
                         "score by its choice's length in characters; fix the data (other metrics accept empty "
                         "choices).")
    return requests


def _expected(row: Row, spec, requests: list, pairs: list | None, shots) -> ExpectedQuestion:
    choices = spec.choices(row.doc)
    candidates = [candidate for _, candidate in requests]
    true_choices = spec.true_choices(row.doc, len(choices))
    return ExpectedQuestion(
        row.idx, spec.gold(row.doc, choices), row.doc.get("idx"), spec.target(row.doc), doc_hash(row.as_doc()),
        prompt_hash(requests[0][0]), tuple(candidates), tuple(public_candidate(spec, c) for c in candidates),
        tuple(len(choice) for choice in choices),
        None if pairs is None else tuple(p.continuation_tokens for p in pairs),
        tuple(shots.positions[row.idx]) if shots is not None else (),
        tuple(c for c, _ in requests), None if pairs is None else tuple(p.context_tokens for p in pairs),
        tuple(true_choices) if true_choices is not None else None,
    )


def differing_fields(expected: dict, actual: dict) -> list:
    return [key for key in expected if actual.get(key) != expected[key]]


def _mismatch(position, claimed_id, expected: dict, actual: dict):
    fields = differing_fields(expected, actual)
    if not fields:
        return None
    return Mismatch(position, claimed_id, fields, {k: expected[k] for k in fields}, {k: actual.get(k) for k in fields})


def check_logged_samples(samples: list, requested_ids, expected_by_idx: dict, official_encode) -> list:
    """Compare every lm-eval logged sample with the row its doc_id names.

    official_encode(context, continuation) -> (context_tokens, continuation_tokens)
    is lm-eval's own encoding, so the token boundary checked is the one it scored;
    a special token slipped in before the context (the BOS hazard) changes the tokens' hash.
    """
    mismatches = []
    requested = set(requested_ids)
    for position, sample in enumerate(samples):
        doc_id = sample["doc_id"]
        claimed = expected_by_idx.get(doc_id)  # the row this sample says it is
        if doc_id not in requested or claimed is None:
            mismatches.append(Mismatch(position, doc_id, ["doc_id"], {"doc_id": "one of the requested dev ids"},
                                       {"doc_id": doc_id}))
            continue
        arguments = [tuple(argument) for argument in sample["arguments"]]
        encoded = [official_encode(context, candidate) for context, candidate in arguments]
        context_tokens = encoded[0][0] if encoded else ()
        # Text and token ids stay out of records: mismatches name them through hashes.
        actual = {
            "doc_id": doc_id, "doc.idx": sample["doc"].get("idx"),
                  "doc_hash (of the logged doc)": doc_hash(sample["doc"]),
            "target": sample["target"], "doc_hash": sample["doc_hash"], "prompt_hash": sample["prompt_hash"],
            "context_hashes": sorted({prompt_hash(context) for context, _ in arguments}),
            "candidates_sha256": [sha256_text(candidate) for _, candidate in arguments],
            "context_tokens_hash": tokens_hash([context_tokens]),
            "context_length": len(context_tokens),
            "candidate_tokens_sha256": tokens_hash(continuation for _, continuation in encoded),
        }
        expected = {
            "doc_id": claimed.idx, "doc.idx": claimed.doc_idx, "doc_hash (of the logged doc)": claimed.doc_hash,
            "target": claimed.target, "doc_hash": claimed.doc_hash, "prompt_hash": claimed.prompt_hash,
            "context_hashes": sorted({prompt_hash(context) for context in claimed.contexts}),
            "candidates_sha256": [sha256_text(candidate) for candidate in claimed.candidates],
            "context_tokens_hash": tokens_hash([claimed.context_tokens]),
            "context_length": len(claimed.context_tokens),
            "candidate_tokens_sha256": tokens_hash(claimed.candidate_token_ids),
        }
        found = _mismatch(position, doc_id, expected, actual)
        if found:
            mismatches.append(found)
    logged_ids = [sample["doc_id"] for sample in samples]
    if sorted(logged_ids) != sorted(requested):
        mismatches.append(Mismatch(-1, None, ["doc_id set"], {"doc_id set": sorted(requested)},
                                   {"doc_id set": sorted(logged_ids)}))
    return mismatches


def check_question_records(questions: list, expected_by_idx: dict) -> list:
    """The audit's identity level: our public records against the dataset rows."""
    mismatches = []
    for position, question in enumerate(questions):
        claimed = expected_by_idx.get(question.idx)
        if claimed is None:
            mismatches.append(Mismatch(position, question.idx, ["idx"], {"idx": "a scored dev id"},
                                       {"idx": question.idx}))
            continue
        expected = claimed.public_fields()
        expected["logged_doc_id"] = question.idx
        actual = {key: getattr(question, key) for key in expected}
        found = _mismatch(position, question.idx, expected, actual)
        if found:
            mismatches.append(found)
    return mismatches
