"""Untrusted text: shown without terminal control characters; names that decide paths are safe slugs."""

import re

SAFE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"  # a file name: no '/', '..', spaces or escapes
RUN_NAME = re.compile(f"^{SAFE_NAME}$")


def printable(text: str, keep_newlines: bool = False) -> str:
    """Control characters (ESC and friends) are shown as \\xNN escapes, never sent to the terminal."""
    allowed = "\n" if keep_newlines else ""
    return "".join(c if (c.isprintable() or c in allowed) else f"\\x{ord(c):02x}" for c in str(text))
