"""Adopt many lm-eval (or lighteval) output folders in one process (forked from the warm interpreter): the generated
mutations of tests/audit/test_adopt.py, test_legacy_writer.py and test_lighteval.py. argv: REPORT LOCK CACHE FOLDER...
(FOLDER@structural: that one without the rescore; --profile=NAME before the folders: another profile); writes
{folder: {code, stderr, stdout, read}} to REPORT, `read` the bytes the process read for that case (/proc/self/io's
rchar), its model hash's thread joined first. The adoptions share their loaded model as a corpus pass's runs do
(cli/corpus.py): verified and loaded once."""

import contextlib
import io
import json
import sys
import tempfile
import threading
from pathlib import Path

from sst2_audit.audit.adopt_rescore import MODEL_HASH_THREAD
from sst2_audit.cli import adopt_main


def bytes_read() -> int:
    """What this process has read so far, every thread's (Linux)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["rchar"])


def main(report: str, lock: str, cache: str, *folders: str) -> None:
    found, profile, models = {}, "embedded", {}
    for folder in folders:
        if folder.startswith("--profile="):  # before the folders: another profile of the lock
            profile = folder.partition("=")[2]
            continue
        out, err, before = io.StringIO(), io.StringIO(), bytes_read()
        with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            path, _, how = folder.partition("@")
            code = adopt_main([path, "--lock", lock, "--profile", profile, "--cache", cache, "--seed", "1",
                               "--out", f"{scratch}/adopted",
                               *(["--structural"] if how == "structural" else [])], models=models)
        for thread in threading.enumerate():  # a model hash an adoption left running counts as its reading
            if thread.name.startswith(MODEL_HASH_THREAD):
                thread.join()
        found[folder] = {"code": code, "stderr": err.getvalue()[-2000:], "stdout": out.getvalue()[:300],
                         "read": bytes_read() - before}
    with open(report, "w") as handle:
        json.dump(found, handle)


if __name__ == "__main__":
    main(*sys.argv[1:])
