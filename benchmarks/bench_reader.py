"""How the strict reader of a plain lm-eval run scales with its samples file (issue 62: a leaderboard model's MMLU-Pro
samples file is about 378 MB, 12,032 rows of about 31 KB: ten candidates, each logging the same 5-shot context).

Two shapes, both from the real lm-eval 0.4.4 run of tests/data/lm-eval-0.4.4 (our demo text only):
- `sst2`: its lines repeated under new doc_ids (two candidates, a one-sentence prompt: about 1 KB a row);
- `leaderboard`: each line widened to the leaderboard's MMLU-Pro shape (ten candidates " A".." J", a context of
  about 3 KB of demo sentences repeated per candidate, ten options in the doc, lm-eval's stringified responses).
Each file is read twice, each in a process of its own: the floor (`json.loads` of every line, nothing kept) and
formats/lm_eval_output.py::read_plain_files (strict JSON, every field typed, the text reduced to digests). Printed
side by side: rows, seconds, rows per second, the reader's time over the floor's, and the peak RSS of each process
with the RSS it had before reading (the interpreter and the imports):

    .venv/bin/python benchmarks/bench_reader.py --shape leaderboard --sizes 25,100,400
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "data" / "lm-eval-0.4.4"
LETTERS = "ABCDEFGHIJ"


def _widened(line: dict, demo: list, row: int) -> dict:
    """One 0.4.4 line in the leaderboard's MMLU-Pro shape: ten candidates sharing a ~3 KB context."""
    shots = "".join(f"{demo[(row + k) % len(demo)]}\nAnswer: {LETTERS[k % 10]}\n\n" for k in range(40))[:3000]
    context = shots + line["arguments"]["gen_args_0"]["arg_0"]
    score = line["resps"][0][0][0]
    doc = dict(line["doc"], options=[f"{demo[(row + k) % len(demo)]}" for k in range(10)])
    return dict(line, doc=doc, arguments={f"gen_args_{k}": {"arg_0": context, "arg_1": f" {LETTERS[k]}"}
                                          for k in range(10)},
                resps=[[[score, "False"]] for _ in range(10)], filtered_resps=[[score, "False"] for _ in range(10)])


def _build(folder: Path, megabytes: int, shape: str) -> tuple[Path, Path, int]:
    results = next(RUN.glob("results_*.json"))
    lines = [json.loads(line) for line in next(RUN.glob("samples_*")).read_text().splitlines()]
    demo = [line["doc"]["sentence"] for line in lines]
    samples = folder / next(RUN.glob("samples_*")).name
    rows, written = 0, 0
    with samples.open("w") as handle:
        while written < megabytes << 20:
            line = dict(lines[rows % len(lines)], doc_id=rows)
            text = json.dumps(_widened(line, demo, rows) if shape == "leaderboard" else line, ensure_ascii=False)
            handle.write(text + "\n")
            written, rows = written + len(text.encode()) + 1, rows + 1
    (folder / results.name).write_bytes(results.read_bytes())
    return folder / results.name, samples, rows


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _read(which: str, results: str, samples: str) -> None:
    sys.path.insert(0, str(REPO))
    from sst2_audit.formats.lm_eval_output import read_plain_files

    before = _rss()
    start = time.perf_counter()
    if which == "floor":
        with open(samples, "rb") as handle:
            rows = sum(1 for line in handle if json.loads(line) is not None)
    else:
        rows = len(read_plain_files(Path(results), Path(samples), "sst2", ("acc",), public=False).samples)
    seconds = time.perf_counter() - start
    print(json.dumps({"rows": rows, "seconds": seconds, "before": before, "peak_rss": _rss()}))


def _child(which: str, results: Path, samples: Path) -> dict:
    done = subprocess.run([sys.executable, __file__, "--read", which, str(results), str(samples)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="25,100,400", help="samples file sizes in MB, comma-separated")
    parser.add_argument("--shape", choices=("leaderboard", "sst2"), default="leaderboard")
    parser.add_argument("--read", nargs=3, help=argparse.SUPPRESS)  # the child: floor|reader, results, samples
    args = parser.parse_args()
    if args.read:
        _read(*args.read)
        return
    print(f"shape {args.shape}; RSS in MB: before reading -> peak")
    print(f"{'MB':>5} {'rows':>8} {'floor s':>8} {'reader s':>9} {'ratio':>6} {'rows/s':>8} "
          f"{'floor RSS':>13} {'reader RSS':>13}")
    for megabytes in (int(size) for size in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="sst2-audit-bench-reader-") as scratch:
            results, samples, rows = _build(Path(scratch), megabytes, args.shape)
            floor, reader = _child("floor", results, samples), _child("reader", results, samples)
            assert floor["rows"] == reader["rows"] == rows, (floor, reader, rows)
            print(f"{samples.stat().st_size / 2**20:5.0f} {rows:8d} {floor['seconds']:8.2f} {reader['seconds']:9.2f} "
                  f"{reader['seconds'] / floor['seconds']:6.2f} {rows / reader['seconds']:8.0f} "
                  f"{floor['before'] / 2**20:5.0f} ->{floor['peak_rss'] / 2**20:5.0f} "
                  f"{reader['before'] / 2**20:5.0f} ->{reader['peak_rss'] / 2**20:5.0f}")


if __name__ == "__main__":
    main()
