"""What one audit level found: checks made, problems named by row and field (one Finding type)."""

import re
from dataclasses import dataclass, field
from typing import Literal

FindingKind = Literal["mismatch", "failed"]  # an expected value against an actual one; a check that failed in words
ROW = re.compile(r"^(?:row idx|doc_id|question idx|question|row) (-?\d+)\b")  # how the levels name a row


class Finding(str):
    """One problem a level found: its words (what the console, the page and the card print, unchanged) and its
    parts, so that a pipeline filters by level, row, field or kind (`--format json`). A str, so that every
    renderer that printed a problem's words prints a Finding's."""

    level: str
    row: int | None
    where: str
    field: str
    kind: FindingKind
    expected: str | None  # as the words show them: repr, truncated at MAX_SHOWN characters
    actual: str | None

    def __new__(cls, words: str, level: str, kind: FindingKind, where: str = "", field: str = "",
                expected: str | None = None, actual: str | None = None, row: int | None = None) -> "Finding":
        finding = super().__new__(cls, words)
        found = ROW.match(where or words)
        finding.level, finding.kind, finding.where, finding.field = level, kind, where, field
        finding.expected, finding.actual = expected, actual
        finding.row = row if row is not None else int(found.group(1)) if found else None
        return finding

    def __reduce__(self):  # a copy or a pickle (a finding crossing processes) keeps its parts
        return Finding, (str(self), self.level, self.kind, self.where, self.field, self.expected, self.actual,
                         self.row)

    def as_json(self) -> dict:
        return {"level": self.level, "row": self.row, "where": self.where, "field": self.field, "kind": self.kind,
                "expected": self.expected, "actual": self.actual, "words": str(self)}


@dataclass
class LevelResult:
    name: str
    checks: int = 0
    problems: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    notes: list = field(default_factory=list)  # shown under the level's status line
    sampled: list = field(default_factory=list)  # rescore: rows it did not draw, in words (runner.Outcome)
    drift_only: bool = False  # rescore: equal within the drift bound only
    drift_reason: str = ""  # rescore: why bits were not required, in words (named in the verdict)
    unchecked: list = field(default_factory=list)  # what this level saw but could not check: a limit of the verdict

    def expect(self, where: str, field_name: str, expected, actual) -> bool:
        """One check; a difference is recorded as 'where: field: expected X, got Y'.

        Equal means the same JSON: same types (1 is not 1.0, True is not 1) and the same
        float bits (-0.0 is not 0.0), inside lists and objects too.
        """
        self.checks += 1
        if same_json(expected, actual):
            return True
        wanted, got = shown(expected), shown(actual)
        self.problems.append(Finding(f"{where}: {field_name}: expected {wanted}, got {got}", self.name, "mismatch",
                                     where, field_name, wanted, got))
        return False

    def fail(self, message: str, row: int | None = None) -> None:
        self.checks += 1
        self.problems.append(message if isinstance(message, Finding) else
                             Finding(message, self.name, "failed", message.split(": ", 1)[0], row=row))

    @property
    def status(self) -> Literal["PASS", "FAIL", "SKIPPED"]:
        return "SKIPPED" if self.skipped else "PASS" if not self.problems else "FAIL"

    def as_json(self) -> dict:
        """The level in a `--format json` verdict (docs/formats.md, "A verdict as JSON")."""
        return {"name": self.name, "status": self.status, "checks": self.checks, "skipped": self.skipped,
                "notes": [str(note) for note in self.notes], "not_checked": [str(what) for what in self.unchecked],
                "findings": [problem.as_json() for problem in self.problems]}

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.problems

    def lines(self, limit: int = 20) -> list:
        if self.skipped:
            return [f"{self.name}: SKIPPED ({self.skipped})"]
        notes = [f"  {note}" for note in self.notes] + [f"  not checked: {what}" for what in self.unchecked]
        if not self.problems:
            return [f"{self.name}: PASS ({self.checks} check{'' if self.checks == 1 else 's'})"] + notes
        shown = [f"  - {p if len(p) <= 4 * MAX_SHOWN else p[:4 * MAX_SHOWN] + '...'}" for p in self.problems[:limit]]
        more = len(self.problems) - limit
        return [f"{self.name}: FAIL ({len(self.problems)} of {self.checks} checks)"] + notes + shown + (
            [f"  ... and {more} more"] if more > 0 else [])


MAX_SHOWN = 240  # characters of one value in a finding: a 15 MB field is named, not printed


def shown(value) -> str:
    """A value as a finding names it, truncated before its repr is built (a 21 MB string once cost 25 s)."""
    if isinstance(value, (str, bytes)) and len(value) > MAX_SHOWN:
        return f"{repr(value[:MAX_SHOWN])[:MAX_SHOWN]}... ({len(value)} characters)"
    if isinstance(value, (dict, list, tuple)) and (len(value) >= 64 or _large(value)):
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN]}... ({len(text)} characters)"


def _large(value, budget: int = 1 << 16) -> bool:
    """Whether a small container holds more than `budget` characters of text (checked without a repr)."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            seen += len(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            seen += 8
        if seen > budget:
            return True
    return False


def same_json(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex()  # bit for bit: tells -0.0 from 0.0 (NaN never reaches here)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return a == b
