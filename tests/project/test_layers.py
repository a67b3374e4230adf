"""The package's shape, read from its folders: each folder is a room with one job, rooms stand in one
order, and no import runs from a lower room to a higher one or round in a circle.

A module may import modules of its own folder and of the folders below it. The package's own modules
are imported at the top of a module, never inside a function (a reader sees the whole graph at the
top); only the heavy third-party packages are imported where they are used."""

import ast
import subprocess
import sys
from pathlib import Path

from support.paths import REPO

PACKAGE = REPO / "sst2_audit"
# bottom to top: what each room holds is in its __init__'s docstring
FOLDERS = ["util", "protocol", "formats", "task", "scoring", "resources", "pages", "run", "audit", "bundle", "cli"]
HEAVY = ("torch", "transformers", "lm_eval", "pyarrow", "matplotlib")
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_LINE = 400, 60, 120


def _modules() -> dict:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    found.pop("", None)  # the package's own __init__: a docstring
    return found


def _imports(path: Path, known: set, top_only: bool = False) -> set:
    """The package modules a file imports (`from sst2_audit.x import y` names module x.y when it is one)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: a relative import; the package imports itself by absolute names")
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [f"{node.module}.{a.name}" if f"{node.module}.{a.name}".removeprefix("sst2_audit.") in known
                  else node.module for a in node.names] if isinstance(node, ast.ImportFrom) and node.module else [])
        found |= {n.removeprefix("sst2_audit.") for n in names if n.startswith("sst2_audit.")}
    return found


def _folder(module: str) -> str:
    return module.split(".")[0]


def test_every_module_lives_in_a_room_and_no_import_runs_up():
    modules = _modules()
    assert sorted({_folder(m) for m in modules} - set(FOLDERS)) == [], "a new folder needs its place in FOLDERS"
    upward = [f"{name} imports {dep}" for name, path in modules.items() for dep in sorted(_imports(path, set(modules)))
              if FOLDERS.index(_folder(dep)) > FOLDERS.index(_folder(name))]
    assert upward == []


def test_no_import_circle():
    modules = _modules()
    graph = {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}
    state, circles = {}, []

    def visit(name, trail):
        state[name] = "open"
        for dep in sorted(graph.get(name, ())):
            if state.get(dep) == "open":
                circles.append(" -> ".join(trail[trail.index(dep):] + [dep]))
            elif dep not in state:
                visit(dep, trail + [dep])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert circles == []


def test_own_modules_are_imported_at_the_top():
    modules = _modules()
    inner = [f"{name}: {sorted(_imports(path, set(modules)) - _imports(path, set(modules), top_only=True))}"
             for name, path in modules.items()
             if _imports(path, set(modules)) - _imports(path, set(modules), top_only=True)]
    assert inner == []


def test_importing_every_module_loads_no_heavy_package():
    probe = ("import importlib, pkgutil, sys, sst2_audit\n"
             "for m in pkgutil.walk_packages(sst2_audit.__path__, 'sst2_audit.'): importlib.import_module(m.name)\n"
             f"print(sorted(k for k in {HEAVY!r} if k in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    assert done.stdout.strip() == "[]"


def test_the_layer_check_sees_a_function_level_import(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from sst2_audit.cli import audit_main\n    from sst2_audit.formats import records\n")
    assert _imports(path, {"cli", "formats.records"}) == {"cli", "formats.records"}
    assert _imports(path, {"cli", "formats.records"}, top_only=True) == set()


def test_modules_functions_and_lines_are_short():
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(REPO)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{where} ({len(text.splitlines())} lines)")
        too_long += [f"{where}:{number} ({len(line)} characters)" for number, line in enumerate(text.splitlines(), 1)
                     if len(line) > MAX_LINE]
        too_long += [f"{where}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                     for node in ast.walk(ast.parse(text))
                     if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                     and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert too_long == []


def test_the_type_checker_s_none_safety_exemptions_only_shrink():
    """pyproject.toml's [tool.mypy] exempts some modules from None-safety (issue 60's type checker, run by .ci/run);
    the list names modules that exist and never grows past the 6 it holds now (31 when mypy came in, 16 at the start of
    the 2026-12-06 afternoon)."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    exempt = [module for override in config["overrides"] if override.get("strict_optional") is False
              for module in override["module"]]
    assert 0 < len(exempt) <= 6 and len(set(exempt)) == len(exempt)
    for module in exempt:
        path = REPO / (module.replace(".", "/") + ".py")
        assert path.is_file() or (REPO / module.replace(".", "/") / "__init__.py").is_file(), module
    assert config["packages"] == ["sst2_audit"] and config.get("strict_optional", True) is True


def test_only_the_shape_registries_ask_which_shape_a_task_is():
    """Issue 60: what differs between multiple_choice and generate_until is asked of the task's shape
    (task/shapes.py) or of the adoption's (audit/adopt_shape.py and its implementations), never by a
    `generative` flag or an output_type comparison elsewhere."""
    import re

    # the support policy admits the two output types, the spec reader builds the shape, the registries pick it
    seams = {"sst2_audit/task/support.py", "sst2_audit/task/spec.py", "sst2_audit/task/shapes.py",
             "sst2_audit/audit/adopt_shapes.py"}
    found = []
    for path in sorted((REPO / "sst2_audit").rglob("*.py")):
        where = str(path.relative_to(REPO))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if re.search(r"\bgenerative\b", code) or (
                    where not in seams and re.search(r"output_type\W* *[!=]= *\W(generate_until|multiple_choice)", code)):
                found.append(f"{where}:{number}: {line.strip()}")
    assert found == []
