"""Re-anchor SOURCE_MAP.md's rows in another installed lm-eval release: a draft of that release's map.

    python scripts/reanchor_source_map.py --out SOURCE_MAP-0.4.13.md   (in an environment holding that release)

Each map row keeps its step, anchor text and counterparts; its file, function and lines are looked up in the
installed release: the same file, else the one file that defines the function; the first line is where the
anchor text stands inside the function, the span keeps its length (clipped to the function). A row whose
function or anchor is gone is printed and left out of the draft with a marker row, for a person to map by
hand: the draft is never the map until `python -m sst2_audit.task.source_map` passes on it.
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sst2_audit.formats.releases import installed_version  # noqa: E402
from sst2_audit.task.evaluator_pin import installed_root  # noqa: E402
from sst2_audit.task.source_map import yaml_span, definitions, parse  # noqa: E402


def _span(path: Path, function: str):
    text = path.read_text(encoding="utf-8")
    if path.name.endswith((".yaml", "_yaml")):
        return yaml_span(text.splitlines(), function), text.splitlines()
    return definitions(text).get(function), text.splitlines()


def _where(root: Path, file: str, function: str):
    """(file, span, lines) of `function` in the release: its old file first, else the one file defining it."""
    if (root / file).is_file():
        span, lines = _span(root / file, function)
        if span is not None:
            return file, span, lines
    if file.endswith(".py"):
        found = [p for p in sorted((root / "lm_eval").rglob("*.py")) if "/tasks/" not in str(p)
                 and function in definitions(p.read_text(encoding="utf-8"))]
        if len(found) == 1:
            span, lines = _span(found[0], function)
            return str(found[0].relative_to(root)), span, lines
    return None


def reanchor(text: str, root: Path) -> tuple:
    """(the map's text with every row re-anchored where it could be, the rows that could not)."""
    lines, unresolved = text.splitlines(), []
    for row in parse(text):
        found = _where(root, row.file, row.function)
        first = None
        if found is not None:
            file, span, source = found
            hits = [n for n in range(span[0], span[1] + 1) if row.anchor in source[n - 1]]
            first = hits[0] if hits else None
        if first is None:
            unresolved.append(row)
            continue
        last = min(first + (row.last - row.first), span[1])
        old = lines[row.line_number - 1]
        cells = old.split(" | ")
        cells[1], cells[3] = f"`{file}`", f"{first}-{last}"
        lines[row.line_number - 1] = " | ".join(cells)
    return "\n".join(lines) + "\n", unresolved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--map", type=Path, default=REPO / "SOURCE_MAP.md")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    text, unresolved = reanchor(args.map.read_text(encoding="utf-8"), installed_root())
    if args.out.exists():
        print(f"error: {args.out} exists; the draft is never written over a map", file=sys.stderr)
        return 2
    args.out.write_text(text, encoding="utf-8")
    for row in unresolved:
        print(f"unresolved: step {row.step}: {row.function} in {row.file} (anchor {row.anchor!r})")
    print(f"{args.out}: lm-eval {installed_version()}, {len(parse(text))} rows, {len(unresolved)} unresolved")
    return 0


if __name__ == "__main__":
    sys.exit(main())
