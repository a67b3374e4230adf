"""report.html: one self-contained page per run (no network, no JavaScript), from templates/report.html.j2.

The page leads with the answer: what was checked and passed, the accuracy of each path and metric
with its interval, the plots; then the checks, the pins (rounded for people, exact values on hover
and in run.json), and every question. The public page carries ids, hashes, scores and counts, never
text of the data; the private variant (written to --private) adds each question's document as a
field table. The page is a pure function of the run record and the lock: the audit regenerates it and
compares it byte for byte when the page is of the design this version renders (PAGE_DESIGN); a page of
another design is labelled the submitter's claim (audit/claims.py), so the design can change without a
record migration.
"""

import re

from markupsafe import Markup

from sst2_audit.formats.records import PATHS, RECORD_SCHEMA_VERSION, SCHEMA_PAGE_5
from sst2_audit.pages.card import card_fields, card_id, claims
from sst2_audit.pages.plots import margin_plot
from sst2_audit.pages.render import render as render_page
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.scoring.summaries import choice_names, interval
from sst2_audit.task.fewshot import shown_as_shots


def margin(values: list, gold: int) -> float:
    """Gold's value minus the best other candidate's: above 0 the gold answer wins."""
    others = [s for i, s in enumerate(values) if i != gold]
    return values[gold] - max(others) if others else 0.0


def _accuracy_rows(record) -> list:
    rows = []
    for number, metric in enumerate(record.metrics):
        for path in PATHS:
            summary = record.summaries[path][metric]
            low, high = interval(summary, metric)
            counted = summary.correct is not None  # mc2, f1, mcc: no count of right answers
            name = (f"{path} {metric}" if number or not counted else
                    ("official (lm-eval)" if path == "official" else path))
            rows.append([name, f"{summary.correct}/{summary.rows}" if counted else f"({summary.rows} rows)",
                         f"{summary.value:.4f}", f"{summary.stderr:.4f}",
                         f"{low:.4f} – {high:.4f}" + ("" if counted else " (normal)")])
    return rows


def _shots_seen(record) -> list:
    """Scored questions shown (with their answers) as another question's shot: only when the shots come
    from the evaluated split. Informational: lm-eval's own rule, counted so a reader can weigh it."""

    if not record.settings.get("shots_from_evaluated_split"):
        return []
    return [("scored questions also shown as another question's shot (shots from the evaluated split)",
             f"{len(shown_as_shots(record.questions))} of {len(record.questions)}", True)]


def _checks(record) -> list:
    """(check, result, passed): a run page exists only for a run whose every check passed."""
    n = len(record.questions)
    candidates = sum(len(q.scores["official"]) for q in record.questions)
    equal = sum(a == b for q in record.questions for a, b in zip(*(q.scores[p] for p in PATHS)))
    return [
        ("cached files re-hashed against the lock before loading", f"{len(record.resources)} files", True),
        ("pinned lm-eval files verified (code and the task's YAML)", f"{record.evaluator['files_verified']} files",
         True),
        ("logged samples match their dataset rows (doc_id, doc hash, prompt hash, target, candidates, token boundary)",
         f"{record.identity_checks_passed}/{n}", record.identity_checks_passed == n),
        ("candidate scores equal bit for bit on both paths",
         f"{equal}/{candidates} (max abs diff {record.max_abs_diff!r})", equal == candidates),
        ("confirmation rows scored once, as pre-registered (the confirmation record cites the pre-registration)"
         if record.mode == "confirm" else
         "confirmation rows sealed (never scored nor shown as a shot; row hashes recorded)",
         str(len(record.split.confirm)), True),
        *_shots_seen(record),
        *[(f"shared pinned code, not re-derived: {code['step']} ran {code['file']}::{code['function']} on both paths "
           "(its sha256 checked against the lock)", code["sha256"][:12], True)
          for code in record.evaluator.get("shared_code", [])],
    ]


def _shown(value) -> tuple:
    """(what a person reads, the exact value for the hover title or None)."""
    if isinstance(value, bool):
        return ("yes" if value else "no"), None
    if isinstance(value, float):  # a statistic rounded to 4 decimals; a short value (1.0, 0.0) as it is
        return (repr(value), None) if len(repr(value)) <= 8 else (f"{value:.4f}", repr(value))
    text = str(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):  # a sha256
        return text[:12] + "…", text
    return text, None


def _pins(fields: dict) -> list:
    return [(key, *_shown(value)) for key, value in fields.items()]


def _settings(settings: dict) -> list:
    rows = []
    for key, value in sorted(settings.items()):
        if key.endswith("_note"):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "(none: the CPU's native mode)"
        rows.append((key, *_shown(value)))
    return rows


def _shown_value(metric: str, q, names: list) -> tuple:
    """(cell, right): an argmax metric's predicted choice and whether it is the gold one; a value metric's
    value (mc2) and None (no right or wrong)."""
    entry, official = METRICS[metric], q.scores["official"]
    if entry.argmax:
        return names[q.predictions["official"][metric]], q.predictions["official"][metric] == q.label
    return f"{entry.value(official, q):.4f}", None


def _questions(record, names: list, docs: dict | None, closest_first: bool) -> list:
    """The question table's rows: schema 5 on, the closest calls (smallest |margin|) first; before, by signed
    margin (the wrong calls first, the closest in the middle)."""
    headline = METRICS[record.metrics[0]]
    rows = []
    for q in record.questions:
        official = q.scores["official"]
        shown = {m: _shown_value(m, q, names) for m in record.metrics}
        rows.append({
            "idx": q.idx, "gold": names[q.label] if q.label < len(names) else str(q.label),
            "predicted": {m: cell for m, (cell, _) in shown.items()},
            "right": {m: right for m, (_, right) in shown.items()},
            "scores": [(names[i] if i < len(names) else str(i), s) for i, s in enumerate(official)],
            "same": official == q.scores["independent"],
            # a value metric's headline sorts by the value itself: the least mass on true choices first
            "margin": (margin(headline.compare(official, q), q.label) if headline.argmax
                       else headline.value(official, q)),
            "logged_doc_id": q.logged_doc_id,
            "shots": len(q.shots),
            "doc": None if docs is None else list(docs.get(q.idx, {}).items()),
        })
    if closest_first and headline.argmax:
        return sorted(rows, key=lambda row: (abs(row["margin"]), row["idx"]))
    return sorted(rows, key=lambda row: (row["margin"], row["idx"]))


def _plots(record) -> list:
    plots = []
    for metric in (m for m in record.metrics if METRICS[m].argmax):  # a value metric has no margin to plot
        entry = METRICS[metric]
        margins = tuple(margin(entry.compare(q.scores["official"], q), q.label) for q in record.questions)
        right = tuple(q.predictions["official"][metric] == q.label for q in record.questions)
        title = f"{record.task} {metric}: {sum(right)}/{len(right)} right"
        plots.append((metric, entry.what, Markup(margin_plot(margins, right, title, len(margins) > PAGE_ROWS))))
    return plots


def _confusion(record, names: list) -> list:
    metric = record.metrics[0]
    if not METRICS[metric].argmax:  # a value metric predicts no choice
        return []
    counts = [[0] * len(names) for _ in names]
    for q in record.questions:
        counts[q.label][q.predictions["official"][metric]] += 1
    return [(names[gold], row) for gold, row in enumerate(counts)]


# The page design this version renders. Changing the page's look bumps it: pages then state their design
# (<meta name="sst2-audit-page-design">), and the audit labels a page of any other design the submitter's claim
# instead of comparing its bytes. Design 1 states none: the pages of record schema 4 to 7; record schema 3's
# page had a design of its own (0), which this version no longer renders.
PAGE_DESIGN = 1
OLDEST_SCHEMA = 4  # the oldest record schema whose page is of design 1
_DESIGN_MARK = re.compile(r'<meta name="sst2-audit-page-design" content="([0-9]{1,6})">')


def page_design(page: str, written_schema: int) -> int:
    """The design a page states (the first 2,000 characters: the head), else its record schema's."""
    stated = _DESIGN_MARK.search(page[:2000])
    if stated:
        return int(stated.group(1))
    return 1 if written_schema >= OLDEST_SCHEMA else 0


# The question table shows at most this many rows, the closest calls first: a full split's page stays readable
# (10,000 rows would be 5.6 MB of table); run.json holds every row. No page of 1,000 rows or fewer changes, and no
# earlier version made a run of more, so the design stays 1.
PAGE_ROWS = 1_000


def render(record, lock, spec, docs: dict | None = None, written_schema: int = RECORD_SCHEMA_VERSION) -> str:
    """The run's page (design PAGE_DESIGN); `docs` ({idx: document}) only for the private variant. A record
    read from an older schema gets the fields its schema had (the card's, the claimed platform)."""
    if written_schema < OLDEST_SCHEMA:
        raise ValueError(f"record schema {written_schema}'s page design is not rendered by this version")
    fields, names = card_fields(record, lock, written_schema), list(choice_names(spec, record.questions))
    claimed, checks = claims(record, written_schema), _checks(record)
    questions = _questions(record, names, docs, written_schema >= SCHEMA_PAGE_5)
    return render_page(
        "report.html.j2", record=record, card_id=card_id(fields, claimed), private=docs is not None,
        claims=_pins(claimed),
        checks=checks, passed=all(ok for _, _, ok in checks), accuracy=_accuracy_rows(record), plots=_plots(record),
        pins=_pins(fields), settings=_settings(record.settings), names=names, confusion=_confusion(record, names),
        questions=questions[:PAGE_ROWS], more=max(0, len(questions) - PAGE_ROWS), headline=record.metrics[0],
        schema5=written_schema >= SCHEMA_PAGE_5, design=PAGE_DESIGN,
        shots=record.settings.get("num_fewshot", 0),
    )


SHOWN_MISMATCHES = 10  # the page answers first; failure.json holds every sample


def render_failure(failure, notice: str | None = None) -> str:
    """The page of a run that stopped: what failed in one sentence, why (--unsorted-ids reproduces #4084 on
    purpose), what to do, which fields differed and how often, the first few samples, the run's settings."""
    import collections

    counts = collections.Counter(field for m in failure.mismatches for field in (m.fields or ["(whole record)"]))
    hidden = set()
    # "doc_hash (of the logged doc)" repeats "doc_hash" where both name the same hash: shown once
    if all(m.expected.get("doc_hash (of the logged doc)") == m.expected.get("doc_hash") and
           m.logged.get("doc_hash (of the logged doc)") == m.logged.get("doc_hash") for m in failure.mismatches):
        counts.pop("doc_hash (of the logged doc)", None)
        hidden.add("doc_hash (of the logged doc)")
    on_purpose = failure.settings.get("doc_id_order") == "hash order (unsorted)"
    summary = failure.message if len(failure.message) <= 400 else failure.message[:400] + " … (failure.json: in full)"
    next_step = ("Run again without --unsorted-ids for a measurement (the default passes the ids sorted, which lm-eval "
                 "labels correctly)." if on_purpose else
                 "Nothing of this run is a measurement. Check that the cache was prepared for this lock and profile "
                 "(sst2-audit prepare --verify), and that the installed lm-eval is the pinned one; failure.json names "
                 "every sample and field. A run that keeps failing this check on sorted ids is a finding: report it.")
    shown = [m for m in failure.mismatches if m.logged_position >= 0][:SHOWN_MISMATCHES] or \
        failure.mismatches[:SHOWN_MISMATCHES]
    return render_page("failure.html.j2", failure=failure, notice=notice, mismatches=shown, summary=summary,
                       on_purpose=on_purpose, next_step=next_step, field_counts=sorted(counts.items()), hidden=hidden,
                       settings=sorted(failure.settings.items()))
