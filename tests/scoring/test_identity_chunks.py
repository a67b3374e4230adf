"""The identity level encodes many questions' strings in one tokenizer call: the questions it gives are those of
one question at a time, wherever the chunks (by rows, by characters) happen to end."""

import pytest

from support.paths import LOCK
from sst2_audit.formats.lock import load_lock
from sst2_audit.scoring import identity
from sst2_audit.scoring.model import load_tokenizer
from sst2_audit.task.rows import verified_rows
from sst2_audit.task.spec import spec_for


@pytest.mark.parametrize("rows, chars", [(256, 1 << 20), (7, 1 << 20), (256, 400), (3, 1)])
def test_chunked_questions_equal_one_question_at_a_time(embedded_cache, monkeypatch, rows, chars):
    lock = load_lock(LOCK)
    profile = lock.profile("embedded")
    spec = spec_for(lock, profile.task)
    data = verified_rows(lock, profile, spec, embedded_cache, roles=(), weights=False)
    tokenizer = load_tokenizer(embedded_cache / "model")
    split = [data.by_idx[idx] for idx in list(data.by_idx)[:40]]
    alone = [identity.expected_question(row, spec, tokenizer, 512) for row in split]
    monkeypatch.setattr(identity, "CHUNK_ROWS", rows)
    monkeypatch.setattr(identity, "CHUNK_CHARS", chars)
    together = list(identity.expected_questions(split, spec, tokenizer, 512))
    assert together == alone and len(together) == 40
    assert [q.idx for q in together] == [row.idx for row in split]


def test_questions_without_a_tokenizer_are_the_same_questions_without_their_tokens(embedded_cache):
    """An adoption that rescores nothing derives no tokens (lm-eval logs none): every other field is the same."""
    import dataclasses

    lock = load_lock(LOCK)
    profile = lock.profile("embedded")
    spec = spec_for(lock, profile.task)
    data = verified_rows(lock, profile, spec, embedded_cache, roles=(), weights=False)
    split = [data.by_idx[idx] for idx in list(data.by_idx)[:40]]
    tokenized = list(identity.expected_questions(split, spec, load_tokenizer(embedded_cache / "model"), 512))
    bare = list(identity.expected_questions(split, spec, None, 512))
    tokens = {"candidate_token_ids": None, "contexts_tokens": None}
    assert bare == [dataclasses.replace(question, **tokens) for question in tokenized] and len(bare) == 40
    public = bare[0].public_fields()
    assert (public["context_length"], public["candidate_token_counts"], public["candidate_tokens_sha256"]) == \
        (None, None, None)
    assert {k: v for k, v in public.items() if not k.startswith(("context_length", "candidate_token"))} == \
        {k: v for k, v in tokenized[0].public_fields().items() if not k.startswith(("context_length", "candidate_token"))}
