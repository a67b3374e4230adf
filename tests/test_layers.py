"""The package's shape: each module on a layer, no import running up a layer, short functions.

Layers, bottom to top: a module may import its own layer and those below. Function-level imports
count too (they are how the heavy ones are deferred). A new module must be placed here."""

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "sst2_audit"
LAYERS = [
    ("base", {"errors", "hashing", "sanitize", "atomic", "strict_json", "progress", "console", "warm", "stats",
              "numeric", "environment", "drift", "plots", "schema", "corpus", "task_yaml"}),
    ("protocol and data", {"protocol", "metrics", "records", "dataset", "split", "lock", "manifest", "store",
                           "evaluator_pin", "task_spec", "task_config", "split_rows", "summaries", "agreement",
                           "lm_eval_notes", "fewshot", "hooks", "group"}),
    ("scoring and resources", {"independent", "identity", "official", "model", "convert", "hub_pin", "task_pin",
                               "source_map", "sources", "sources.interface", "sources.demo", "sources.hub",
                               "sources.local", "sources.wheel"}),
    ("pages", {"pages", "card", "html_report", "html_report_v3", "report"}),
    ("jobs", {"prepare", "pin", "run_job", "group_job", "audit.group_level", "audit.group_bundle", "audit", "audit.arithmetic", "audit.bundle", "audit.claims",
              "audit.compare", "audit.findings", "audit.identity_level", "audit.loading", "audit.rescore",
              "audit.runner", "audit.ustar"}),
    ("commands", {"command", "cmd_prepare", "cmd_run", "cmd_audit"}),
    ("entry points", {"cli"}),
]
LAYER = {module: number for number, (_, modules) in enumerate(LAYERS) for module in modules}


def _modules() -> dict:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    found.pop("", None)  # the package's own __init__: a docstring
    return found


def _imports(name: str, path: Path, known: set) -> set:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:
                full = f"{target}.{alias.name}".strip(".")
                found.add(full if full in known else target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found |= {n.removeprefix("sst2_audit.") for n in names if n.startswith("sst2_audit.")}
    return found - {name, ""}


def test_every_module_has_a_layer_and_no_import_runs_up_a_layer():
    modules = _modules()
    assert sorted(set(modules) - set(LAYER)) == [], "place the new module on a layer in tests/test_layers.py"
    assert sorted(set(LAYER) - set(modules)) == [], "a module in LAYERS no longer exists"
    upward = [f"{name} ({LAYERS[LAYER[name]][0]}) imports {dep} ({LAYERS[LAYER[dep]][0]})"
              for name, path in modules.items() for dep in sorted(_imports(name, path, set(modules)))
              if LAYER[dep] > LAYER[name]]
    assert upward == []


def test_the_layer_check_sees_a_function_level_import(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    from .cli import audit_main\n    from . import records\n")
    assert _imports("lock", path, set(LAYER)) == {"cli", "records"}


def test_entry_module_is_short_and_no_function_is_long():
    assert len((PACKAGE / "cli.py").read_text().splitlines()) < 150
    long = [f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in sorted(PACKAGE.rglob("*.py")) for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60]
    assert long == []
