"""Task code hooks (`!function utils.process_docs` in a task YAML) as pinned shared code.

A hook is a function in a Python file of the installed lm-eval (a task's `utils.py`). The lock pins
that file by sha256 like the YAML. Both paths run the same function: it is loaded here from the bytes
whose sha256 was checked (never through lm-eval's loader or registry) and handed to lm-eval's task
config and to the independent path alike. What such code computes is therefore shared, not
re-derived: records, card and page say so. A hook file is read statically before it is ever run;
one that imports lm-eval internals, may reach the network or the file system, or draws random
numbers or the time is refused with the reason.

lm-eval resolves `!function a.b` to the function `b` of `a.py` beside the YAML file that holds the tag
(lm_eval/utils.py import_function): an included YAML's hooks live beside that YAML.
"""

import ast
import functools
import hashlib
import inspect
import re
import types
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.task.yaml_file import confined
from sst2_audit.util.errors import CheckFailed, InputError

HOOK_KEYS = ("process_docs", "doc_to_text", "doc_to_target", "doc_to_choice")  # hooks both paths may share
# lm-eval alone runs a process_results hook; the independent path re-derives its metric with its own code, so
# only a function whose exact source we have read and re-implemented is accepted (task/support.RESULTS_RULES).
RESULTS_KEY = "process_results"
# Modules a hook may import: text and data handling that is deterministic and stays in the process.
ALLOWED_IMPORTS = {"re", "string", "datasets", "functools", "typing", "collections", "json", "math", "numpy",
                   "unicodedata", "itertools", "ast", "copy", "hashlib", "html", "dataclasses", "enum", "textwrap",
                   "__future__",
                   "sacrebleu", "rouge_score"}  # metric libraries lm-eval itself installs (truthfulqa's utils.py)
REFUSED_NAMES = {"open": "opens files", "eval": "evaluates text as code", "exec": "runs text as code",
                 "__import__": "imports by name", "compile": "compiles text as code", "input": "reads the terminal",
                 "load_dataset": "loads a dataset (the network or the hub)"}
# The static check is a second line, not a sandbox: the barrier is the pin (a hook runs only from bytes
# whose sha256 the lock pins, and a lock's paths name files of the installed lm_eval package only).
# What it refuses closes the known ways from allowed modules to the file system (issue 28's 11 shapes):
# names that reach objects by computed name, dunder attributes, and any attribute of an imported module
# or name that is not on this explicit list (measured: the 281 hook files of the 5,941 supported
# configs of lm-eval 0.4.9.2 use 17 of these pairs; the rest are of the same kind).
REFUSED_BUILTINS = {"getattr": "reaches attributes by computed name", "setattr": "sets attributes by name",
                    "delattr": "deletes attributes by name", "vars": "reads a namespace", "locals": "reads a namespace",
                    "__builtins__": "reaches the builtins", "breakpoint": "starts a debugger",
                    "memoryview": "reads raw memory"}
MODULE_ATTRIBUTES = {
    "ast": {"literal_eval"}, "datasets": {"Dataset"}, "datasets.Dataset": {"from_dict", "from_list"},
    "hashlib": {"sha256", "md5"}, "html": {"unescape", "escape"},
    "numpy": {"array", "exp", "int32", "int64", "float32", "float64", "nanmax", "round", "sum", "argmax", "mean",
              "max", "min", "log", "sqrt", "isnan", "inf", "nan", "ndarray"},
    "re": {"findall", "sub", "match", "search", "compile", "split", "fullmatch", "escape", "IGNORECASE", "DOTALL",
           "MULTILINE", "Pattern", "Match", "finditer", "subn", "I", "S", "M"},
    "math": {"exp", "log", "sqrt", "isnan", "isinf", "inf", "nan", "floor", "ceil", "fsum", "log2", "log10"},
    "string": {"ascii_uppercase", "ascii_lowercase", "ascii_letters", "punctuation", "digits", "whitespace",
               "capwords"},
    "rouge_score.rouge_scorer": {"RougeScorer"}, "rouge_score.scoring": {"BootstrapAggregator"},
    "sacrebleu": {"corpus_bleu", "sentence_bleu"}, "unicodedata": {"normalize", "category", "combining"},
    "json": {"loads", "dumps"}, "itertools": {"chain", "product", "permutations", "combinations", "islice"},
    "itertools.chain": {"from_iterable"}, "collections": {"Counter", "defaultdict", "OrderedDict", "namedtuple"},
    "functools": {"partial", "reduce", "lru_cache", "cache"}, "copy": {"deepcopy", "copy"},
    "textwrap": {"dedent", "indent", "wrap", "fill"}, "typing": {"List", "Dict", "Optional", "Any", "Tuple",
                                                                  "Union", "Callable", "Iterable", "Sequence"},
    "dataclasses": {"dataclass", "field", "asdict"}, "enum": {"Enum", "IntEnum", "auto"},
}
SUBMODULES = {"rouge_score.rouge_scorer", "rouge_score.scoring"}  # `from rouge_score import scoring`


@dataclass(frozen=True)
class Hook:
    key: str  # the config field: process_docs, doc_to_text, ...
    path: str  # the hook's file, relative to the folder holding the lm_eval package
    function: str
    file: str  # its absolute path on this machine (never recorded)
    sha256: str | None = None  # the lock's pin (set by task/spec.spec_for)

    def describe(self) -> str:
        return f"{self.key}: {self.path}::{self.function}"

    def __call__(self, *args):
        function = load(self)  # a changed file is a failed check (CheckFailed), never caught here
        try:
            return function(*args)
        except Exception as error:  # the task's code on data that is not the task's: bad input, named
            raise InputError(f"hook {self.path}::{self.function} failed on this data ({type(error).__name__}: "
                             f"{str(error)[:160]}).") from None


@functools.lru_cache(maxsize=4096)  # keyed by the bytes: --list-tasks meets one included YAML many times
def _function_tags(data: bytes) -> tuple:
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when installed: 10x faster
        pass

    Loader.add_constructor("!function", lambda loader, node: ("!function", loader.construct_scalar(node)))
    Loader.add_multi_constructor("", lambda loader, suffix, node: None)  # other tags: not hooks
    raw = yaml.load(data, Loader=Loader)
    if not isinstance(raw, dict):
        return ()
    return tuple((key, value[1]) for key, value in raw.items()
                 if isinstance(value, tuple) and len(value) == 2 and value[0] == "!function")


def find(config: dict, sources: list, root: Path) -> tuple:
    """The hooks of a merged config: each `!function` key resolved beside the YAML that wrote it (the
    task's own file first: an including file wins over its includes). sources: (relative path, bytes)
    of every YAML the task's reading parsed (task/yaml_file.Reading)."""
    import yaml


    keys = [key for key, value in config.items() if isinstance(value, yaml.Node)]
    hooks = []
    for key in keys:
        written = next(((relative, tags[key]) for relative, data in sources for tags in [dict(_function_tags(data))]
                        if key in tags), None)
        if written is None:
            raise InputError(f"`!function` hook {key}: no YAML file of the task writes it.")
        *module, function = str(written[1]).split(".")
        relative = f"{written[0].rsplit('/', 1)[0]}/{'.'.join(module)}.py"
        file = confined(root, relative, f"`!function` hook {key}")  # inside the package, no symlink
        hooks.append(Hook(key, relative, function, str(file)))
    return tuple(hooks)


def code_reason(file: Path, function: str) -> str | None:
    """Why this hook file may not run in an audit, or None (read statically, never run here)."""
    if not file.is_file():
        return f"its file {file.name} is not installed"
    return _reason(file.name, file.read_bytes(), function)


@functools.lru_cache(maxsize=1024)  # keyed by the bytes: --list-tasks reads one utils.py for many configs
def _reason(file_name: str, data: bytes, function: str) -> str | None:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError) as error:
        return f"its file {file_name} does not parse ({error})"
    dynamic = any(isinstance(node, ast.Call) and getattr(node.func, "id", None) == "globals" for node in ast.walk(tree))
    if not dynamic and not any(isinstance(node, (ast.FunctionDef, ast.Assign)) and function in (
            [node.name] if isinstance(node, ast.FunctionDef) else [getattr(t, "id", None) for t in node.targets])
            for node in tree.body):  # a def, a name bound to a partial, or globals().update (global_mmlu)
        return f"{file_name} defines no top-level function {function}"
    imported = {}  # a name bound by an import -> the dotted module (or module.name) it stands for
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if isinstance(node, ast.ImportFrom) and node.level:
                return f"{file_name} imports a sibling module (relative import)"
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top == "lm_eval":
                    return f"{file_name} imports lm-eval internals ({name})"
                if top not in ALLOWED_IMPORTS:
                    return f"{file_name} imports {name} (hooks may import only {', '.join(sorted(ALLOWED_IMPORTS))})"
            for alias in node.names:
                if isinstance(node, ast.ImportFrom) and alias.name not in MODULE_ATTRIBUTES.get(node.module, ()) and \
                        f"{node.module}.{alias.name}" not in SUBMODULES:
                    return (f"{file_name} imports {alias.name} from {node.module} (not on the hook check's list of "
                            "module attributes)")
                if isinstance(node, ast.Import):
                    imported[alias.asname
                             or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                else:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return _reach_reason(file_name, tree, imported)


def _reach_reason(file_name: str, tree, imported: dict) -> str | None:
    """The second line (REFUSED_BUILTINS, dunders, MODULE_ATTRIBUTES): what a hook may reach by name."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if called in REFUSED_NAMES:
                return f"{file_name} calls {called} (it {REFUSED_NAMES[called]})"
        elif isinstance(node, ast.Attribute):
            if node.attr == "random":
                return f"{file_name} uses .random (not deterministic)"
            if node.attr.startswith("__"):
                return (f"{file_name} reaches the attribute {node.attr} (dunder attributes lead out of the allowed "
                        "modules)")
        elif isinstance(node, ast.Name):
            if node.id in REFUSED_BUILTINS:
                return f"{file_name} uses {node.id} (it {REFUSED_BUILTINS[node.id]})"
            if node.id == "globals":  # only globals().update({...}), how global_mmlu binds its functions
                call, attribute = parents.get(node), parents.get(parents.get(node))
                if not (isinstance(call, ast.Call) and isinstance(attribute, ast.Attribute)
                        and attribute.attr == "update"):
                    return f"{file_name} uses globals() other than globals().update(...)"
            if node.id in imported and not isinstance(node.ctx, ast.Store):
                reason = _imported_use(file_name, node, imported[node.id], parents)
                if reason:
                    return reason
    return None


def _imported_use(file_name: str, node, dotted: str, parents: dict) -> str | None:
    """An imported name may be called, annotate or be subscripted (typing.List[...]), or give an attribute
    on MODULE_ATTRIBUTES; never be handed on (an alias would escape the list)."""
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr not in MODULE_ATTRIBUTES.get(dotted, ()):
            return f"{file_name} reaches {dotted}.{parent.attr} (not on the hook check's list of module attributes)"
        return None
    if (isinstance(parent, ast.Call) and parent.func is node
            or isinstance(parent, ast.Subscript) and parent.value is node):
        return None
    if isinstance(parent, (ast.arg, ast.FunctionDef)) or _in_annotation(node, parents):
        return None
    return f"{file_name} hands on the imported name {node.id} ({dotted}), which the hook check cannot follow"


def _in_annotation(node, parents: dict) -> bool:
    while node in parents:
        parent = parents[node]
        if isinstance(parent, (ast.arg, ast.FunctionDef, ast.AnnAssign)) and node in (
                getattr(parent, "annotation", None), getattr(parent, "returns", None)):
            return True
        node = parent
    return False


_LOADED: dict = {}


def load(hook: Hook):
    """The hook's function, from the bytes whose sha256 is the lock's pin (hashed and compiled from one read)."""
    if hook.sha256 is None:
        raise CheckFailed(f"hook {hook.describe()}: its file is not pinned by the lock.")
    key = (hook.file, hook.sha256)
    if key not in _LOADED:
        data = _pinned_bytes(hook)
        module = types.ModuleType(f"sst2_audit_hook_{hook.sha256[:16]}")
        module.__file__ = hook.file
        exec(compile(data, hook.file, "exec"), module.__dict__)  # noqa: S102 - pinned, statically checked code
        _LOADED[key] = module
    function = getattr(_LOADED[key], hook.function, None)
    if not callable(function):
        raise InputError(f"{hook.path}: defines no function {hook.function}.")
    return function


def _pinned_bytes(hook: Hook) -> bytes:
    data = Path(hook.file).read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != hook.sha256:
        raise CheckFailed(f"{hook.file}: sha256 {actual}, but the lock pins {hook.path} as {hook.sha256}; the hook "
                          "code is not the pinned code.")
    return data


def function_source(data: bytes, function: str) -> str | None:
    """A top-level `def`'s source lines as inspect.getsource gives them (decorators included; the last
    definition of the name wins, as at import), read without running the file; None when the name is not
    bound by a plain def (a partial, globals().update)."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
    if not found:
        return None
    node, lines = found[-1], data.decode("utf-8").splitlines(keepends=True)
    start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    return "".join(lines[start - 1:node.end_lineno])


def source_sha256(file: Path, function: str) -> str | None:
    """sha256 of a hook function's own source (task/support.RESULTS_RULES recognises a process_results by it)."""
    text = function_source(Path(file).read_bytes(), function) if Path(file).is_file() else None
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text is not None else None


ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def source(hook: Hook) -> str:
    """What lm-eval logs for a callable config field (TaskConfig.serialize_function: inspect.getsource, else
    str(), whose memory address is made stable). A plain def's source is read from the pinned bytes without
    running the file (the audit need not import truthfulqa's metric libraries to rebuild a logged config)."""
    if hook.sha256 is None:
        raise CheckFailed(f"hook {hook.describe()}: its file is not pinned by the lock.")
    text = function_source(_pinned_bytes(hook), hook.function)
    if text is not None:
        return text
    try:
        return inspect.getsource(load(hook))
    except (TypeError, OSError):
        return stable(str(load(hook)))


def nested(hook: Hook) -> str:
    """What lm-eval logs for a hook held inside another config field (0.4.13's fewshot_config inherits the task's
    doc_to_* and process_docs): to_dict serializes top-level callables only, so the results writer's str(), its
    memory address made stable. A plain def's is known without running its file."""
    if hook.sha256 is None:
        raise CheckFailed(f"hook {hook.describe()}: its file is not pinned by the lock.")
    if function_source(_pinned_bytes(hook), hook.function) is not None:
        return f"<function {hook.function} at 0x...>"
    return stable(str(load(hook)))


def rendered(value):
    """A logged config with every callable left inside a nested field rendered as lm-eval's results writer
    renders it (str()), its memory address made stable."""
    if isinstance(value, dict):
        return {key: rendered(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rendered(item) for item in value]
    return stable(str(value)) if callable(value) else value


def stable(value):
    """A logged config with the memory addresses of str(callable) (a functools.partial hook) replaced:
    they differ from process to process and mean nothing to a reader."""
    if isinstance(value, str):
        return ADDRESS.sub(" at 0x...", value)
    if isinstance(value, dict):
        return {key: stable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [stable(item) for item in value]
    return value
