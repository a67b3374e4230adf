"""How the strict reader of a plain lm-eval run scales with its samples file (issue 62: a leaderboard model's MMLU-Pro
samples file is about 378 MB): the real lm-eval 0.4.4 run of tests/data/lm-eval-0.4.4, its lines repeated under new
doc_ids into samples files of the sizes asked for, each read by formats/lm_eval_output.py::read_plain_files in a
process of its own; prints the size, the rows, the seconds and the peak RSS side by side, and the ratio of peak RSS
to file size:

    .venv/bin/python benchmarks/bench_reader.py --sizes 25,100,400
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


def _build(folder: Path, megabytes: int) -> tuple[Path, Path, int]:
    results = next(RUN.glob("results_*.json"))
    lines = [json.loads(line) for line in next(RUN.glob("samples_*")).read_text().splitlines()]
    samples = folder / next(RUN.glob("samples_*")).name
    rows, written = 0, 0
    with samples.open("w") as handle:
        while written < megabytes << 20:
            line = dict(lines[rows % len(lines)], doc_id=rows)
            text = json.dumps(line, ensure_ascii=False) + "\n"
            handle.write(text)
            written, rows = written + len(text.encode()), rows + 1
    (folder / results.name).write_bytes(results.read_bytes())
    return folder / results.name, samples, rows


def _read(results: str, samples: str) -> None:
    sys.path.insert(0, str(REPO))
    from sst2_audit.formats.lm_eval_output import read_plain_files

    start = time.perf_counter()
    output = read_plain_files(Path(results), Path(samples), "sst2", ("acc",), public=False)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rows": len(output.samples), "seconds": round(seconds, 2), "peak_rss": peak}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="25,100,400", help="samples file sizes in MB, comma-separated")
    parser.add_argument("--read", nargs=2, help=argparse.SUPPRESS)  # the child: results and samples to read
    args = parser.parse_args()
    if args.read:
        _read(*args.read)
        return
    print(f"{'MB':>6} {'rows':>9} {'seconds':>8} {'peak RSS GB':>12} {'RSS / file':>10}")
    for megabytes in (int(size) for size in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="sst2-audit-bench-reader-") as scratch:
            results, samples, rows = _build(Path(scratch), megabytes)
            done = subprocess.run([sys.executable, __file__, "--read", str(results), str(samples)],
                                  capture_output=True, text=True, check=True)
            found = json.loads(done.stdout.splitlines()[-1])
            size = samples.stat().st_size
            print(f"{size / 2**20:6.0f} {found['rows']:9d} {found['seconds']:8.2f} {found['peak_rss'] / 1e9:12.2f} "
                  f"{found['peak_rss'] / size:10.2f}")


if __name__ == "__main__":
    main()
