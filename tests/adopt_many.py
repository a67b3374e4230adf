"""Adopt many lm-eval output folders in one process (forked from the warm interpreter): the generated mutations
of tests/test_adopt.py. argv: REPORT LOCK CACHE FOLDER...; writes {folder: {code, stderr}} to REPORT."""

import contextlib
import io
import json
import sys
import tempfile

from sst2_audit.cli import adopt_main


def main(report: str, lock: str, cache: str, *folders: str) -> None:
    found = {}
    for folder in folders:
        out, err = io.StringIO(), io.StringIO()
        with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = adopt_main([folder, "--lock", lock, "--profile", "embedded", "--cache", cache, "--seed", "1",
                               "--out", f"{scratch}/adopted"])
        found[folder] = {"code": code, "stderr": err.getvalue()[-2000:], "stdout": out.getvalue()[:300]}
    with open(report, "w") as handle:
        json.dump(found, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
