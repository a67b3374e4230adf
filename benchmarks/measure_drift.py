"""Honest drift of a reduced-precision lm-eval run against the float32 rescore (issue 58): the measurement the
adoption's score bound is fitted to (audit/adopt_scores.py).

lm-eval's own HFLM.loglikelihood (the path a plain `lm_eval --dtype bfloat16` run takes) scores the same requests in
float32, bfloat16 and float16 on this CPU, for several models (the embedded SmolLM2-135M and tiny random Llamas of
two widths) and continuation lengths from 1 to about 128 tokens. The contexts and continuations are cut from this
project's own demo sentences (data/demo/validation.tsv): no third-party text. Printed per dtype: the largest
|difference| per continuation length, and the fit of the bound

    |logged - rescored| <= REL * |rescored| + PER_TOKEN * sqrt(tokens)

(REL the dtype's rounding of the final sum, PER_TOKEN the largest |difference| / sqrt(tokens) after it), and the
raw points as JSON with --json PATH.

    python benchmarks/measure_drift.py --cache .test-cache/embedded [--json drift.json]
"""

import argparse
import csv
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

LENGTHS = (1, 2, 4, 8, 16, 32, 64, 128)
PER_LENGTH = 12  # requests per continuation length
FIT_ROWS = 64  # SST-2-shaped contexts (the first 64 demo rows; benchmarks/honest_runs.py judges 256)
REL = {"bfloat16": 2 ** -8, "float16": 2 ** -11}  # half an ulp of the dtype, relative: the rounding of the sum


def sentences() -> list:
    with open(Path(__file__).resolve().parent.parent / "data" / "demo" / "validation.tsv", encoding="utf-8") as f:
        return [row["sentence"] for row in csv.DictReader(f, delimiter="\t")]


SST2 = "{sentence}\nQuestion: Is this sentence positive or negative?\nAnswer:"  # lm-eval's glue/sst2 doc_to_text


def requests(tokenizer, texts: list) -> list:
    """(context, continuation) pairs, two candidates per context: the first FIT_ROWS demo rows in SST-2's prompt with
    its two 1-token choices, then per length a sentence as context and the next ones' tokens cut to the length."""
    found = [(SST2.format(sentence=text), choice) for text in texts[:FIT_ROWS] for choice in (" negative", " positive")]
    stream = tokenizer(" " + " ".join(texts), add_special_tokens=False)["input_ids"]
    for length in LENGTHS:
        for number in range(PER_LENGTH):
            context = texts[(number // 2 * 7 + length) % len(texts)] + "\nAnswer:"  # two candidates per context
            start = (number * 997 + length * 31) % (len(stream) - length - 1)
            continuation = tokenizer.decode(stream[start:start + length])
            found.append((context, continuation))
    return found


def tiny(folder: Path, width: int, layers: int, seed: int, tokenizer_from: Path) -> Path:
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=49152, hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                         attn_implementation="eager")
    LlamaForCausalLM(config).eval().save_pretrained(folder, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_from / name, folder / name)
    return folder


def scores(model: Path, dtype: str, pairs: list) -> tuple:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model), dtype=dtype, device="cpu", batch_size=1, max_length=512,
              attn_implementation="eager")
    instances = [Instance("loglikelihood", {}, pair, number) for number, pair in enumerate(pairs)]
    found = [value for value, _ in lm.loglikelihood(instances, disable_tqdm=True)]
    counts = [len(lm._encode_pair(context, continuation)[1]) for context, continuation in pairs]
    return found, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, required=True, help="a prepared embedded cache (its model/ folder)")
    parser.add_argument("--json", type=Path, help="write every point here")
    parser.add_argument("--models", default="embedded,tiny-64,tiny-256")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    base = args.cache / "model"
    tokenizer = AutoTokenizer.from_pretrained(base)
    pairs = requests(tokenizer, sentences())
    points, scratch = [], Path(tempfile.mkdtemp(prefix="drift-"))
    models = {"embedded": base, "tiny-64": lambda: tiny(scratch / "t64", 64, 2, 1, base),
              "tiny-256": lambda: tiny(scratch / "t256", 256, 4, 2, base)}
    for name in args.models.split(","):
        folder = models[name] if isinstance(models[name], Path) else models[name]()
        start = time.perf_counter()
        reference, counts = scores(folder, "float32", pairs)
        for dtype in REL:
            reduced, _ = scores(folder, dtype, pairs)
            points += [{"model": name, "dtype": dtype, "tokens": n, "rescored": r, "logged": x, "diff": abs(x - r)}
                       for n, r, x in zip(counts, reference, reduced)]
        print(f"[{name}: {len(pairs)} requests x 3 dtypes in {time.perf_counter() - start:.1f} s]", file=sys.stderr)
    print("largest |logged - rescored| of a candidate, and of a margin (two candidates of one context), by tokens:")
    for dtype, rel in REL.items():
        mine = [p for p in points if p["dtype"] == dtype]
        pairs = [(a, b) for a, b in zip(mine[0::2], mine[1::2])]
        buckets = {}
        for a, b in pairs:
            n = max(a["tokens"], b["tokens"])
            bucket = min(LENGTHS, key=lambda m: abs(math.log2(max(n, 1)) - math.log2(m)))
            margin = abs((a["logged"] - b["logged"]) - (a["rescored"] - b["rescored"]))
            buckets.setdefault(bucket, []).append((max(a["diff"], b["diff"]), margin))
        print(f"  {dtype} candidate: " + ", ".join(f"{n}: {max(c for c, _ in v):.4g}" for n, v in sorted(buckets.items())))
        print(f"  {dtype} margin:    " + ", ".join(f"{n}: {max(m for _, m in v):.4g}" for n, v in sorted(buckets.items())))
        per_token = max(max(p["diff"] - rel * abs(p["rescored"]), 0.0) / math.sqrt(p["tokens"]) for p in mine)
        margin_fit = max(max(abs((a["logged"] - b["logged"]) - (a["rescored"] - b["rescored"]))
                             - rel * (abs(a["rescored"]) + abs(b["rescored"])), 0.0)
                         / math.sqrt(max(a["tokens"], b["tokens"])) for a, b in pairs)
        print(f"  {dtype} fit: candidate |diff| <= {rel:g} * |rescored| + {per_token:.4g} * sqrt(tokens); margin "
              f"drift <= {rel:g} * (|a| + |b|) + {margin_fit:.4g} * sqrt(tokens); {len(mine)} points")
        for model in sorted({p["model"] for p in mine}):
            ratio = max(max(p["diff"] - rel * abs(p["rescored"]), 0.0) / math.sqrt(p["tokens"])
                        for p in mine if p["model"] == model)
            print(f"    {model}: candidate {ratio:.4g}")
    if args.json:
        args.json.write_text(json.dumps(points, indent=1))


if __name__ == "__main__":
    main()
