"""What one audit level found: checks made, problems named by row and field."""

from dataclasses import dataclass, field


@dataclass
class LevelResult:
    name: str
    checks: int = 0
    problems: list = field(default_factory=list)
    skipped: str | None = None
    notes: list = field(default_factory=list)  # shown under the level's status line

    def expect(self, where: str, field_name: str, expected, actual) -> bool:
        """One check; a difference is recorded as 'where: field: expected X, got Y'."""
        self.checks += 1
        if expected == actual and type(expected) is type(actual) or _same_number(expected, actual):
            return True
        self.problems.append(f"{where}: {field_name}: expected {expected!r}, got {actual!r}")
        return False

    def fail(self, message: str) -> None:
        self.checks += 1
        self.problems.append(message)

    @property
    def passed(self) -> bool:
        return self.skipped is None and not self.problems

    def lines(self, limit: int = 20) -> list:
        if self.skipped:
            return [f"{self.name}: SKIPPED ({self.skipped})"]
        notes = [f"  {note}" for note in self.notes]
        if not self.problems:
            return [f"{self.name}: PASS ({self.checks} checks)"] + notes
        shown = [f"  - {p}" for p in self.problems[:limit]]
        more = len(self.problems) - limit
        return [f"{self.name}: FAIL ({len(self.problems)} of {self.checks} checks)"] + notes + shown + (
            [f"  ... and {more} more"] if more > 0 else [])


def _same_number(a, b) -> bool:
    """int/float of the same value count as equal (JSON does not keep the distinction); bits must match."""
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b)
    return False
