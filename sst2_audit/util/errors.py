"""Errors carry the exit code the entry scripts return (README: Exit codes)."""

class AuditError(Exception):
    """Base class: a one-paragraph message for the user."""

    exit_code = 2


class InputError(AuditError):
    """Bad usage or unreadable/invalid input (exit 2)."""

    exit_code = 2


class CheckFailed(AuditError):
    """A verification check failed (exit 1)."""

    exit_code = 1


def mismatch(what: str, expected, actual, hint: str = "") -> str:
    """One paragraph naming the thing, the expected and the actual value."""
    text = f"{what}: expected {expected!s}, got {actual!s}."
    return f"{text} {hint}".strip()


class InternalError(AuditError):
    """Our own bug or an impossible state (exit 3)."""

    exit_code = 3
