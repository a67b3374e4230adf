"""The model-free adoption of a large plain lm-eval run against the floor of parsing its samples file (issue 62): a
reviewer with the data but not the model (`prepare --no-weights`) adopting a run of many rows, every level but the
rescore. Made here, all of it our demo text:

- a pinned profile of our own (`prepare --pin bench --task sst2`): a tiny random Llama with SmolLM2's tokenizer,
  and N validation rows whose sentences are our demo sentences strung together to about `--chars` characters;
- a run in the format of the real lm-eval 0.4.4 run of tests/data/lm-eval-0.4.4 (its results file with the numbers,
  counts and task hash of these rows; one samples line per row, the prompt the pinned YAML renders, scores chosen);
- `sst2-audit adopt RUN --structural` in a process of its own, beside the floor (`json.loads` of every line in a
  process of its own), with each one's wall time and peak RSS (`ru_maxrss` of the child).

    .venv/bin/python benchmarks/bench_adopt_model_free.py --cache .test-cache/embedded --megabytes 400
    .venv/bin/python benchmarks/bench_adopt_model_free.py --cache .test-cache/embedded --shape leaderboard

Two shapes. `sst2` (the default): the rows' sentences are long but the task is sst2's, two candidates. `leaderboard`:
the Open LLM Leaderboard's MMLU-Pro as lm-eval's `leaderboard_mmlu_pro` pins it (5-shot from the validation split,
first_n; ten options " A".." J"), rows of our demo sentences in MMLU-Pro's schema, so each row logs ten requests
sharing a context of about 3 KB, as the leaderboard's 378 MB samples files do (about 31 KB a row).
"""

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
LEGACY = REPO / "tests" / "data" / "lm-eval-0.4.4"
COMMAND = str(Path(sys.executable).parent / "sst2-audit")


def _data(folder: Path, rows: int, chars: int) -> None:
    """validation.jsonl of `rows` long demo sentences and a small train.jsonl, in sst2's schema."""
    import pyarrow.parquet as parquet

    demo = [row["sentence"] for row in parquet.read_table(REPO / ".test-cache" / "embedded" / "data" /
                                                           "validation.parquet").to_pylist()]
    folder.mkdir(parents=True)
    with (folder / "validation.jsonl").open("w") as handle:
        for idx in range(rows):
            words, k = [], idx
            while sum(map(len, words)) < chars:
                words.append(demo[k % len(demo)])
                k = k * 7 + 3
            handle.write(json.dumps({"sentence": " ".join(words), "label": idx % 2, "idx": idx}) + "\n")
    (folder / "train.jsonl").write_text("".join(json.dumps({"sentence": demo[i], "label": i % 2, "idx": i}) + "\n"
                                                for i in range(8)))


def _mmlu_pro_data(folder: Path, rows: int) -> None:
    """test.jsonl of `rows` questions and validation.jsonl of 10 (the shots), in MMLU-Pro's schema, our demo
    sentences as questions and options (a question of about 160 characters, options of about 40)."""
    import pyarrow.parquet as parquet

    demo = [row["sentence"] for row in parquet.read_table(REPO / ".test-cache" / "embedded" / "data" /
                                                           "validation.parquet").to_pylist()]
    folder.mkdir(parents=True)
    for name, count in (("test", rows), ("validation", 10)):
        with (folder / f"{name}.jsonl").open("w") as handle:
            for idx in range(count):
                question = " ".join(demo[(idx * 7 + k) % len(demo)] for k in range(3))[:160]
                options = [demo[(idx * 3 + k * 11) % len(demo)][:40] for k in range(10)]
                handle.write(json.dumps({"question_id": idx, "question": question, "options": options,
                                         "answer": "ABCDEFGHIJ"[idx % 10], "answer_index": idx % 10,
                                         "cot_content": "", "category": "demo", "src": "sst2-audit demo"}) + "\n")


def _run(scratch: Path, lock: Path, cache: Path) -> tuple[Path, int]:
    """The run's two files, as lm-eval 0.4.4 writes them, for every row of the pinned split (its shots as the pinned
    YAML draws them)."""
    from sst2_audit.audit.adopt import task_hash
    from sst2_audit.cli.common import spec_for_run
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.formats.lm_eval_output import read_plain_sample
    from sst2_audit.protocol.metrics import METRICS
    from sst2_audit.protocol.rules import doc_hash
    from sst2_audit.task.rows import shot_plan, verified_rows
    from sst2_audit.util.hashing import sha256_text

    loaded = load_lock(lock)
    profile = loaded.profile("bench")
    spec = spec_for_run(loaded, profile, None)
    rows = verified_rows(loaded, profile, spec, cache, roles=tuple(spec.splits), weights=False)
    shots = shot_plan(loaded, profile, spec, cache, rows.manifest, rows, sorted(rows.by_idx))
    out = scratch / "run"
    out.mkdir()
    samples = out / next(LEGACY.glob("samples_*")).name.replace("sst2", spec.name)
    values, read = [], []
    with samples.open("w") as handle:
        for idx, row in sorted(rows.by_idx.items()):
            doc = row.doc
            requests = shots.requests(spec, idx, doc) if shots else spec.requests(doc, spec.prefix(doc))
            gold = spec.gold(doc, spec.choices(doc))
            scores = [-2.5] * len(requests)
            scores[idx % 3 % 2] = -1.25  # right on two rows of three (sst2)
            acc = 1.0 if max(range(len(scores)), key=scores.__getitem__) == gold else 0.0
            line = {"doc_id": idx, "doc": row.as_doc(), "target": str(spec.target(doc)),
                    "arguments": {f"gen_args_{k}": {"arg_0": c, "arg_1": t} for k, (c, t) in enumerate(requests)},
                    "resps": [[[repr(s), "False"]] for s in scores], "filtered_resps": [[repr(s), "False"]
                                                                                        for s in scores],
                    "doc_hash": doc_hash(row.as_doc()), "prompt_hash": sha256_text(requests[0][0]),
                    "target_hash": sha256_text(str(spec.target(doc))), "acc": acc}
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
            values.append(acc)
            read.append(read_plain_sample(line, "x", ("acc",), legacy=True))
    results = json.loads(next(LEGACY.glob("results_*.json")).read_text())
    for field in ("results", "group_subtasks", "versions", "n-shot", "higher_is_better", "n-samples", "task_hashes"):
        results[field] = {spec.name: results[field]["sst2"]}
    number, stderr = METRICS["acc"].aggregate(values, 0)
    results["results"][spec.name].update({"alias": spec.name, "acc,none": number, "acc_stderr,none": stderr})
    results["n-shot"][spec.name] = loaded.settings_for("bench", spec)["num_fewshot"]
    results["n-samples"][spec.name] = {"original": len(values), "effective": len(values)}
    results["config"]["limit"] = None  # every row of the split, no --limit
    length = loaded.settings_for("bench", spec)["max_length"]
    results["max_length"] = length
    results["config"]["model_args"] = results["config"]["model_args"].replace("max_length=512", f"max_length={length}")
    results["task_hashes"][spec.name] = task_hash(read)
    results.pop("configs", None)  # a minimised file: the pinned profile's data fields are not the hub's
    (out / next(LEGACY.glob("results_*.json")).name).write_text(json.dumps(results, indent=2))
    return samples, len(values)


# each measured process is the only child of a fresh wrapper, so its peak RSS is its own
WRAPPER = ("import json, resource, subprocess, sys, time\nstart = time.perf_counter()\n"
           "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
           "print(json.dumps([time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,"
           " done.returncode, done.stdout.splitlines()[0] if done.stdout else done.stderr[-400:]]))")


def _child(argv: list, cwd: Path) -> tuple[float, int, int, str]:
    done = subprocess.run([sys.executable, "-c", WRAPPER, *argv], cwd=cwd, capture_output=True, text=True,
                          check=True)
    seconds, peak, code, said = json.loads(done.stdout)
    return seconds, peak * 1024, code, said


FLOOR = "import json, sys\nprint(sum(1 for line in open(sys.argv[1], 'rb') if json.loads(line) is not None))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="a prepared cache of the embedded profile")
    parser.add_argument("--megabytes", type=int, default=400, help="the samples file's size, about")
    parser.add_argument("--chars", type=int, default=1500, help="a row's sentence, in characters")
    parser.add_argument("--keep", type=Path, help="make everything in this new folder and keep it (a profile's input)")
    parser.add_argument("--shape", choices=("sst2", "leaderboard"), default="sst2", help="the task (above)")
    args = parser.parse_args()
    from support.builders import tiny_model_folder

    with tempfile.TemporaryDirectory(prefix="sst2-audit-bench-adopt-") as name:
        scratch = args.keep.resolve() if args.keep else Path(name)
        scratch.mkdir(exist_ok=True)
        leaderboard = args.shape == "leaderboard"
        rows = max(16, int(args.megabytes * 2**20 / (38_000 if leaderboard else 3.2 * args.chars + 900)))
        tiny_model_folder(scratch / "model", 5, args.cache.resolve())
        (_mmlu_pro_data if leaderboard else _data)(scratch / "data", rows, *([] if leaderboard else [args.chars]))
        task = ["leaderboard_mmlu_pro", "--max-length", "2048"] if leaderboard else ["sst2"]
        for argv in (["prepare", "--pin", "bench", "--task", *task, "--model", "model", "--data", "data",
                      "--new-lock", "bench.lock.json"],
                     ["prepare", "--lock", "bench.lock.json", "--profile", "bench", "--cache", "cache", "--no-weights"]):
            done = subprocess.run([COMMAND, *argv], cwd=scratch, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-2000:])
        samples, count = _run(scratch, scratch / "bench.lock.json", scratch / "cache")
        size = samples.stat().st_size
        floor = _child([sys.executable, "-c", FLOOR, str(samples)], scratch)
        adopt = _child([COMMAND, "adopt", "run", "--lock", "bench.lock.json", "--profile", "bench", "--cache",
                        "cache", "--out", "adopted", "--structural"], scratch)
        if adopt[2] not in (0, 4):
            print(subprocess.run([COMMAND, "adopt", "run", "--lock", "bench.lock.json", "--profile", "bench",
                                  "--cache", "cache", "--structural", "--out", "again"], cwd=scratch,
                                 capture_output=True, text=True).stdout[-3000:])
        shutil.rmtree(scratch / "adopted", ignore_errors=True)
    shape = "MMLU-Pro-shaped (ten requests sharing a 5-shot context)" if args.shape == "leaderboard" else \
        f"sst2-shaped, of about {args.chars} characters"
    print(f"samples file: {size / 2**20:.0f} MB, {count} rows, {shape}")
    print(f"floor (json.loads per line): {floor[0]:.2f} s")
    print(f"adopt, model-free (exit {adopt[2]}): {adopt[0]:.2f} s ({adopt[0] / floor[0]:.1f}x the floor, "
          f"{count / adopt[0]:.0f} rows/s), peak RSS {adopt[1] / 2**20:.0f} MB")
    print(f"  {adopt[3]}")


if __name__ == "__main__":
    main()
