"""Identity: which dataset row is this record, really?

Every record, whether lm-eval's logged sample during a run or our own
QuestionRecord during an audit, is compared field by field with what the
dataset row it claims to be implies. This module is the one place that decides.
"""

from dataclasses import dataclass

from .dataset import Row
from .hashing import canonical_json, sha256_text
from .independent import EncodedPair, encode_question
from .protocol import CANDIDATES, context_for, doc_hash, prompt_hash
from .records import Mismatch


@dataclass(frozen=True)
class ExpectedQuestion:
    idx: int
    label: int
    doc_hash: str
    prompt_hash: str
    context: str
    candidates: tuple
    context_tokens: tuple
    candidate_token_ids: tuple
    sentence_first_token: int

    def pairs(self) -> list:
        """The encoded (context, candidate) pairs the independent path scores."""
        return [EncodedPair(self.context_tokens, ids) for ids in self.candidate_token_ids]

    def public_fields(self) -> dict:
        return {
            "idx": self.idx, "label": self.label, "doc_hash": self.doc_hash, "prompt_hash": self.prompt_hash,
            "candidates": list(self.candidates), "context_length": len(self.context_tokens),
            "candidate_token_ids": [list(ids) for ids in self.candidate_token_ids],
        }


def expected_question(row: Row, tokenizer, max_length: int) -> ExpectedQuestion:
    pairs = encode_question(tokenizer, row.sentence, row.idx, max_length)
    sentence_tokens = tokenizer(row.sentence, add_special_tokens=False)["input_ids"]
    context = context_for(row.sentence)
    return ExpectedQuestion(
        row.idx, row.label, doc_hash(row.as_doc()), prompt_hash(context), context, CANDIDATES,
        pairs[0].context_tokens, tuple(p.continuation_tokens for p in pairs), sentence_tokens[0],
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
    is lm-eval's own encoding, so the token boundary checked is the one it scored.
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
        # Text and token ids stay out of records: they are compared through their hashes.
        actual = {
            "doc_id": doc_id, "doc.idx": sample["doc"].get("idx"), "label": sample["doc"].get("label"),
            "target": sample["target"], "doc_hash": sample["doc_hash"], "prompt_hash": sample["prompt_hash"],
            "context_hashes": sorted({prompt_hash(context) for context, _ in arguments}),
            "candidates": [candidate for _, candidate in arguments],
            "context_tokens_hash": sha256_text(canonical_json(list(context_tokens))),
            "context_length": len(context_tokens),
            "candidate_token_ids": [list(continuation) for _, continuation in encoded],
            # No special token may slip in before the sentence (the GGUF tokenizer's BOS hazard).
            "context_starts_with_sentence": bool(context_tokens) and context_tokens[0] == claimed.sentence_first_token,
        }
        expected = {
            "doc_id": claimed.idx, "doc.idx": claimed.idx, "label": claimed.label, "target": claimed.label,
            "doc_hash": claimed.doc_hash, "prompt_hash": claimed.prompt_hash, "context_hashes": [claimed.prompt_hash],
            "candidates": list(claimed.candidates),
            "context_tokens_hash": sha256_text(canonical_json(list(claimed.context_tokens))),
            "context_length": len(claimed.context_tokens),
            "candidate_token_ids": [list(ids) for ids in claimed.candidate_token_ids],
            "context_starts_with_sentence": True,
        }
        found = _mismatch(position, doc_id, expected, actual)
        if found:
            mismatches.append(found)
    logged_ids = [sample["doc_id"] for sample in samples]
    if sorted(logged_ids) != sorted(requested):
        mismatches.append(Mismatch(-1, None, ["doc_id set"], {"doc_id set": sorted(requested)}, {"doc_id set": sorted(logged_ids)}))
    return mismatches


def check_question_records(questions: list, expected_by_idx: dict) -> list:
    """The audit's identity level: our public records against the dataset rows."""
    mismatches = []
    for position, question in enumerate(questions):
        claimed = expected_by_idx.get(question.idx)
        if claimed is None:
            mismatches.append(Mismatch(position, question.idx, ["idx"], {"idx": "a scored dev id"}, {"idx": question.idx}))
            continue
        expected = claimed.public_fields()
        expected["logged_doc_id"] = question.idx
        actual = {key: getattr(question, key) for key in expected}
        found = _mismatch(position, question.idx, expected, actual)
        if found:
            mismatches.append(found)
    return mismatches
