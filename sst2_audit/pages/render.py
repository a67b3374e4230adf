"""Pages a person reads, rendered from Jinja2 templates (sst2_audit/pages/templates/).

In HTML templates every value printed goes through sanitize.html_text (the one HTML escaper: markup
escaped, control characters shown as escapes) unless it is Markup the code made itself (the SVG
plots); Markdown templates escape each table cell with the `cell` filter. A page is a pure function of its
records, so the audit can regenerate it and compare bytes.
"""

import functools
from pathlib import Path

from sst2_audit.util.sanitize import RUN_NAME, html_text, markdown_cell

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _significant(value, digits: int = 5) -> str:
    """A score for people: `digits` significant digits (the exact value is in run.json)."""
    return f"{value:.{digits}g}"


def _slug(value) -> str:
    """A run name as it is when it is a safe slug (the claims level requires one), else escaped."""
    return value if isinstance(value, str) and RUN_NAME.match(value) else markdown_cell(value).replace("`", "'")


def _short(value, keep: int = 12) -> str:
    text = str(value)
    return text if len(text) <= keep + 3 else text[:keep] + "…"


def _html_value(value):
    from markupsafe import Markup

    return value if isinstance(value, Markup) else html_text(value)


@functools.lru_cache(maxsize=3)
def environment(html: bool = False, plain_cells: bool = False):
    """One environment per medium: `html=True` escapes every printed value with html_text;
    `plain_cells` only to regenerate cards of record schema 1 and 2, written before cells were escaped."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
        autoescape=False, finalize=_html_value if html else None,
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters.update({
        "cell": markdown_cell, "pyrepr": repr,
        "sig": _significant, "short": _short, "slug": _slug,
    })
    if plain_cells:
        env.filters["cell"] = str
    env.globals["zip"] = zip
    return env


def render(template: str, **context) -> str:
    return environment(template.endswith(".html.j2")).get_template(template).render(**context)
