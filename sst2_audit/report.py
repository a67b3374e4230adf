"""The console summary of a run."""

from .numeric import one_line
from .records import RunRecord


def _pct(summary) -> str:
    return f"{summary.correct}/{summary.rows} = {summary.accuracy:.4f} (stderr {summary.stderr:.4f})"


def run_summary(record: RunRecord, out, private) -> str:
    lines = []
    if record.demo:
        lines.append("*** " + record.notice + " ***")
    lines += [
        f"run {record.run_name}: task {record.task}, profile {record.profile}, {record.mode} mode, "
        f"{len(record.questions)} dev rows "
        f"({len(record.split.confirm)} confirmation rows sealed, never scored)",
        f"  official (lm-eval {record.evaluator['version']} simple_evaluate): accuracy {_pct(record.official)}",
        f"  independent (own float32 forward):            accuracy {_pct(record.independent)}",
        *([f"  acc_norm: official {_pct(record.official_norm)}, independent {_pct(record.independent_norm)}"]
          if record.official_norm is not None else []),
        f"  max abs diff over {sum(len(q.official_scores) for q in record.questions)} candidate scores: "
        f"{record.max_abs_diff!r}",
        f"  identity checks passed: {record.identity_checks_passed}/{len(record.questions)} logged samples "
        "(doc_id, doc/prompt hash, target, candidates, token boundary)",
        f"  predictions: {record.official.predictions}; labels: {record.labels}",
        f"  time {record.timings['total']:.1f} s (" + ", ".join(
            f"{k} {v:.1f}" for k, v in record.timings.items() if k != "total")
        + f"; the two paths run concurrently); peak RSS {record.peak_rss_bytes:,} bytes",
        f"  numeric platform: {one_line(record.platform)}",
        f"  lock fully hashed: {'yes' if record.lock_fully_hashed else 'no'}",
        f"  public records: {out}   private records (text, prompts, token ids): {private}",
    ]
    return "\n".join(lines)
