"""Honest reduced-precision runs against forged ones (issue 58): how often the adoption's score rules (the fitted
bound, the near-tie band, the sign test on the flips' directions; audit/adopt_scores.py) FAIL an honest run, and how
often they catch a forger who spends the old bound.

Each honest "run" is 64 SST-2-shaped rows of the embedded demo set (data/demo/validation.tsv, written for this
project), scored by lm-eval's own HFLM.loglikelihood in bfloat16 or float16 (the logged scores) and in float32 (the
reviewer's rescore), for the embedded SmolLM2-135M and tiny random Llamas of several widths and seeds; four row
windows per model and dtype. Each forgery takes an honest run and moves a random subset of its wrongly predicted rows
toward the gold answer by a random fraction of the pre-issue-58 bound (2^-3 * |score| + 2^-3 per candidate).

    python benchmarks/honest_runs.py --cache .test-cache/embedded [--forgeries 10]
"""

import argparse
import copy
import csv
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from measure_drift import tiny  # noqa: E402

PROMPT = "{sentence}\nQuestion: Is this sentence positive or negative?\nAnswer:"  # lm-eval's glue/sst2 doc_to_text
CHOICES = (" negative", " positive")
WINDOW, WINDOWS = 64, 4
OLD = (2 ** -3, 2 ** -3)


def rows() -> list:
    with open(Path(__file__).resolve().parent.parent / "data" / "demo" / "validation.tsv", encoding="utf-8") as f:
        return [(PROMPT.format(sentence=r["sentence"]), int(r["label"])) for r in csv.DictReader(f, delimiter="\t")]


def scored(model: Path, dtype: str, data: list) -> tuple:
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(model), dtype=dtype, device="cpu", batch_size=1, max_length=512,
              attn_implementation="eager")
    pairs = [(context, choice) for context, _ in data for choice in CHOICES]
    values = [v for v, _ in lm.loglikelihood([Instance("loglikelihood", {}, p, n) for n, p in enumerate(pairs)],
                                             disable_tqdm=True)]
    counts = [len(lm._encode_pair(c, k)[1]) for c, k in pairs]
    return [values[i:i + 2] for i in range(0, len(values), 2)], [counts[i:i + 2] for i in range(0, len(counts), 2)]


def judged(questions: list, dtype: str, quiet: bool = False) -> tuple:
    """(FAIL, accuracy of the logged scores, flips) under the adoption's rules."""
    from sst2_audit.audit.adopt_scores import bound_for, flip_test, row_class
    from sst2_audit.formats.adopted import FLIP, OUT

    bound, flips, out = bound_for(None, dtype, False, ""), [], False
    for q in questions:
        found, diff, row_flips = row_class(q, bound, ["acc"])
        out |= found == OUT
        if found == OUT and not quiet and os.environ.get("HONEST_RUNS_VERBOSE"):
            from sst2_audit.audit.adopt_scores import candidate_bounds
            print(f"    row {q.idx}: logged {q.logged} rescored {q.rescored} tokens {q.candidate_token_counts} "
                  f"bounds {candidate_bounds(q, bound)} flips {row_flips}", file=sys.stderr)
        flips += row_flips if found == FLIP else []
    test = flip_test(flips)
    right = sum(max(range(2), key=lambda k: (q.logged[k], -k)) == q.label for q in questions) / len(questions)
    if (out or test.one_way) and not quiet:
        print(f"  FAIL: {'a row out of the bound; ' if out else ''}{'; '.join(test.one_way)}", file=sys.stderr)
    return out or bool(test.one_way), right, len(flips)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--forgeries", type=int, default=10, help="forgeries per honest run")
    parser.add_argument("--tiny", type=int, default=6, help="tiny random models (widths 64, 128, 256 in turn)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sst2_audit.formats.adopted import AdoptedQuestion

    data, scratch = rows()[:WINDOW * WINDOWS], Path(tempfile.mkdtemp(prefix="honest-"))
    models = [("embedded", args.cache / "model")] + [
        (f"tiny-{w}-seed{s}", None) for s, w in zip(range(args.tiny), (64, 128, 256) * args.tiny)]
    rng, table = random.Random(58), []
    for name, folder in models:
        if folder is None:
            width, seed = int(name.split("-")[1]), int(name.split("seed")[1])
            folder = tiny(scratch / name, width, 2 + width // 128, 100 + seed, args.cache / "model")
        start = time.perf_counter()
        reference, counts = scored(folder, "float32", data)
        for dtype in ("bfloat16", "float16"):
            logged, _ = scored(folder, dtype, data)
            for window in range(WINDOWS):
                part = range(window * WINDOW, (window + 1) * WINDOW)
                questions = [AdoptedQuestion(i, data[i][1], "", "", "", 0, counts[i], "", [8, 9], [], logged[i],
                                             reference[i], {}, "", None) for i in part]
                print(f"[{name} {dtype} window {window}: honest]", file=sys.stderr)
                honest_fail, honest_accuracy, flips = judged(questions, dtype)
                caught, gains = 0, []
                for _ in range(args.forgeries):
                    forged = copy.deepcopy(questions)
                    wrong = [q for q in forged if max(range(2), key=lambda k: (q.rescored[k], -k)) != q.label]
                    for q in rng.sample(wrong, rng.randint(1, len(wrong))) if wrong else []:
                        f = rng.uniform(0.05, 1.0)
                        q.logged = [s + (1 if k == q.label else -1) * f * (OLD[0] * abs(s) + OLD[1])
                                    for k, s in enumerate(q.logged)]
                    failed, accuracy, _ = judged(forged, dtype, quiet=True)
                    caught += failed
                    gains += [] if failed else [round(accuracy - honest_accuracy, 4)]
                table.append((name, dtype, window, honest_fail, flips, caught, args.forgeries, gains))
        print(f"[{name}: {time.perf_counter() - start:.1f} s]", file=sys.stderr)
    runs = len(table)
    print(f"honest runs: {runs}, FAIL: {sum(t[3] for t in table)} (false-FAIL rate "
          f"{sum(t[3] for t in table) / runs:.3f}); flips at near ties in all: {sum(t[4] for t in table)}, "
          f"most in one run: {max(t[4] for t in table)}")
    forged = sum(t[6] for t in table)
    print(f"forgeries: {forged}, FAIL: {sum(t[5] for t in table)} ({sum(t[5] for t in table) / forged:.3f}); the "
          f"accepted ones' accuracy gain over the honest run's: {sorted(g for t in table for g in t[7])}")
    for dtype in ("bfloat16", "float16"):
        mine = [t for t in table if t[1] == dtype]
        print(f"  {dtype}: honest {len(mine)} runs, {sum(t[3] for t in mine)} FAIL; forgeries "
              f"{sum(t[6] for t in mine)}, {sum(t[5] for t in mine)} FAIL")


if __name__ == "__main__":
    main()
