"""lm-eval's own output files as the tests change them: a copy of a real run, one sample edited, lm-eval's task
hash recomputed as a forger would, and generated mutations of both files (each must be refused, never PASS)."""

import json
import random
import shutil
from pathlib import Path


def copy_run(source: Path, target: Path) -> tuple:
    """A copy of a real run's output folder: (its results file, its samples file)."""
    shutil.copytree(source, target)
    return next(target.rglob("results_*.json")), next(target.rglob("samples_*.json*"))


def edit_sample(samples: Path, line: int, change) -> int:
    """Change one line of a samples file in place: the doc_id it holds."""
    rows = [json.loads(text) for text in samples.read_text().splitlines()]
    change(rows[line])
    samples.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return rows[line]["doc_id"]


def rehash(results: Path, samples: Path, legacy: bool = False) -> None:
    """lm-eval's task_hashes.sst2 recomputed from the samples, as a forger keeping the two files consistent would."""
    from sst2_audit.audit.adopt import task_hash
    from sst2_audit.formats.lm_eval_output import read_plain_sample

    raw = json.loads(results.read_text())
    rows = [read_plain_sample(json.loads(line), "x", ("acc",), legacy=legacy)
            for line in samples.read_text().splitlines()]
    raw["task_hashes"]["sst2"] = task_hash(rows)
    results.write_text(json.dumps(raw))


RESULTS_MUTATIONS = (  # the results fields the adoption checks (the rest are the run's claims, labelled so)
    lambda raw, rng: raw["results"]["sst2"].__setitem__("acc,none", raw["results"]["sst2"]["acc,none"] +
                                                        rng.choice((0.0625, -1e-12))),
    lambda raw, rng: raw["results"]["sst2"].__setitem__("acc_stderr,none", 0.01),
    lambda raw, rng: raw["results"]["sst2"].__setitem__("alias", "sst2 (forged)"),
    lambda raw, rng: raw.__setitem__("lm_eval_version", rng.choice(("0.4.8", "0.4.13", 4))),
    lambda raw, rng: raw["n-shot"].__setitem__("sst2", 5),
    lambda raw, rng: raw["task_hashes"].__setitem__("sst2", "0" * 64),
    lambda raw, rng: raw["configs"]["sst2"].__setitem__("doc_to_text", "{{sentence}}\nAnswer:"),
    lambda raw, rng: raw["configs"]["sst2"].__setitem__("target_delimiter", "  "),
    lambda raw, rng: raw.__setitem__("chat_template", "forged"),
    lambda raw, rng: raw["results"].pop("sst2"),
)


def sample_mutation(lines: list, rng: random.Random) -> list:
    at = rng.randrange(len(lines))
    row, kind = json.loads(lines[at]), rng.choice(("line", "drop", "field", "value", "extra"))
    if kind == "line":
        return lines[:at] + [lines[rng.randrange(len(lines))]] + lines[at:]
    if kind == "drop":
        return lines[:at] + lines[at + 1:]
    if kind == "field":
        del row[rng.choice(sorted(row))]
    elif kind == "extra":
        row["note"] = "trust me"
    else:
        field = rng.choice(("doc_id", "target", "doc_hash", "prompt_hash", "target_hash", "acc", "resps", "doc",
                            "filter", "metrics", "filtered_resps"))
        row[field] = {"doc_id": row["doc_id"] + rng.choice((-1, 1, 1000)), "target": str(1 - int(row["target"])),
                      "doc_hash": "0" * 64, "prompt_hash": "f" * 64, "target_hash": "1" * 64,
                      "acc": 1.0 - row["acc"], "resps": row["resps"][::-1] + [row["resps"][0]],
                      "doc": dict(row["doc"], label=1 - row["doc"]["label"]), "filter": "take_first",
                      "metrics": ["acc", "acc_norm"], "filtered_resps": row["filtered_resps"][::-1]}[field]
    return lines[:at] + [json.dumps(row, ensure_ascii=False)] + lines[at + 1:]


def changed(before: bytes, after: bytes) -> bool:
    """A mutation that leaves the file's JSON value (a results file) or every line's (a samples file) as it was (a
    byte swapped for the same, a space for a space) is no mutation."""
    if before == after:
        return False
    for read in (json.loads, lambda data: [json.loads(line) for line in data.splitlines()]):
        try:
            return read(before) != read(after)
        except ValueError:
            continue
    return True


def mutations(source: Path, base: Path, rng: random.Random, count: int) -> list:
    """`count` mutated copies of the run in `source` (a fifth a checked results field, a fifth a byte of the samples
    file, the rest a line dropped, doubled or changed), each really changed: their folders."""
    cases = []
    for number in range(count):
        folder = base / f"m{number}"
        results, samples = copy_run(source, folder)
        original = {path: path.read_bytes() for path in (results, samples)}
        while True:
            if number % 5 == 0:  # the results file: a checked field
                raw = json.loads(original[results])
                rng.choice(RESULTS_MUTATIONS)(raw, rng)
                results.write_text(json.dumps(raw, indent=2))
            elif number % 5 == 1:  # a byte of the samples file, anywhere
                data = bytearray(original[samples])
                data[rng.randrange(len(data))] = rng.choice(b'{}[]",:0123456789-eE. \\x\x00\xff')
                samples.write_bytes(bytes(data))
            else:
                lines = original[samples].decode().splitlines()
                samples.write_text("\n".join(sample_mutation(lines, rng)) + "\n")
            if any(changed(original[path], path.read_bytes()) for path in original):
                break
        cases.append(str(folder))
    return cases




def adopt_each(cases: list, lock, cache, cwd: Path) -> dict:
    """Every case adopted in one process (tests/support/adopt_many.py): {case: {code, stderr, stdout}}."""
    from support.processes import run_script

    report = cwd / "codes.json"
    done = run_script(str(Path(__file__).resolve().parent / "adopt_many.py"), report, lock, cache, *cases,
                      cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(report.read_text())


def misbehaved(codes: dict, allowed=lambda case: (1, 2)) -> dict:
    """The cases whose exit code allowed(case) does not hold, or that printed a traceback or our bug's message."""
    return {case: found for case, found in codes.items() if found["code"] not in allowed(case)
            or "Traceback" in found["stderr"] or "internal error" in found["stderr"]}


def claim_dtype(raw: dict, task: str, dtype: str) -> None:
    """Every place a results file states its dtype, as a forger edits it: model_dtype, model_args (0.4.9.2's string,
    0.4.13's dict) and the task metadata lm-eval merges model_args into."""
    raw["config"]["model_dtype"] = f"torch.{dtype}"
    if isinstance(raw["config"]["model_args"], dict):
        raw["config"]["model_args"]["dtype"] = dtype
    else:
        raw["config"]["model_args"] = raw["config"]["model_args"].replace("dtype=float32", f"dtype={dtype}")
    metadata = raw["configs"][task].get("metadata")
    if isinstance(metadata, dict) and "dtype" in metadata:
        metadata["dtype"] = dtype
