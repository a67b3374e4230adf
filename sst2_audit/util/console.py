"""A quiet console: our progress and summary on the terminal, every third-party line in the run's log.

During a run, file descriptors 1 and 2 point at `run.log` in the private folder (third-party
messages may quote a document), so lm-eval's, transformers' and datasets' warnings and bars never
reach the terminal, whatever library printed them; our own lines go to the saved terminal. The
known warnings are counted by name into run.json and listed in report.html.
"""

import json
import os
import sys
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from sst2_audit.util import progress

LOG_FILE = "run.log"
# (what the report calls it, text that identifies it in the log): all are expected and harmless here.
KNOWN_WARNINGS = (
    ("lm-eval: metric without an aggregation, default mean used", "is defined, but aggregation is not"),
    ("lm-eval: metric without higher_is_better, default True used", "is defined, but higher_is_better is not"),
    ("lm-eval: `pretrained` is a model object, not a name", "`pretrained` model kwarg is not of type `str`"),
    ("lm-eval: an already-initialized model was passed", "Passed an already-initialized model through `pretrained`"),
    ("lm-eval: num_fewshot set to the lock's value", "Overwriting default num_fewshot"),
    ("transformers: tokenizer legacy-behaviour notice", "You are using the default legacy behaviour"),
    ("progress-bar updates (tqdm)", "%|"),
    ("lm-eval: the f1 / mcc bootstrap started", "bootstrapping for stddev:"),
    # a resample without class 1 has f1 0/0: scikit-learn warns and gives 0.0, as corpus.f1_binary does
    ("scikit-learn: f1 ill-defined on a resample, 0.0 used", "UndefinedMetricWarning: F-score is ill-defined"),
    ("scikit-learn: the source line of that warning", "_warn_prf(average, modifier"),
)
QUIET_ENVIRONMENT = {"TQDM_DISABLE": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}


@contextmanager
def captured(log_path: Path):
    """Point fds 1 and 2 at log_path for the block; progress lines keep going to the terminal."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved_out, saved_err = os.dup(1), os.dup(2)
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    with open(log_path, "a", encoding="utf-8") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        previous = progress.set_stream(terminal)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved_out, 1)
            os.dup2(saved_err, 2)
            os.close(saved_out)
            os.close(saved_err)
            progress.set_stream(previous)
            terminal.close()


_VERDICT: dict = {"command": None, "stream": None, "emitted": False}  # `--format json`: one object per command


@contextmanager
def verdict_as_json(command: str):
    """`--format json`: stdout carries exactly one JSON verdict object (emit_verdict); everything else the command
    prints goes to stderr, so a pipeline reads stdout whole."""
    _VERDICT.update(command=command, stream=sys.stdout, emitted=False)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        _VERDICT.update(command=None, stream=None)


def json_command() -> str | None:
    """The command whose verdict is printed as JSON, or None (the console's words)."""
    return _VERDICT["command"]


def emit_verdict(verdict: dict) -> None:
    """The verdict object on the real stdout, once (an error after the verdict keeps the first)."""
    if _VERDICT["stream"] is None or _VERDICT["emitted"]:
        return
    _VERDICT["emitted"] = True
    _VERDICT["stream"].write(json.dumps(verdict, indent=2, ensure_ascii=True, allow_nan=False) + "\n")
    _VERDICT["stream"].flush()


def count_known(log_path: Path) -> dict:
    """{warning name: lines}, plus "other lines" for anything unrecognised (read it in the log)."""
    text = Path(log_path).read_text(encoding="utf-8", errors="replace") if Path(log_path).exists() else ""
    counts = {name: 0 for name, _ in KNOWN_WARNINGS}
    other = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        for name, marker in KNOWN_WARNINGS:
            if marker in line:
                counts[name] += 1
                break
        else:
            other += 1
    counts["other lines"] = other
    return {name: count for name, count in counts.items() if count}
