"""Untrusted text, one helper per medium: the terminal, a Markdown table cell, an HTML page.

Every string a run or bundle carries is a claim that may hold control characters or markup; what
a person reads goes through exactly one of these. Names that decide paths are safe slugs.
"""

import html
import re

SAFE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"  # a file name: no '/', '..', spaces or escapes
RUN_NAME = re.compile(f"^{SAFE_NAME}\\Z")  # \\Z, not $: "$" also matches before a final newline
MARKDOWN_SPECIAL = re.compile(r"([\\|<>\[\]`*_&#!~])")


def printable(text: object, keep_newlines: bool = False) -> str:
    """Control characters (ESC and friends) are shown as \\xNN escapes, never sent to the terminal."""
    allowed = "\n" if keep_newlines else ""
    return "".join(c if (c.isprintable() or c in allowed) else f"\\x{ord(c):02x}" for c in str(text))


def terminal(lines, verdicts=()) -> str:
    """Lines for the console, each escaped on its own: a newline inside a field is shown as \\x0a and can never
    start a line; only the lines given as `verdicts` may start with "VERDICT" (any other is indented)."""
    shown = []
    for line in lines:
        text = printable(line)
        if text.lstrip().startswith("VERDICT") and line not in verdicts:
            text = "  " + text
        shown.append(text)
    return "\n".join(shown)


def markdown_cell(value) -> str:
    """One table cell: no control character or newline (they end the row), markup shown literally
    (a '|' would split the cell, '[x](y)' would be a link, '<b>' HTML)."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", printable(value))


def html_text(value) -> str:
    """Text in an HTML page: escaped markup, control characters shown as escapes (newlines kept)."""
    return html.escape(printable(value, keep_newlines=True), quote=True)
