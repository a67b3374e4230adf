"""Benchmark: what a hostile input costs before it is refused (issue 28: the limit to beat is 1 s, 200 MB).

Each input is built here from the committed reference bundle and the shipped lock, then handed to the
command in a fresh process that times the command's own work (after Python and the package imported)
and reports its peak memory (VmHWM). Prints one line per input and the slowest and largest; exit 1 when
an input was not refused (exit 1 or 2) or crossed a limit.

Usage: python benchmarks/bench_hostile.py [--cache .test-cache/embedded]
"""

import argparse
import gzip
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REFERENCE = REPO / "results" / "embedded-full-reference.tar.gz"
TOP = "embedded-full-reference"
LIMIT_SECONDS, LIMIT_BYTES = 1.0, 200e6

PROBE = """
import re, sys, time
sys.path.insert(0, {repo!r})
from sst2_audit import cli
start = time.perf_counter()
code = getattr(cli, {entry!r})({argv!r})
seconds = time.perf_counter() - start
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) * 1024
print("RESULT", code, seconds, peak)
"""


def members() -> dict:
    with tarfile.open(REFERENCE) as archive:
        return {m.name.split("/", 1)[1]: archive.extractfile(m).read() for m in archive.getmembers() if m.isfile()}


def pack(target: Path, contents: dict, top: str = TOP, change=None) -> Path:
    contents = dict(contents)
    contents["SHA256SUMS"] = "".join(f"{hashlib.sha256(b).hexdigest()}  {n}\n" for n, b in sorted(contents.items())
                                     if n != "SHA256SUMS").encode()
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for name, body in sorted(contents.items()):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(body)
            if change:
                change(info)
            archive.addfile(info, io.BytesIO(body))
    target.write_bytes(gzip.compress(raw.getvalue()))
    return target


def cases(scratch: Path, cache: Path) -> dict:
    base = members()
    lock = json.loads((REPO / "resources.lock.json").read_text())
    evil = scratch / "evil.yaml"
    evil.write_text("task: sst2\nx: !!python/object/apply:os.system ['true']\n")
    lock["evaluator"]["files"][str(evil)] = hashlib.sha256(evil.read_bytes()).hexdigest()
    lock["evaluator"]["tasks"]["sst2"] = lock["evaluator"]["task_yaml"] = str(evil)
    (scratch / "escaping.lock.json").write_text(json.dumps(lock))
    record = json.loads(base["run.json"])
    record["notice"] = "x" * (15 << 20)  # a 15 MB value: a finding names it, never builds its repr
    big = dict(base, **{"run.json": json.dumps(record).encode()})
    # bundles whose SHA256SUMS match (pack writes them) and whose record a level refuses: a forged number
    # (arithmetic) and a forged setting (claims), each in a default audit
    number = json.loads(base["run.json"])
    number["summaries"]["official"]["acc"]["correct"] += 1
    setting = json.loads(base["run.json"])
    setting["settings"]["num_fewshot"] = 5
    forged_number = dict(base, **{"run.json": json.dumps(number).encode()})
    forged_setting = dict(base, **{"run.json": json.dumps(setting).encode()})
    forged_lock = json.loads(base["resources.lock.json"])
    forged_lock["notice"] = "independently verified"
    forged = dict(base, **{"resources.lock.json": json.dumps(forged_lock).encode()})
    data = scratch / "data"
    data.mkdir()
    (data / "train.jsonl").write_text("")
    with open(data / "validation.jsonl", "wb") as handle:
        handle.truncate(2 << 30)
    deep = scratch / "deep"
    deep.mkdir()
    (deep / "train.jsonl").write_text('{"a": 1}\n')
    (deep / "validation.jsonl").write_text("[" * 100_000 + "\n")
    model = cache / "model"
    audit, pin = "audit_main", "prepare_main"
    return {
        "lock: evaluator path outside the package": (audit, ["--lock", str(scratch / "escaping.lock.json"),
                                                             "--bundle-file", str(REFERENCE), "--structural",
                                                             "--cache", str(cache)]),
        "bundle: setuid, world-writable members": (audit, ["--bundle-file", str(pack(
            scratch / "mode.tar.gz", base, change=lambda info: setattr(info, "mode", 0o6777))), "--structural",
            "--cache", str(cache)]),
        "bundle: top folder --to-command": (audit, ["--bundle-file", str(pack(scratch / "top.tar.gz", base,
                                                                              top="--to-command=x")), "--structural"]),
        "bundle: a 15 MB JSON value": (audit, ["--bundle-file", str(pack(scratch / "big.tar.gz", big)),
                                               "--cache", str(cache)]),
        "bundle: a lock that is not the reviewer's (default audit)": (audit, ["--bundle-file", str(pack(
            scratch / "forged.tar.gz", forged)), "--cache", str(cache)]),
        "bundle: sums pass, a forged number (arithmetic)": (audit, ["--bundle-file", str(pack(
            scratch / "number.tar.gz", forged_number)), "--cache", str(cache)]),
        "bundle: sums pass, a forged setting (claims)": (audit, ["--bundle-file", str(pack(
            scratch / "setting.tar.gz", forged_setting)), "--cache", str(cache)]),
        **adopt_cases(scratch, cache),
        "pin: a 2 GiB sparse JSONL": (pin, ["--pin", "x", "--task", "rte", "--model", str(model), "--data", str(data),
                                            "--new-lock", str(scratch / "locks" / "x.lock.json")]),
        "pin: a JSONL line of 100,000 [": (pin, ["--pin", "y", "--task", "rte", "--model", str(model), "--data",
                                                  str(deep), "--new-lock", str(scratch / "locks" / "y.lock.json")]),
        "pin: profile name ../../x": (pin, ["--pin", "../../x", "--task", "rte", "--model", str(model), "--data",
                                            str(deep), "--new-lock", str(scratch / "locks" / "z.lock.json")]),
    }


def adopt_cases(scratch: Path, cache: Path) -> dict:
    """lm-eval output folders as `sst2-audit adopt` reads them, hostile: a results file of 200,000 nested
    brackets, a samples file with a 15 MB value, a results file whose config another release logged."""
    cases, date = {}, "2026-12-04T00-00-00.000000"
    results = {"results": {"sst2": {"alias": "sst2", "acc,none": 0.5, "acc_stderr,none": 0.1}},
               "configs": {"sst2": {"task": "sst2"}}, "n-shot": {"sst2": 0}, "n-samples": {"sst2": {}},
               "config": {"random_seed": 0, "model_args": "pretrained=x", "model_dtype": "torch.float32"}, "lm_eval_version": "0.4.9.2",
               "transformers_version": "4.0", "task_hashes": {"sst2": "0" * 64}}
    sample = {"doc_id": 1, "doc": {"sentence": "x" * (15 << 20), "label": 0, "idx": 1}, "target": "0",
              "arguments": {"gen_args_0": {"arg_0": "a", "arg_1": " b"}}, "resps": [[["-1.0", "False"]]],
              "filtered_resps": [["-1.0", "False"]], "filter": "none", "metrics": ["acc"], "doc_hash": "0" * 64,
              "prompt_hash": "0" * 64, "target_hash": "0" * 64, "acc": 1.0}
    for name, results_text, samples_text in (
            ("adopt: a results file of 200,000 nested [", "[" * 200_000, ""),
            ("adopt: a samples file with a 15 MB value", json.dumps(results), json.dumps(sample) + "\n"),
            ("adopt: a claimed release and config the lock contradicts", json.dumps(
                dict(results, lm_eval_version="0.4.8")), json.dumps(dict(sample, doc={"x": 1})) + "\n")):
        folder = scratch / f"adopt-{len(cases)}"
        folder.mkdir()
        (folder / f"results_{date}.json").write_text(results_text)
        (folder / f"samples_sst2_{date}.jsonl").write_text(samples_text)
        cases[name] = ("adopt_main", [str(folder), "--profile", "embedded", "--cache", str(cache)])
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=REPO / ".test-cache" / "embedded")
    args = parser.parse_args()
    worst_time, worst_memory, failed = (0.0, ""), (0, ""), []
    with tempfile.TemporaryDirectory() as scratch:
        for name, (entry, argv) in cases(Path(scratch), args.cache.resolve()).items():
            done = subprocess.run([sys.executable, "-c", PROBE.format(repo=str(REPO), entry=entry, argv=argv)],
                                  capture_output=True, text=True, cwd=scratch)
            line = next((l for l in done.stdout.splitlines() if l.startswith("RESULT ")), None)
            if line is None:
                failed.append(f"{name}: no result ({done.stderr[-300:]})")
                continue
            _, code, seconds, peak = line.split()
            seconds, peak = float(seconds), int(peak)
            refused = code in ("1", "2")
            print(f"{name:58s} exit {code}  {seconds:6.3f} s  {peak / 1e6:7.1f} MB peak"
                  + ("" if refused else "  NOT REFUSED"))
            worst_time = max(worst_time, (seconds, name))
            worst_memory = max(worst_memory, (peak, name))
            if not refused or seconds > LIMIT_SECONDS or peak > LIMIT_BYTES:
                failed.append(name)
    print(f"slowest: {worst_time[1]} ({worst_time[0]:.3f} s); largest: {worst_memory[1]} "
          f"({worst_memory[0] / 1e6:.1f} MB); limits {LIMIT_SECONDS} s, {LIMIT_BYTES / 1e6:.0f} MB")
    if failed:
        print("over a limit or not refused: " + "; ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
