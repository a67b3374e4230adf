"""The independent path's rules, on real tokenizers and a tiny real transformers model."""

import pytest

from support.builders import tiny_llama
from support.paths import LOCK
from sst2_audit.task.dataset import Row
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.scoring.independent import BoundaryError, IndependentScorer, encode_pair, encode_question
from sst2_audit.formats.lock import load_lock
from sst2_audit.protocol.rules import accuracy_stderr, predict
from sst2_audit.task.split import make_split
from sst2_audit.task.spec import spec_for


@pytest.fixture(scope="module")
def sst2():
    return spec_for(load_lock(LOCK), "sst2")


def context_for(sentence: str) -> str:
    spec, doc = sst2_spec(), {"sentence": sentence, "label": 1, "idx": 0}
    return spec.requests(doc, spec.prefix(doc))[0][0]


def sst2_spec():
    return spec_for(load_lock(LOCK), "sst2")


@pytest.fixture(scope="module")
def tiny_model():
    return tiny_llama(7)


def test_tie_goes_to_the_first_candidate():
    assert predict([-1.5, -1.5]) == 0
    assert predict([-2.0, -1.0]) == 1
    assert predict([-1.0, -2.0]) == 0
    assert predict([-3.0, -1.0, -1.0]) == 1


def test_stderr_is_sample_std_over_sqrt_n():
    assert accuracy_stderr([1.0, 0.0, 1.0, 0.0]) == pytest.approx(0.28867513459481287, abs=0)


def test_a_summary_of_questions_in_hash_order_equals_lm_evals_numbers_bit_for_bit(sst2):
    """lm-eval sums the squared deviations in doc_id order; over 0/1 values the order still rounds (a 172-row run
    differed in the last bit when summed in hash order): 300 generated runs in shuffled order against lm-eval's
    own mean and mean_stderr."""
    import random
    from types import SimpleNamespace

    from lm_eval.api.metrics import mean, mean_stderr

    from sst2_audit.scoring.summaries import path_summary

    draw, differed = random.Random(50), 0
    for _ in range(300):
        count = draw.randint(2, 2000)
        ids = draw.sample(range(10 * count), count)
        questions = [SimpleNamespace(idx=idx, label=draw.randint(0, 1), candidates=[0, 1],
                                     scores={"official": [draw.uniform(-9, 0), draw.uniform(-9, 0)]}) for idx in ids]
        right = [float(predict(q.scores["official"]) == q.label) for q in sorted(questions, key=lambda q: q.idx)]
        summary = path_summary(sst2, questions, "official", "acc", {})
        assert (summary.value, summary.stderr) == (mean(right), mean_stderr(right))
        in_given_order = [float(predict(q.scores["official"]) == q.label) for q in questions]
        differed += accuracy_stderr(in_given_order) != mean_stderr(right)
    assert differed > 0  # the order matters: a summary in the given order would have failed


def test_prompt_and_candidates_are_the_protocol(tokenizer, sst2):
    doc = {"sentence": "a fine film .", "label": 1, "idx": 3}
    context = "a fine film .\nQuestion: Is this sentence positive or negative?\nAnswer:"
    assert sst2.requests(doc, sst2.prefix(doc)) == [(context, " negative"), (context, " positive")]
    assert sst2.gold(doc, sst2.choices(doc)) == 1
    assert (sst2.eval_split, sst2.splits, sst2.metrics) == ("validation", ("train", "validation"), ("acc",))
    pairs = encode_question(tokenizer, sst2.requests(doc, sst2.prefix(doc)), 3, 512)
    assert [p.continuation_tokens for p in pairs] == [(3524,), (2731,)]
    assert pairs[0].context_tokens == tuple(tokenizer.encode(context_for("a fine film .")))


def test_multi_token_candidate_is_summed_over_its_tokens(tokenizer, tiny_model):
    import torch

    context = context_for("a fine film .")
    pair = encode_pair(tokenizer, context, " absolutely wonderful")
    assert len(pair.continuation_tokens) >= 2
    scores = IndependentScorer(tiny_model, 512).score(0, [pair])
    # By hand: one forward over the whole sequence, then each candidate token's log-probability.
    whole = list(pair.context_tokens + pair.continuation_tokens)
    with torch.inference_mode():
        log_probs = torch.log_softmax(tiny_model(torch.tensor([whole[:-1]])).logits, dim=-1)[0]
    start = len(pair.context_tokens) - 1
    per_token = torch.stack([log_probs[start + i, t] for i, t in enumerate(pair.continuation_tokens)])
    assert scores.candidate_scores[0] == float(per_token.sum())
    assert scores.candidate_scores[0] < float(per_token.min())  # a sum, not a mean: no length normalization
    assert scores.candidate_token_ids == (pair.continuation_tokens,)


def test_one_token_candidates_share_one_forward_pass(tokenizer, tiny_model):
    scorer = IndependentScorer(tiny_model, 512)
    scorer.score(0, encode_question(tokenizer, [(context_for("a fine film ."), c) for c in (" negative", " positive")],
                                    0, 512))
    assert scorer.forward_calls == 1


def test_boundary_check_fails_when_context_tokens_are_not_a_prefix(tokenizer):
    # A context ending inside a word: BPE merges its last letters with the candidate's.
    with pytest.raises(BoundaryError, match=r"context/candidate boundary: the context's \d+ tokens are not a prefix"):
        encode_pair(tokenizer, "a fine fil", "m .")


def test_over_long_input_fails_cleanly(tokenizer):
    sentence = " ".join(["splendid"] * 600)
    with pytest.raises(InputError, match=r"row idx 17: the model input is \d+ tokens, longer than max_length 512; "
                                         r"the protocol never truncates"):
        encode_question(tokenizer, [(context_for(sentence), c) for c in (" negative", " positive")], 17, 512)


def test_a_confirmation_row_can_never_be_scored():
    split = make_split(range(264), "salt", 64, 128)
    assert len(set(split.dev_ids) | set(split.confirm_ids)) == 192
    assert not set(split.dev_ids) & set(split.confirm_ids)
    split.require_dev(split.dev_ids)
    with pytest.raises(CheckFailed, match=rf"refusing to score confirmation rows \[{split.confirm_ids[0]}\]: "
                                          "the confirmation set is sealed"):
        split.require_dev([split.dev_ids[0], split.confirm_ids[0]])
    outside = next(i for i in range(264) if i not in split.dev_ids and i not in split.confirm_ids)
    with pytest.raises(CheckFailed, match=rf"rows \[{outside}\]: they are not dev rows"):
        split.require_dev([outside])


def test_split_is_a_fixed_hash_order():
    import hashlib

    split = make_split(range(264), "sst2-audit/split/v1", 64, 128)
    by_hash = sorted(range(264), key=lambda i: hashlib.sha256(f"sst2-audit/split/v1:{i}".encode()).hexdigest())
    assert list(split.dev_ids) == by_hash[:64] and list(split.confirm_ids) == by_hash[64:192]
    with pytest.raises(InputError, match="validation split has 100 rows; the split rule needs at least 192"):
        make_split(range(100), "s", 64, 128)


def test_row_doc_is_in_parquet_column_order():
    assert list(Row(4, {"sentence": "x", "label": 1, "idx": 4}).as_doc()) == ["sentence", "label", "idx"]


def test_multi_token_candidate_matches_lm_eval_bit_for_bit(tokenizer, tiny_model):
    """The same tiny model through lm-eval's own HFLM.loglikelihood: identical numbers."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    context = context_for("a fine film .")
    candidates = [" absolutely wonderful", " negative"]
    lm = HFLM(pretrained=tiny_model, tokenizer=tokenizer, batch_size=1, max_length=512, device="cpu",
              add_bos_token=False)
    requests = [Instance(request_type="loglikelihood", doc={}, arguments=(context, c), idx=i)
                for i, c in enumerate(candidates)]
    official = [score for score, _ in lm.loglikelihood(requests, disable_tqdm=True)]
    mine = IndependentScorer(tiny_model, 512).score(0, [encode_pair(tokenizer, context, c) for c in candidates])
    assert list(mine.candidate_scores) == official


def test_a_row_s_log_softmax_is_the_same_floats_when_only_the_scored_rows_are_normalised():
    """The independent path normalises only the positions it scores (IndependentScorer._log_probs); lm-eval
    normalises every position. Generated logits (SmolLM2's vocabulary width and odd ones, 1-700 positions, wide
    and narrow value ranges, every slice shape the scorer asks for): every element equal, bit for bit."""
    import random

    import torch

    rng = random.Random(21)
    for case in range(60):
        rows, width = rng.randint(1, 700 if case < 6 else 40), rng.choice([49152, 32000, 50257, 17, 4099])
        generator = torch.Generator().manual_seed(case)
        logits = torch.randn(rows, width, generator=generator) * rng.choice([0.01, 1.0, 30.0]) + rng.uniform(-50, 50)
        whole = torch.log_softmax(logits, dim=-1)
        first = rng.randrange(rows)
        end = rng.randint(first + 1, min(rows, first + 12))
        part = torch.log_softmax(logits[first:end], dim=-1)
        assert torch.equal(part, whole[first:end]), (rows, width, first, end)


def test_agreement_names_the_row_and_candidate_of_a_one_bit_difference():
    import math

    from sst2_audit.scoring.agreement import compare_scores, describe

    official = {7: [-4.25, -3.5], 9: [-1.0, -2.0]}
    independent = {7: [-4.25, math.nextafter(-3.5, 0.0)], 9: [-1.0, -2.0]}
    max_abs_diff, disagreements = compare_scores([9, 7], official, independent)
    assert max_abs_diff == 3.5 - abs(math.nextafter(-3.5, 0.0))
    assert [(m.logged_position, m.claimed_id, m.expected["candidate"]) for m in disagreements] == [(1, 7, 1)]
    assert describe(disagreements, max_abs_diff).startswith(
        "official and independent scores differ on 1 candidate score(s) (idx 7 candidate 1; max abs diff ")
    assert compare_scores([9, 7], official, official) == (0.0, [])


def test_task_config_may_differ_only_in_data_loading_fields(sst2):
    import dataclasses

    from sst2_audit.util.errors import CheckFailed
    from sst2_audit.scoring.official import config_differences

    official = {"task": "sst2", "dataset_path": "nyu-mll/glue", "dataset_name": "sst2", "doc_to_text": "{{sentence}}"}
    spec = dataclasses.replace(sst2, official=official)
    effective = dict(official, dataset_path="parquet", dataset_name=None, dataset_kwargs={"data_files": {}},
                     num_fewshot=0, target_delimiter=" ")
    assert sorted(config_differences(spec, effective, 0)) == ["dataset_kwargs", "dataset_name", "dataset_path", "num_fewshot"]
    with pytest.raises(CheckFailed, match="outside the data-loading fields: doc_to_text"):
        config_differences(spec, dict(effective, doc_to_text="{{sentence}} Answer:"), 0)
    with pytest.raises(CheckFailed, match="outside the data-loading fields: target_delimiter"):
        config_differences(spec, dict(effective, target_delimiter=""), 0)
    with pytest.raises(CheckFailed, match="the effective sst2 task config has num_fewshot 5; the lock pins 0"):
        config_differences(spec, dict(effective, num_fewshot=5), 0)


def test_after_the_main_thread_s_imports_the_model_load_imports_nothing(embedded_cache):
    """No import lock (scoring/model.py): the audit loads the tokenizer and imports the model's code in the main
    thread (audit/inputs.py), so the rescore thread's model load imports no module beside the main thread's
    work (two threads importing transformers' lazy modules at once shipped as an exit 3 once). Checked in a
    fresh process, and that without those steps the load would have imported the modeling code."""
    import subprocess
    import sys

    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from sst2_audit.scoring.model import import_model_code, load, load_tokenizer\n"
        "folder = Path(sys.argv[1]) / 'model'\n"
        "tokenizer = load_tokenizer(folder)\n"
        "if sys.argv[2] == 'prepared':\n"
        "    import_model_code(folder)\n"
        "before = set(sys.modules)\n"
        "load(folder, {'dtype': 'float32', 'attention': 'eager'}, tokenizer)\n"
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('transformers')))\n"
    )
    found = {}
    for how in ("prepared", "cold"):
        done = subprocess.run([sys.executable, "-c", program, str(embedded_cache), how], capture_output=True,
                              text=True, check=True)
        found[how] = done.stdout.strip().splitlines()[-1]
    assert found["prepared"] == "[]"
    assert "transformers.models.llama.modeling_llama" in found["cold"]


def test_the_memory_a_load_takes_is_stated_from_the_headers_and_a_model_too_large_is_refused(embedded_cache, tmp_path):
    """scoring/model.py::memory_statement: the parameters counted from the safetensors headers (as safetensors
    itself reads them, nothing loaded), the peak stated in the lock's dtype, and a machine with too little memory
    refused with the arithmetic (exit 2), before any load."""
    import math

    from safetensors import safe_open

    from support.builders import tiny_model_folder
    from sst2_audit.scoring.model import BESIDES_WEIGHTS, LOGIT_COPIES, memory_statement, parameters
    from sst2_audit.util.errors import InputError

    folder = tiny_model_folder(tmp_path / "model", 21, embedded_cache, max_shard_size="1MB")
    counted = 0
    for path in folder.glob("*.safetensors"):
        with safe_open(str(path), "pt") as handle:
            counted += sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())
    assert len(list(folder.glob("*.safetensors"))) > 1 and parameters(folder) == counted
    need, libraries = counted * 4 + BESIDES_WEIGHTS, f"{BESIDES_WEIGHTS / 1e9:.2f} GB"
    assert memory_statement(folder, {"dtype": "float32"}, None) == (
        f"about {need / 1e9:.2f} GB at peak: {counted / 1e6:,.1f} M parameters x 4 B (float32) + {libraries}")
    assert memory_statement(folder, {"dtype": "float32"}, int(need) + 1).endswith(
        f"; {(int(need) + 1) / 1e9:.1f} GB available")
    with pytest.raises(InputError) as refused:
        memory_statement(folder, {"dtype": "float32"}, int(need) - 1)
    assert str(refused.value).startswith(f"{folder}: the model needs about {need / 1e9:.2f} GB at peak: ")
    assert "but this machine has " in str(refused.value)
    assert "a bfloat16 checkpoint under a float32 lock takes 4 bytes a parameter, not 2" in str(refused.value)
    # two processes a launcher started on this machine each load a copy: the arithmetic says so, and refuses twice
    assert memory_statement(folder, {"dtype": "float32"}, None, processes=2) == (
        f"about {2 * need / 1e9:.2f} GB at peak: 2 processes on this machine x ({counted / 1e6:,.1f} M parameters x "
        f"4 B (float32) + {libraries})")
    with pytest.raises(InputError, match="fewer processes on each machine"):
        memory_statement(folder, {"dtype": "float32"}, int(need) + 1, processes=2)
    # the longest input's activations: the logits' copies for each path at once (tiny_llama: 49,152 words, 4 heads),
    # or eager attention's heads x tokens^2 where that is larger (never for this vocabulary below 24,000 tokens)
    logits = LOGIT_COPIES * 1000 * 49152 * 4
    assert memory_statement(folder, {"dtype": "float32", "attention": "eager"}, None, tokens=1000, paths=2) == (
        f"about {(need + 2 * logits) / 1e9:.2f} GB at peak: {counted / 1e6:,.1f} M parameters x 4 B (float32) + "
        f"{libraries} + 2 x {LOGIT_COPIES} x 1000 tokens x 49,152 x 4 B (logits)")
    assert memory_statement(folder, {"dtype": "float32", "attention": "eager"}, None, tokens=40000).endswith(
        "+ 1 x 2 x 4 heads x 40000^2 tokens x 4 B (eager attention)")
    assert parameters(embedded_cache / "model") == 134_515_008  # SmolLM2-135M, tied embeddings stored once
