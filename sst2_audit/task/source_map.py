"""Keeps SOURCE_MAP.md true: every cited lm-eval location and local counterpart must exist.

A map row is a Markdown table row of the form
| step | `lm_eval/<file>` | `<function>` | <first>-<last> | `<anchor>` | decides |
    `<our file>::<Name>`[; ...] | hazard |  (one line)
and is checked against the installed lm-eval (whose files the lock pins by sha256):
the function (Class.method, a nested def, or a YAML key) must span the cited lines, and
the anchor text must stand on the first cited line. Run: python -m sst2_audit.task.source_map
"""

import ast
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.releases import installed_version, release_of
from sst2_audit.task import hook_check
from sst2_audit.task.evaluator_pin import installed_root

REPO = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\|(?P<cells>.*)\|\s*$")
LINES = re.compile(r"^(\d+)-(\d+)$")


@dataclass(frozen=True)
class MapRow:
    line_number: int  # in SOURCE_MAP.md
    step: str
    file: str
    function: str
    first: int
    last: int
    anchor: str
    counterparts: tuple


def _code(cell: str) -> str:
    return cell.strip().strip("`").strip()


def parse(text: str) -> list:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        match = ROW.match(line)
        if not match:
            continue
        cells = [c.strip() for c in match.group("cells").split(" | ")]
        lines = LINES.match(cells[3]) if len(cells) == 8 else None
        if lines is None or not _code(cells[1]).startswith("lm_eval/"):
            continue
        first, last = map(int, lines.groups())
        counterparts = tuple(_code(part) for part in cells[6].split(";") if "::" in part)
        rows.append(MapRow(number, cells[0], _code(cells[1]), _code(cells[2]), first, last, _code(cells[4]),
                           counterparts))
    return rows


def definitions(source: str) -> dict:
    """Qualified name -> (first line, last line) of every class and def, nested ones too."""
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                found[name] = (child.lineno, child.end_lineno)
                walk(child, name + ".")
            elif isinstance(child, (ast.Assign, ast.AnnAssign)) and not prefix:
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found[target.id] = (child.lineno, child.end_lineno)
            elif isinstance(child, (ast.If, ast.With, ast.Try)):
                walk(child, prefix)

    walk(hook_check.parsed(source), "")
    return found


def yaml_span(lines: list, key: str):
    for index, line in enumerate(lines):
        if line.startswith(f"{key}:"):
            end = index
            while end + 1 < len(lines) and lines[end + 1].startswith((" ", "-")):
                end += 1
            return index + 1, end + 1
    return None


def check_row(row: MapRow, lm_eval_root: Path, repo: Path = REPO, name: str = "SOURCE_MAP.md") -> list:
    where = f"{name}:{row.line_number} ({row.step})"
    path = lm_eval_root / row.file
    if not path.is_file():
        return [f"{where}: {row.file} does not exist in the installed lm-eval"]
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    problems = []
    if row.file.endswith((".yaml", "_yaml")):  # lm-eval's shared task defaults are YAML without the extension
        span = yaml_span(lines, row.function)
    else:
        span = definitions(source).get(row.function)
    if span is None:
        problems.append(f"{where}: {row.function} is not defined in {row.file}")
    elif not (span[0] <= row.first <= row.last <= span[1]):
        problems.append(f"{where}: lines {row.first}-{row.last} are not inside {row.function}, "
                        f"which spans {span[0]}-{span[1]} of {row.file}")
    if not (1 <= row.first <= len(lines)) or row.anchor not in lines[row.first - 1]:
        actual = lines[row.first - 1].strip() if 1 <= row.first <= len(lines) else "<no such line>"
        problems.append(f"{where}: line {row.first} of {row.file} should contain {row.anchor!r}, it reads {actual!r}")
    if not row.counterparts:
        problems.append(f"{where}: no local counterpart (`path::Name`) given")
    for counterpart in row.counterparts:
        local, _, name = counterpart.partition("::")
        local_path = repo / local
        if not local_path.is_file():
            problems.append(f"{where}: counterpart file {local} does not exist")
        elif name not in definitions(local_path.read_text(encoding="utf-8")):
            problems.append(f"{where}: counterpart {name} is not defined in {local}")
    return problems


def check(text: str, lm_eval_root: Path, repo: Path = REPO, name: str = "SOURCE_MAP.md") -> tuple:
    rows = parse(text)
    problems = [] if rows else [f"{name}: no map rows found"]
    for row in rows:
        problems += check_row(row, lm_eval_root, repo, name)
    return rows, problems


def main() -> int:
    """The map of the installed release (SOURCE_MAP.md for 0.4.9.2, SOURCE_MAP-0.4.13.md for 0.4.13)."""
    name = release_of(installed_version()).source_map
    rows, problems = check((REPO / name).read_text(encoding="utf-8"), installed_root(), name=name)
    for problem in problems:
        print(problem)
    print(f"{name}: {len(rows)} map rows, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
