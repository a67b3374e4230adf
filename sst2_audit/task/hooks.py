"""Task code hooks (`!function utils.process_docs` in a task YAML) as pinned shared code.

A hook is a function in a Python file of the installed lm-eval (a task's `utils.py`). The lock pins
that file by sha256 like the YAML. Both paths run the same function: it is loaded here from the bytes
whose sha256 was checked (never through lm-eval's loader or registry) and handed to lm-eval's task
config and to the independent path alike. What such code computes is therefore shared, not
re-derived: records, card and page say so. A hook file is read statically before it is ever run
(task/hook_check.py, an allowlist measured from lm-eval's own hook files): one that imports lm-eval
internals or uses anything lm-eval's own hooks do not is refused with the reason.

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

from sst2_audit.task import hook_check
from sst2_audit.task.yaml_file import confined
from sst2_audit.util.errors import CheckFailed, InputError

HOOK_KEYS = ("process_docs", "doc_to_text", "doc_to_target", "doc_to_choice")  # hooks both paths may share
# lm-eval alone runs a process_results hook; the independent path re-derives its metric with its own code, so
# only a function whose exact source we have read and re-implemented is accepted (task/support.RESULTS_RULES).
RESULTS_KEY = "process_results"
# hooks lm-eval's evaluation never calls: doc_to_decontamination_query's only caller is ConfigurableTask's method of
# that name, which nothing calls in 0.4.9.2 or 0.4.13 (paloma's YAMLs set one). Pinned and checked like any hook,
# never run by either path.
INERT_KEYS = ("doc_to_decontamination_query",)


@dataclass(frozen=True)
class Hook:
    key: str  # the config field: process_docs, doc_to_text, ...
    path: str  # the hook's file, relative to the folder holding the lm_eval package
    function: str
    file: str  # its absolute path on this machine (never recorded)
    sha256: str | None = None  # the lock's pin (set by task/spec.spec_for)

    def describe(self) -> str:
        return f"{self.key}: {self.path}::{self.function}"

    def __call__(self, *args, random_seed: int | None = None):
        function = load(self, random_seed)  # a changed file is a failed check (CheckFailed), never caught here
        try:
            return function(*args)
        except Exception as error:  # the task's code on data that is not the task's: bad input, named
            raise InputError(f"hook {self.path}::{self.function} failed on this data ({type(error).__name__}: "
                             f"{str(error)[:160]}).") from None


@functools.lru_cache(maxsize=4096)  # keyed by the bytes: --list-tasks meets one included YAML many times
def _function_tags(data: bytes) -> tuple:
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's: 10x faster
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
    return hook_check.file_reason(file.name, file.read_bytes(), function)


_LOADED: dict = {}


def load(hook: Hook, random_seed: int | None = None):
    """The hook's function, from the bytes whose sha256 is the lock's pin (hashed and compiled from one read). A
    file that draws from `random` (hook_check.draws_random) needs random_seed: see seeded."""
    if hook.sha256 is None:
        raise CheckFailed(f"hook {hook.describe()}: its file is not pinned by the lock.")
    key = (hook.file, hook.sha256)
    if key not in _LOADED:
        data = _pinned_bytes(hook)
        module = types.ModuleType(f"sst2_audit_hook_{hook.sha256[:16]}")
        module.__file__ = hook.file
        _namespace(module, data)
        exec(compile(data, hook.file, "exec"), module.__dict__)  # noqa: S102 - pinned, statically checked code
        _LOADED[key] = module
    function = getattr(_LOADED[key], hook.function, None)
    if not callable(function):
        raise InputError(f"{hook.path}: defines no function {hook.function}.")
    if SEEDED in _LOADED[key].__dict__:
        if random_seed is None:
            raise RuntimeError(f"hook {hook.describe()} draws from random and was loaded without a seed")
        return seeded(function, _LOADED[key], random_seed)
    return function


def seeded(function, module, random_seed: int):
    """The hook drawing, for each call, from a fresh random.Random(random_seed): the state lm-eval gives a
    process_docs hook (simple_evaluate seeds the global instance, then builds the task, whose first process_docs
    call on the split draws first; later calls read datasets' cache of that map: SOURCE_MAP step 84), and never
    the process's own global state (the file's `random` is a _SeededRandom from the moment it is run)."""
    import random

    @functools.wraps(function)  # inspect.getsource follows __wrapped__: lm-eval logs the hook's own source
    def call(*args, **kwargs):
        module.__dict__[SEEDED].draws = random.Random(random_seed)
        try:
            return function(*args, **kwargs)
        finally:
            module.__dict__[SEEDED].draws = None
    return call


SEEDED = "__sst2_audit_seeded_random__"  # where a drawing hook file's module keeps the `random` it imported


class _SeededRandom(types.ModuleType):
    """The `random` a drawing hook file imports (its `import random` resolves here when it is run, so a name bound
    at import, `X = random.shuffle`, draws from it too): each of hook_check.SEEDED_DRAWS draws from the Random the
    current call set, and refuses outside a call."""

    def __init__(self):
        super().__init__("random")
        self.draws = None
        for name in hook_check.SEEDED_DRAWS:
            setattr(self, name, self._draw(name))

    def _draw(self, name: str):
        def draw(*args, **kwargs):
            if self.draws is None:
                raise RuntimeError(f"a hook drew random.{name} outside a seeded call")
            return getattr(self.draws, name)(*args, **kwargs)
        return draw


def _namespace(module, data: bytes) -> None:
    """A drawing hook file's own `random` (_SeededRandom), given to its `import random` by the builtins it runs
    with; any other file runs with the usual builtins."""
    if not hook_check.draws_random(data):
        return
    import builtins

    shim = module.__dict__[SEEDED] = _SeededRandom()

    def imports(name, *args, **kwargs):
        return shim if name == "random" else builtins.__import__(name, *args, **kwargs)

    module.__dict__["__builtins__"] = {**builtins.__dict__, "__import__": imports}


def pinned_bytes(hook: Hook) -> bytes:
    """The hook's file, its bytes the lock's pin (a changed file is a failed check)."""
    return _pinned_bytes(hook)


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
        tree = hook_check.parsed(data)
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
        return inspect.getsource(load(hook, 0))  # (a seed shows in neither the source nor str())
    except (TypeError, OSError):
        return stable(str(load(hook, 0)))


def nested(hook: Hook) -> str:
    """What lm-eval logs for a hook held inside another config field (0.4.13's fewshot_config inherits the task's
    doc_to_* and process_docs): to_dict serializes top-level callables only, so the results writer's str(), its
    memory address made stable. A plain def's is known without running its file."""
    if hook.sha256 is None:
        raise CheckFailed(f"hook {hook.describe()}: its file is not pinned by the lock.")
    if function_source(_pinned_bytes(hook), hook.function) is not None:
        return f"<function {hook.function} at 0x...>"
    return stable(str(load(hook, 0)))


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
