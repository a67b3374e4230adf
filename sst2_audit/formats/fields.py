"""Rules for two kinds of field a lock states, kept apart from the lock's reading so the task and data
readers can share them: a data resource's columns, and an evaluator path inside the lm_eval package."""

import re

from sst2_audit.util.errors import InputError

COLUMN_TYPES = ("string", "int64", "int32", "list<string>")  # flat types of demo files (JSONL, TSV)
# JSONL demo files may also hold lists and structs of these, written as Arrow prints them
# after a parquet round trip ("struct<text: list<element: string>, label: list<element: string>>", ARC's choices).
# Nested types as Arrow prints them (pinned by prepare.py --pin from the data itself): compared as text.
NESTED_TYPE = re.compile(r"^(bool|double|large_string|(large_list|list|struct)<[A-Za-z0-9_ :,<>]{1,500}>)$")


# One part of a path under the package: the characters lm-eval's own file names use (some have spaces
# or parentheses), never starting with a dot, no separators, no control characters.
PART = re.compile(r"[A-Za-z0-9_(][A-Za-z0-9_.+() \-]{0,199}")


def columns_of(resource) -> tuple:
    """The data resource's columns ((name, type), ...), validated."""
    raw = resource.get("columns") if resource is not None else None
    if raw is None:
        raise InputError("lock: data.columns is missing: a data resource states its columns ([name, type] pairs; "
                         "sst2-audit prepare --pin writes them from the data).")
    if not (isinstance(raw, list) and raw and all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], str) and isinstance(c[1], str)
            and (c[1] in COLUMN_TYPES or NESTED_TYPE.match(c[1])) for c in raw)):
        raise InputError(f"lock: data.columns must be a list of [name, type] with type one of {COLUMN_TYPES} or an "
                         f"Arrow list/struct type as the data file states it, got {str(raw)[:80]!r}.")
    return tuple((name, kind) for name, kind in raw)


def safe_relative(path, where: str) -> str:
    """A lock's evaluator path as given, if it names a file inside the lm_eval package; else exit 2."""
    parts = path.split("/") if isinstance(path, str) else []
    if not (parts and parts[0] == "lm_eval" and len(parts) >= 2 and all(PART.fullmatch(p) for p in parts[1:])
            and len(path) <= 400):
        raise InputError(f"{where}: expected a relative POSIX path inside the lm_eval package (lm_eval/..., no "
                         f"'..', '.', empty, absolute, drive, backslash or URL part), got {str(path)[:120]!r}.")
    return path
