"""The independent scoring path: our own tokenize / forward / sum. No lm_eval import.

The counterpart of lm-eval's Hugging Face backend, written from the protocol:
trailing whitespace of the context moves onto the candidate; context and candidate
are tokenized as one string and split at the context boundary; the model sees
[1, L-1] tokens in float32; the candidate's log-probabilities are summed; nothing
is truncated.
"""

from dataclasses import dataclass

from sst2_audit.util.errors import CheckFailed, InputError


class BoundaryError(CheckFailed):
    """The context's tokens are not a prefix of the whole string's tokens."""

@dataclass(frozen=True)
class EncodedPair:
    context_tokens: tuple
    continuation_tokens: tuple

    @property
    def input_tokens(self) -> tuple:
        """What the model is fed: everything but the last token."""
        return (self.context_tokens + self.continuation_tokens)[:-1]


@dataclass(frozen=True)
class QuestionScores:
    idx: int
    context_tokens: tuple
    candidate_token_ids: tuple  # one tuple of ids per candidate
    candidate_scores: tuple  # summed log-probabilities, one per candidate


def move_trailing_whitespace(context: str, continuation: str) -> tuple:
    """lm-eval's _encode_pair rule: the context's trailing whitespace (str.rstrip's notion) starts
    the continuation instead, so the word boundary is tokenized as in running text."""
    kept = context.rstrip()
    if not kept:
        raise InputError(f"context {context!r} is empty or only whitespace: lm-eval would score the candidate "
                         "after its prefix token; the protocol refuses it.")
    return kept, context[len(kept):] + continuation


def encode_pair(tokenizer, context: str, continuation: str, bos: bool = False) -> EncodedPair:
    """bos: the profile's add_bos_token, as lm-eval passes it on (add_special_tokens=add_bos_token):
    the tokenizer adds its own special tokens; BOS must then open the context, and only then."""
    return _encoded(tokenizer, [move_trailing_whitespace(context, continuation)], bos)[0]


def _ids(tokenizer, moved: list, bos: bool) -> dict:
    """{text: ids} of (context, continuation) pairs whose whitespace was moved: every string in one tokenizer call
    (each text's ids are what a call of its own gives; a fast tokenizer encodes a batch on every core it may use), a
    context its candidates share encoded once."""
    texts = list(dict.fromkeys([context for context, _ in moved] + [context + rest for context, rest in moved]))
    return dict(zip(texts, tokenizer(texts, add_special_tokens=bos)["input_ids"]))


def _encoded(tokenizer, moved: list, bos: bool, ids: dict | None = None) -> list:
    ids = _ids(tokenizer, moved, bos) if ids is None else ids
    return [_split(tokenizer, context, rest, bos, list(ids[context + rest]), list(ids[context]))
            for context, rest in moved]


def _split(tokenizer, context: str, continuation: str, bos: bool, whole: list, context_tokens: list) -> EncodedPair:
    """The whole string's tokens split at the context's (lm-eval's _encode_pair), with the boundary checked."""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos and (bos_id is None or context_tokens[:1] != [bos_id]):
        raise BoundaryError(f"add_bos_token is pinned, but the tokenizer did not open the context with its BOS token "
                            f"({bos_id!r}); the first tokens are {context_tokens[:3]}.")
    written = isinstance(tokenizer.bos_token, str) and context.startswith(tokenizer.bos_token)  # a chat template's
    if not bos and bos_id is not None and context_tokens[:1] == [bos_id] and not written:
        raise BoundaryError(f"add_bos_token is not pinned, but the context opens with the BOS token {bos_id}.")
    if whole[: len(context_tokens)] != context_tokens:
        raise BoundaryError(
            f"context/candidate boundary: the context's {len(context_tokens)} tokens are not a prefix "
            f"of the tokens of context+{continuation!r} (first difference at token "
            f"{next(i for i, (a, b) in enumerate(zip(whole, context_tokens + [None])) if a != b)})."
        )
    if len(whole) == len(context_tokens):
        raise BoundaryError(f"candidate {continuation!r} adds no token after the context.")
    return EncodedPair(tuple(context_tokens), tuple(whole[len(context_tokens):]))


def check_length(pair: EncodedPair, max_length: int, idx: int) -> None:
    if len(pair.input_tokens) > max_length:
        raise InputError(
            f"row idx {idx}: the model input is {len(pair.input_tokens)} tokens, longer than "
            f"max_length {max_length}; the protocol never truncates, so the run stops. Pin a profile whose max_length "
            f"fits (sst2-audit prepare --pin ... --max-length N, N at least {len(pair.input_tokens)} and within the "
            "model's context; the profile setting settings.max_length)."
        )


def encode_question(tokenizer, requests, idx: int, max_length: int, bos: bool = False) -> list:
    """Every (context, continuation) request of a question encoded (task/spec.TaskSpec.requests), none too long."""
    return encode_questions(tokenizer, [(requests, idx)], max_length, bos)[0]


def encode_questions(tokenizer, questions: list, max_length: int, bos: bool = False) -> list:
    """encode_question of many questions ([(requests, idx)]) with every string in one tokenizer call: the same ids,
    and a batch a fast tokenizer spreads over the cores it may use (the model-free adoption of a large run spends
    most of its time here)."""
    moved = [[move_trailing_whitespace(context, candidate) for context, candidate in requests]
             for requests, _ in questions]
    ids = _ids(tokenizer, [pair for pairs in moved for pair in pairs], bos)
    found = []
    for pairs, (_, idx) in zip(moved, questions):
        found.append(_encoded(tokenizer, pairs, bos, ids))
        for pair in found[-1]:
            check_length(pair, max_length, idx)
    return found


class IndependentScorer:
    def __init__(self, model, max_length: int):
        self.model = model
        self.max_length = max_length
        self.forward_calls = 0

    def _log_probs(self, input_tokens: tuple, first: int, end: int):
        """log_softmax of the logits at positions first..end-1 only: lm-eval normalises every position
        (huggingface.py, SOURCE_MAP step 21), but each row's log_softmax depends on that row alone, so the rows
        scored are the same floats (tests/scoring/test_scoring.py holds them equal) for less memory traffic beside
        lm-eval's pass. The forward itself is the whole input, as lm-eval's."""
        import torch

        self.forward_calls += 1
        with torch.inference_mode():
            logits = self.model(torch.tensor([input_tokens], dtype=torch.long)).logits  # [1, L-1, V]
            return torch.log_softmax(logits[0, first:end].float(), dim=-1)

    def score(self, idx: int, pairs: list) -> QuestionScores:
        import torch

        sharing: dict = {}  # candidates whose model input is identical share one forward pass
        for number, pair in enumerate(pairs):
            check_length(pair, self.max_length, idx)  # never truncate, whoever calls
            sharing.setdefault(pair.input_tokens, []).append(number)
        scores = [0.0] * len(pairs)
        for key, numbers in sharing.items():  # in first-use order; one [positions, vocabulary] tensor alive at a time
            starts = {number: len(pairs[number].context_tokens) - 1 for number in numbers}
            first = min(starts.values())
            log_probs = self._log_probs(key, first, max(starts[n] + len(pairs[n].continuation_tokens)
                                                        for n in numbers))
            for number in numbers:
                pair = pairs[number]
                start = starts[number] - first
                positions = torch.arange(start, start + len(pair.continuation_tokens))
                targets = torch.tensor(pair.continuation_tokens, dtype=torch.long)
                scores[number] = float(log_probs[positions, targets].sum())
            del log_probs
        return QuestionScores(
            idx,
            pairs[0].context_tokens,
            tuple(pair.continuation_tokens for pair in pairs),
            tuple(scores),
        )
