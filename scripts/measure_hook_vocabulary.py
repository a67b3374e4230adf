"""What lm-eval's own hook files use: the measurement task/hook_check.py's allowlist was made from.

    .venv/bin/python scripts/measure_hook_vocabulary.py            # lm-eval 0.4.9.2's environment
    .venv-0.4.13/bin/python scripts/measure_hook_vocabulary.py     # 0.4.13's

Reads (never runs) the hook files of every installed config the audit supports with its hooks and prints the
AST node kinds, the attribute names taken of values (not of imported modules) and the builtins they use, each
against the check's lists: a name the files use that the check refuses would drop a supported config.
"""

import ast
import builtins
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml  # noqa: E402

from sst2_audit.formats.releases import installed_version  # noqa: E402
from sst2_audit.task import hook_check  # noqa: E402
from sst2_audit.task.hooks import find  # noqa: E402
from sst2_audit.task.support import hook_reason, installed_configs, installed_tasks_root, yaml_sources  # noqa: E402


def hook_files() -> dict:
    root, files = installed_tasks_root().parent.parent, {}
    for _, reading in installed_configs("*"):
        config = reading.config
        if any(isinstance(v, yaml.Node) for v in config.values()) and hook_reason(config, reading)[0] is None:
            files.update((hook.path, Path(hook.file).read_bytes()) for hook in find(config, yaml_sources(reading), root))
    return files


def main() -> int:
    files = hook_files()
    nodes, attributes, used = set(), set(), set()
    for data in files.values():
        tree = ast.parse(data)
        modules = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                   if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
        for node in ast.walk(tree):
            nodes.add(type(node).__name__)
            if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id in modules):
                attributes.add(node.attr)
            if isinstance(node, ast.Name) and node.id in dir(builtins):
                used.add(node.id)
    print(f"lm-eval {installed_version()}: {len(files)} hook files of supported configs")
    for name, found, allowed in (("node kinds", nodes, hook_check.ALLOWED_NODES),
                                 ("attributes of values", attributes, hook_check.ALLOWED_ATTRIBUTES),
                                 ("builtins", used, hook_check.ALLOWED_BUILTINS)):
        print(f"{name} ({len(found)}): {sorted(found)}")
        print(f"  used but refused by the check: {sorted(found - allowed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
