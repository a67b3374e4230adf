"""report.html as runs of record schema 3 wrote it: frozen, so that the audit regenerates those
bundles' pages byte for byte. New runs' pages are pages/html_report.py's (templates/report.html.j2).

One self-contained page per run (no network, no JavaScript), made from the records.

The public page carries ids, hashes, scores and counts, never text of the data; the private
variant (written to --private) adds each question's document. The page is a pure function of the
run record and the lock, so the audit regenerates it and compares it byte for byte.
"""

from sst2_audit.formats.records import PATHS
from sst2_audit.pages.card import card_fields, card_id
from sst2_audit.pages.plots import margin_plot
from sst2_audit.protocol.stats import wilson
from sst2_audit.scoring.summaries import choice_names
from sst2_audit.util.sanitize import html_text


STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:72em;color:#222;line-height:1.4}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.demo{background:#fff3cd;border:1px solid #e0b000;padding:.6em 1em;font-weight:bold}
.fail{background:#fde2e1;border:1px solid #c0392b;padding:.6em 1em}
.ok{color:#1b7f3b}.bad{color:#c0392b}code{font-size:.92em}
"""

def escape(value) -> str:
    """Any value as HTML text (the compare page uses these three helpers too)."""
    return html_text(value)


def table(header: list, rows: list, numeric=()) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    numeric_cell = ' class="n"'
    body = "".join("<tr>" + "".join(f"<td{numeric_cell if i in numeric else ''}>{cell}</td>"
                                    for i, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def page(title: str, body: str) -> str:
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


def margin(scores: list, gold: int) -> float:
    """Gold's score minus the best other candidate's: above 0 the gold answer has the highest score."""
    others = [s for i, s in enumerate(scores) if i != gold]
    return scores[gold] - max(others) if others else 0.0


def _accuracy_row(name: str, summary) -> list:
    low, high = wilson(summary.correct, summary.rows)
    return [escape(name), f"{summary.correct}/{summary.rows}", f"{summary.accuracy:.4f}", f"{summary.stderr:.4f}",
            f"{low:.4f} – {high:.4f}"]


def _confusion(record, names: list) -> str:
    counts = {(g, p): 0 for g in range(len(names)) for p in range(len(names))}
    for q in record.questions:
        predicted = q.predictions["official"][record.metrics[0]]
        counts[(q.label, predicted)] = counts.get((q.label, predicted), 0) + 1
    rows = [[f"<b>{escape(names[g])}</b>"] + [str(counts[(g, p)]) for p in range(len(names))]
            for g in range(len(names))]
    return table(["gold \\ predicted"] + names, rows, numeric=range(1, len(names) + 1))


def _checks(record) -> str:
    candidates = sum(len(q.scores["official"]) for q in record.questions)
    rows = [
        ["cached files re-hashed against the lock before loading", str(len(record.resources))],
        ["pinned lm-eval files verified (code and the task's YAML)", str(record.evaluator["files_verified"])],
        ["logged samples whose doc_id, doc hash, prompt hash, target, candidates and token boundary match the row",
         f"{record.identity_checks_passed}/{len(record.questions)}"],
        ["candidate scores equal bit for bit on both paths (max abs diff)",
         f"{sum(q.scores['official'] == q.scores['independent'] for q in record.questions)}/{len(record.questions)} "
         f"questions, {candidates} scores ({record.max_abs_diff!r})"],
        ["confirmation rows sealed (never scored; their row hashes recorded)", str(len(record.split.confirm))],
    ]
    return table(["check", "count"], [[escape(a), escape(b)] for a, b in rows], numeric=(1,))


def _questions(record, names: list, docs: dict | None) -> str:
    order = sorted(record.questions, key=lambda q: (margin(q.scores["official"], q.label), q.idx))
    header = ["idx", "gold", "prediction", "official scores", "independent scores", "margin", "logged doc_id",
              "identity"]
    if docs is not None:
        header.append("document (private)")
    rows = []
    for q in order:
        official, independent, predicted = q.scores["official"], q.scores["independent"], \
            q.predictions["official"][record.metrics[0]]
        right = predicted == q.label
        row = [str(q.idx), escape(names[q.label] if q.label < len(names) else q.label),
               f"<span class=\"{'ok' if right else 'bad'}\">{escape(names[predicted])}</span>",
               escape(", ".join(repr(s) for s in official)), escape(", ".join(repr(s) for s in independent)),
               f"{margin(official, q.label):+.4f}", str(q.logged_doc_id),
               "ok" if q.logged_doc_id == q.idx and official == independent else "<b>MISMATCH</b>"]
        if docs is not None:
            row.append(escape(docs.get(q.idx, "")))
        rows.append(row)
    return table(header, rows, numeric=(0, 5, 6))


def render(record, lock, spec, docs: dict | None = None, written_schema: int = 3) -> str:
    """The run's page; `docs` ({idx: text}) only for the private variant."""

    fields, names = card_fields(record, lock, written_schema), list(choice_names(spec, record.questions))
    parts = [f"<h1>{escape(record.task)}: run {escape(record.run_name)} ({escape(record.mode)})</h1>"]
    if record.demo:
        parts.append(f"<p class=\"demo\">{escape(record.notice)}</p>")
    if docs is not None:
        parts.append("<p class=\"fail\">PRIVATE: this page shows the documents. Never publish it.</p>")
    parts.append(f"<p>Reproducibility card {escape(card_id(fields))}. Every question scored twice: by lm-eval "
                 f"{escape(record.evaluator['version'])} <code>simple_evaluate</code> (the official path) and by "
                 "sst2-audit's independent float32 scorer; both must agree bit for bit.</p>")
    parts.append("<h2>What was measured, with what</h2>")
    measured = [[escape(k), f"<code>{escape(v)}</code>"] for k, v in fields.items()]
    settings = [f'{k}={v!r}' for k, v in sorted(record.settings.items()) if not k.endswith('_note')]
    measured += [["settings",
                  f"<code>{escape(', '.join(settings))}</code>"]]
    parts.append(table(["field", "value"], measured))
    parts.append("<h2>Accuracy (95% Wilson interval)</h2>")
    rows = [_accuracy_row(f"{path} {metric}" if number else ("official (lm-eval)" if path == "official" else path),
                          record.summaries[path][metric])
            for number, metric in enumerate(record.metrics) for path in PATHS]
    parts.append(table(["path", "correct", "accuracy", "stderr", "95% interval"], rows, numeric=(1, 2, 3)))
    parts.append("<h2>Confusion matrix (official path, acc)</h2>" + _confusion(record, names))
    margins = [margin(q.scores["official"], q.label) for q in record.questions]
    correct = [q.predictions["official"][record.metrics[0]] == q.label for q in record.questions]
    parts.append("<h2>How close the calls were</h2><p>Margin = gold answer's score minus the best other "
                 "candidate's (log-likelihood, nats); green = predicted right, red = wrong.</p>")
    parts.append(margin_plot(tuple(margins), tuple(correct), f"{record.task}: {sum(correct)}/{len(correct)} right"))
    parts.append("<h2>Checks</h2>" + _checks(record))
    if record.lm_eval_notes:
        parts.append("<h2>lm-eval's own output, read correctly</h2>")
        parts.append(table(["field in lm_eval_results.json", "lm-eval says", "true value", "why"],
                            [[f"<code>{escape(n['field'])}</code>", escape(n["lm_eval_says"]), escape(n["truth"]),
                              escape(n["why"])]
                             for n in record.lm_eval_notes]))
    if record.third_party_log:
        parts.append("<h2>Third-party messages kept off the console</h2><p>lm-eval, transformers and datasets "
                     "wrote these to the run's log (<code>run.log</code> in the private folder; a message may quote "
                     "a document). All listed by name are expected here. Informational: the counts are the run's "
                     "own; the audit checks only that each names a known message.</p>")
        parts.append(table(["message", "lines"], [[escape(k), str(v)] for k,
                                                  v in sorted(record.third_party_log.items())],
                            numeric=(1,)))
    parts.append("<h2>Every question, closest calls first</h2>" + _questions(record, names, docs))
    return page(f"sst2-audit report: {record.run_name}", "\n".join(parts))
