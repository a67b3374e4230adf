"""study.html: a study's page, a pure function of study.json (the audit regenerates it and compares)."""

from markupsafe import Markup

from sst2_audit.pages import plots
from sst2_audit.pages.render import render


def render_study(record) -> str:
    numbers = record.numbers
    variants = tuple(v.profile for v in record.variants)
    paired = [numbers["paired"].get(name) for name in variants]
    plot = plots.study_plot(
        variants, tuple(numbers["values"][name] for name in variants),
        tuple(p["difference"] if p else 0.0 for p in paired),
        tuple(tuple(p["interval"]) if p else None for p in paired),
        tuple(p["differs"] if p else False for p in paired),
        tuple(tuple(q["variants"][name]["margin"] for q in numbers["questions"]) for name in variants),
        numbers["metric"])
    return render("study.html.j2", record=record, numbers=numbers, plot=Markup(plot))
