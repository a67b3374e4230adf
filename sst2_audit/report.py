"""The console summary of a run: a fixed-width table a person reads, or JSON for scripts."""

from .numeric import one_line
from .records import RunRecord
from .stats import wilson

WIDTH = 22  # the label column


def _accuracy(summary) -> str:
    return f"{summary.correct}/{summary.rows} = {summary.accuracy:.4f}"


def _interval(summary) -> str:
    low, high = wilson(summary.correct, summary.rows)
    return f"{low:.4f} - {high:.4f}"


def _row(label: str, *cells) -> str:
    return f"  {label:<{WIDTH}}" + "".join(f"{cell:<30}" for cell in cells).rstrip()


def run_summary(record: RunRecord, out, private) -> str:
    candidates = sum(len(q.official_scores) for q in record.questions)
    equal = sum(a == b for q in record.questions for a, b in zip(q.official_scores, q.independent_scores))
    lines = [f"*** {record.notice} ***"] if record.demo else []
    lines += [
        f"run {record.run_name}: task {record.task}, profile {record.profile}, {record.mode} mode, "
        f"{len(record.questions)} dev rows ({len(record.split.confirm)} confirmation rows sealed, never scored)",
        _row("", f"official (lm-eval {record.evaluator['version']})", "independent (own float32)"),
        _row("accuracy", _accuracy(record.official), _accuracy(record.independent)),
        _row("95% interval (Wilson)", _interval(record.official), _interval(record.independent)),
    ]
    if record.official_norm is not None:
        lines += [_row("acc_norm", _accuracy(record.official_norm), _accuracy(record.independent_norm)),
                  _row("95% interval (Wilson)", _interval(record.official_norm), _interval(record.independent_norm))]
    predictions = ", ".join(f"{name} {count}" for name, count in record.official.predictions.items())
    labels = ", ".join(f"{name} {count}" for name, count in record.labels.items())
    warnings = sum((record.third_party_log or {}).values())
    lines += [
        _row("agreement", f"{equal}/{candidates} candidate scores bit for bit (max abs diff {record.max_abs_diff!r})"),
        _row("identity", f"{record.identity_checks_passed}/{len(record.questions)} logged samples match their rows"),
        _row("predictions / labels", f"{predictions} / {labels}"),
        _row("time", f"{record.timings['total']:.1f} s (both paths concurrently)"),
        _row("peak RSS", f"{record.peak_rss_bytes / 1e9:.2f} GB"),
        _row("numeric platform", one_line(record.platform)[:110]),
        _row("public records", f"{out} (report.html)"),
        _row("private records", f"{private} (documents, prompts, token ids; run.log: {warnings} third-party lines)"),
    ]
    return "\n".join(lines)


def quiet_line(record: RunRecord) -> str:
    return (f"{record.run_name}: {record.task} {_accuracy(record.official)} (independent {_accuracy(record.independent)}), "
            f"max abs diff {record.max_abs_diff!r}, identity {record.identity_checks_passed}/{len(record.questions)}"
            + (" [DEMO]" if record.demo else ""))


def json_summary(record: RunRecord, out, private) -> dict:
    """What a script needs, with the same numbers as run.json."""
    def path_summary(summary):
        if summary is None:
            return None
        low, high = wilson(summary.correct, summary.rows)
        return {"accuracy": summary.accuracy, "correct": summary.correct, "rows": summary.rows,
                "stderr": summary.stderr, "wilson_95": [low, high]}

    return {
        "run_name": record.run_name, "task": record.task, "profile": record.profile, "mode": record.mode,
        "demo": record.demo, "notice": record.notice,
        "official": path_summary(record.official), "independent": path_summary(record.independent),
        "official_acc_norm": path_summary(record.official_norm),
        "independent_acc_norm": path_summary(record.independent_norm),
        "max_abs_diff": record.max_abs_diff, "identity_checks_passed": record.identity_checks_passed,
        "rows": len(record.questions), "seconds": record.timings.get("total"),
        "peak_rss_gb": round(record.peak_rss_bytes / 1e9, 3), "public": str(out), "private": str(private),
    }
