"""Text from untrusted records is shown without terminal control characters."""


def printable(text: str, keep_newlines: bool = False) -> str:
    """Control characters (ESC and friends) are shown as \\xNN escapes, never sent to the terminal."""
    allowed = "\n" if keep_newlines else ""
    return "".join(c if (c.isprintable() or c in allowed) else f"\\x{ord(c):02x}" for c in str(text))
