"""The console summary of a run: a fixed-width table a person reads, or JSON for scripts."""

from sst2_audit.protocol.numeric import one_line
from sst2_audit.formats.records import PATHS, RunRecord
from sst2_audit.scoring.summaries import interval

WIDTH = 22  # the label column


def _accuracy(summary) -> str:
    if summary.correct is None:  # mc2, f1, mcc: no count of right answers
        return f"{summary.value:.4f} ({summary.rows} rows)"
    return f"{summary.correct}/{summary.rows} = {summary.value:.4f}"


def _interval(summary, metric: str) -> str:
    low, high = interval(summary, metric)
    return f"{low:.4f} - {high:.4f}"


def _row(label: str, *cells) -> str:
    return f"  {label:<{WIDTH}}" + "".join(f"{cell:<30}" for cell in cells).rstrip()


def _wrapped(label: str, text: str, width: int = 96) -> list:
    """A long value on several lines, broken between words, continued under the value column."""
    import textwrap

    lines = textwrap.wrap(text, width) or [""]
    return [_row(label, lines[0])] + [_row("", line) for line in lines[1:]]


def _metric_rows(record: RunRecord) -> list:
    """Per metric, in the task's order, each named (acc_norm is not called accuracy where it is the headline)."""
    lines = []
    for metric in record.metrics:
        official, independent = (record.summaries[path][metric] for path in PATHS)
        name = f"accuracy ({metric})" if official.correct is not None else metric
        lines += [_row(name, _accuracy(official), _accuracy(independent)),
                  _row("95% interval (Wilson)" if official.correct is not None else "95% interval (normal)",
                       _interval(official, metric), _interval(independent, metric))]
    return lines


def run_summary(record: RunRecord, out, private) -> str:
    candidates = sum(len(q.scores["official"]) for q in record.questions)
    equal = sum(a == b for q in record.questions for a, b in zip(*(q.scores[path] for path in PATHS)))
    official = record.summaries["official"][record.metrics[0]]
    lines = [f"*** {record.notice} ***"] if record.demo else []
    lines += [
        f"run {record.run_name}: task {record.task}, profile {record.profile}, {record.mode} mode, "
        + (f"{len(record.questions)} confirmation rows (scored once, as pre-registered)" if record.mode == "confirm"
           else f"{len(record.questions)} dev rows ({len(record.split.confirm)} confirmation rows sealed, never "
           "scored)"),
        _row("", f"official (lm-eval {record.evaluator['version']})", "independent (own float32)"),
        *_metric_rows(record),
    ]
    predictions = ", ".join(f"{name} {count}" for name, count in official.predictions.items())
    labels = ", ".join(f"{name} {count}" for name, count in record.labels.items())
    warnings = sum((record.third_party_log or {}).values())
    lines += [
        _row("agreement", f"{equal}/{candidates} candidate scores bit for bit (max abs diff {record.max_abs_diff!r})"),
        _row("identity", f"{record.identity_checks_passed}/{len(record.questions)} logged samples match their rows"),
        *([_row("predictions / labels", f"{predictions} / {labels}")] if official.predictions else []),
        _row("time", f"{record.timings['total']:.1f} s (both paths concurrently)"),
        _row("peak RSS", f"{record.peak_rss_bytes / 1e9:.2f} GB"),
        *_wrapped("numeric platform", one_line(record.platform)),
        _row("public records", f"{out} (report.html)"),
        _row("private records", f"{private} (documents, prompts, token ids; run.log: {warnings} third-party lines)"),
    ]
    return "\n".join(lines)


def quiet_line(record: RunRecord) -> str:
    official, independent = (record.summaries[path][record.metrics[0]] for path in PATHS)
    return (f"{record.run_name}: {record.task} {_accuracy(official)} (independent {_accuracy(independent)}), "
            f"max abs diff {record.max_abs_diff!r}, identity {record.identity_checks_passed}/{len(record.questions)}"
            + (" [DEMO]" if record.demo else ""))


def json_summary(record: RunRecord, out, private) -> dict:
    """What a script needs, with the same numbers as run.json."""
    def path_summary(summary, metric):
        if summary is None:
            return None
        low, high = interval(summary, metric)
        counted = {"accuracy": summary.value} if summary.correct is not None else {}  # mc2, f1, mcc: not accuracies
        return {"value": summary.value, **counted, "correct": summary.correct, "rows": summary.rows,
                "stderr": summary.stderr, ("wilson_95" if summary.correct is not None else "normal_95"): [low, high]}

    return {
        "run_name": record.run_name, "task": record.task, "profile": record.profile, "mode": record.mode,
        "demo": record.demo, "notice": record.notice,
        # the headline (first) metric per path, then every metric per path
        **{path: path_summary(record.summaries[path][record.metrics[0]], record.metrics[0]) for path in PATHS},
        "metrics": {path: {m: path_summary(s, m) for m, s in record.summaries[path].items()} for path in PATHS},
        "max_abs_diff": record.max_abs_diff, "identity_checks_passed": record.identity_checks_passed,
        "rows": len(record.questions), "seconds": record.timings.get("total"),
        "peak_rss_gb": round(record.peak_rss_bytes / 1e9, 3), "public": str(out), "private": str(private),
    }
