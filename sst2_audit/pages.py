"""Pages a person reads, rendered from Jinja2 templates (sst2_audit/templates/).

HTML templates are autoescaped (every value is text unless a template marks its own markup safe);
Markdown templates escape each table cell with the `cell` filter. A page is a pure function of its
records, so the audit can regenerate it and compare bytes.
"""

import functools
from pathlib import Path

from .sanitize import html_text, markdown_cell, printable

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _significant(value, digits: int = 5) -> str:
    """A score for people: `digits` significant digits (the exact value is in run.json)."""
    return f"{value:.{digits}g}"


def _short(value, keep: int = 12) -> str:
    text = str(value)
    return text if len(text) <= keep + 3 else text[:keep] + "…"


@functools.lru_cache(maxsize=1)
def environment():
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html",), default_for_string=False),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters.update({
        "cell": markdown_cell, "text": html_text, "printable": printable, "pyrepr": repr,
        "sig": _significant, "short": _short,
    })
    env.globals["zip"] = zip
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(**context)
