"""The static check of a hook file (task/hooks.py): an allowlist read from lm-eval's own hook files.

The pin is the barrier: a hook runs only from bytes whose sha256 the reviewer's lock pins, and a lock's paths
name files of the installed lm_eval package only. This check is the second line: a hook file is read (never
run) and refused, with the reason, unless everything in it is of a kind lm-eval's own supported hook files
use. Measured (`scripts/measure_hook_vocabulary.py`, 2026-12-04): the 300 hook files of lm-eval 0.4.9.2's and
the 306 of 0.4.13's supported configs use 60 AST node kinds, 33 attribute names of values and 16 builtins.

Refused, each with its reason: any other node kind (classes and so metaclasses, generators' `yield`,
coroutines, `with`, walrus, `del`), any other attribute of a value (frames and code: `gi_frame`, `f_builtins`,
`cr_frame`, `f_back`; files: `to_json`, `tofile`, `from_csv`, `save_to_disk`), any builtin off the list,
anywhere in the file, called or handed on (`json.loads(s, object_hook=exec)`), `type` with other than one
argument, a format string that reaches an attribute or an item (`'{0.gi_frame}'.format(g)`) or that is not a
literal, a subscript by a dunder string (`globals()['__builtins__']`), dunder attributes, imports off the list
and module attributes off MODULE_ATTRIBUTES. `random` only by a plain top-level `import random`, which a drawing
file's run resolves to a seeded stand-in (hooks._SeededRandom): the process's global state is never reached.
"""

import ast
import builtins
import functools
import string
import warnings

SEEDED_DRAWS = ("shuffle", "sample", "choice", "choices", "randint")  # random's functions a hook may draw with
# Modules a hook may import: text and data handling that is deterministic and stays in the process.
ALLOWED_IMPORTS = {"random", "re", "string", "datasets", "functools", "typing", "collections", "json", "math", "numpy",
                   "unicodedata", "itertools", "ast", "copy", "hashlib", "html", "dataclasses", "enum", "textwrap",
                   "__future__",
                   "sacrebleu", "rouge_score"}  # metric libraries lm-eval itself installs (truthfulqa's utils.py)
# An imported module's attributes: this explicit list (the 281 hook files of 0.4.9.2 used 17 of these pairs
# when it was made; the rest are of the same kind). Nothing here reads or writes a file.
MODULE_ATTRIBUTES = {
    "__future__": {"annotations"}, "ast": {"literal_eval"}, "datasets": {"Dataset"},
    "datasets.Dataset": {"from_dict", "from_list"},
    "hashlib": {"sha256", "md5"}, "html": {"unescape", "escape"},
    "numpy": {"array", "exp", "int32", "int64", "float32", "float64", "nanmax", "round", "sum", "argmax", "mean",
              "max", "min", "log", "sqrt", "isnan", "inf", "nan", "ndarray"},
    "re": {"findall", "sub", "match", "search", "compile", "split", "fullmatch", "escape", "IGNORECASE", "DOTALL",
           "MULTILINE", "Pattern", "Match", "finditer", "subn", "I", "S", "M"},
    "math": {"exp", "log", "sqrt", "isnan", "isinf", "inf", "nan", "floor", "ceil", "fsum", "log2", "log10"},
    "string": {"ascii_uppercase", "ascii_lowercase", "ascii_letters", "punctuation", "digits", "whitespace",
               "capwords"},
    "rouge_score.rouge_scorer": {"RougeScorer"}, "rouge_score.scoring": {"BootstrapAggregator"},
    # the global instance's draws (GPQA's, metabench's shuffle): a drawing file runs with the module's `random` bound
    # to random.Random(seed) (hooks.load), the state lm-eval's simple_evaluate gives process_docs (SOURCE_MAP step 84)
    "random": set(SEEDED_DRAWS),
    "sacrebleu": {"corpus_bleu", "sentence_bleu"}, "unicodedata": {"normalize", "category", "combining"},
    "json": {"loads", "dumps"}, "itertools": {"chain", "product", "permutations", "combinations", "islice"},
    "itertools.chain": {"from_iterable"}, "collections": {"Counter", "defaultdict", "OrderedDict", "namedtuple"},
    "functools": {"partial", "reduce", "lru_cache", "cache"}, "copy": {"deepcopy", "copy"},
    "textwrap": {"dedent", "indent", "wrap", "fill"},
    "typing": {"List", "Dict", "Optional", "Any", "Tuple", "Union", "Callable", "Iterable", "Sequence",
               "TYPE_CHECKING"},
    "dataclasses": {"dataclass", "field", "asdict"}, "enum": {"Enum", "IntEnum", "auto"},
}
SUBMODULES = {"rouge_score.rouge_scorer", "rouge_score.scoring"}  # `from rouge_score import scoring`

# The node kinds the measured files use, and operators, literals and loops of the same families (none reaches
# an object the measured kinds cannot).
MEASURED_NODES = {
    "Add", "And", "AnnAssign", "Assign", "Attribute", "AugAssign", "BinOp", "BoolOp", "Break", "Call", "Compare",
    "Constant", "Dict", "DictComp", "Div", "Eq", "ExceptHandler", "Expr", "For", "FormattedValue", "FunctionDef",
    "GeneratorExp", "Global", "Gt", "GtE", "If", "IfExp", "Import", "ImportFrom", "In", "Is", "JoinedStr", "Lambda",
    "List", "ListComp", "Load", "Lt", "Module", "Mult", "Name", "Not", "NotEq", "NotIn", "Or", "Raise", "Return",
    "Slice", "Starred", "Store", "Sub", "Subscript", "Try", "Tuple", "USub", "UnaryOp", "alias", "arg", "arguments",
    "comprehension", "keyword"}
ALLOWED_NODES = MEASURED_NODES | {"Pass", "Continue", "Mod", "FloorDiv", "Pow", "LtE", "IsNot", "UAdd", "Set",
                                  "SetComp", "While", "Assert"}
# The attribute names the measured files take of values (of imported modules: MODULE_ATTRIBUTES).
ALLOWED_ATTRIBUTES = {
    "add_scores", "aggregate", "append", "astype", "capitalize", "encode", "endswith", "features", "filter",
    "fmeasure", "format", "from_dict", "get", "hexdigest", "index", "items", "join", "keys", "lower", "lstrip", "map",
    "mid", "pop", "removeprefix", "replace", "rstrip", "score", "sort", "split", "startswith", "strip", "update",
    "upper"}
# The builtins the measured files use, and pure functions and exceptions of the same kind.
MEASURED_BUILTINS = {"Exception", "ValueError", "bool", "dict", "enumerate", "globals", "int", "isinstance", "len",
                     "list", "map", "print", "range", "str", "type", "zip"}
ALLOWED_BUILTINS = MEASURED_BUILTINS | {
    "abs", "all", "any", "chr", "divmod", "filter", "float", "frozenset", "max", "min", "ord", "reversed", "round",
    "set", "sorted", "sum", "tuple", "KeyError", "IndexError", "TypeError", "True", "False", "None"}
BUILTIN_NAMES = frozenset(dir(builtins))
WHY_BUILTIN = {"open": "opens files", "eval": "evaluates text as code", "exec": "runs text as code",
               "__import__": "imports by name", "compile": "compiles text as code", "input": "reads the terminal",
               "getattr": "reaches attributes by computed name", "setattr": "sets attributes by name",
               "delattr": "deletes attributes by name", "vars": "reads a namespace", "locals": "reads a namespace",
               "__builtins__": "reaches the builtins", "breakpoint": "starts a debugger",
               "memoryview": "reads raw memory", "object": "reaches every class", "super": "reaches base classes"}
REFUSED_CALLS = {"load_dataset": "loads a dataset (the network or the hub)"}  # a name a hook may bind, never call
FORMAT_METHODS = ("format", "format_map")


def parsed(data: bytes | str) -> ast.Module:
    """The syntax tree of a file of someone else's code (a hook file, lm-eval's sources), read statically; what the
    parser warns about it (an invalid escape sequence in lm-eval's own utils.py) is not ours to print in the middle of
    a command's output, and under PYTHONWARNINGS=error would read as a file that does not parse."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        return ast.parse(data)


def draws_random(data: bytes) -> bool:
    """Whether a hook file (one file_reason accepts) draws from `random`: a plain top-level `import random`."""
    try:
        tree = parsed(data)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Import) and any(a.name == "random" for a in node.names) for node in tree.body)


@functools.lru_cache(maxsize=1024)  # keyed by the bytes: --list-tasks reads one utils.py for many configs
def file_reason(file_name: str, data: bytes, function: str) -> str | None:
    """Why the hook file may not run as `function`'s home (read statically, never run), or None."""
    try:
        tree = parsed(data)
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
                if top == "random" and not (isinstance(node, ast.Import) and node in tree.body
                                            and [(a.name, a.asname) for a in node.names] == [("random", None)]):
                    return (f"{file_name} imports random other than by a plain top-level `import random` (a name "
                            "bound from random, an alias or an import inside a function would draw from the "
                            "process's global state, which the audit cannot seed: it binds the module's own "
                            "`random`)")
                if top not in ALLOWED_IMPORTS:
                    return f"{file_name} imports {name} (hooks may import only {', '.join(sorted(ALLOWED_IMPORTS))})"
            for alias in node.names:
                listed = MODULE_ATTRIBUTES.get(node.module or "", ()) if isinstance(node, ast.ImportFrom) else ()
                if isinstance(node, ast.ImportFrom) and alias.name not in listed and \
                        f"{node.module}.{alias.name}" not in SUBMODULES:
                    return (f"{file_name} imports {alias.name} from {node.module} (not on the hook check's list of "
                            "module attributes)")
                if isinstance(node, ast.Import):
                    imported[alias.asname
                             or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                else:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return reason(file_name, tree, imported)


def reason(file_name: str, tree: ast.Module, imported: dict) -> str | None:
    """Why the file may not run as a hook (read statically), or None. imported: a name bound by an import ->
    the dotted module (or module.name) it stands for."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    literals = _string_bindings(tree)
    for node in ast.walk(tree):
        kind = type(node).__name__
        if kind not in ALLOWED_NODES:
            return (f"{file_name} uses a {kind} node (the hook check allows the node kinds lm-eval's own hook "
                    "files use)")
        found = _node_reason(file_name, node, imported, parents, literals)
        if found:
            return found
    return None


def _node_reason(file_name, node, imported, parents, literals) -> str | None:
    if isinstance(node, ast.Call):
        return _call_reason(file_name, node, literals)
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("__"):
            return (f"{file_name} reaches the attribute {node.attr} (dunder attributes lead out of the allowed "
                    "modules)")
        if isinstance(node.value, ast.Name) and node.value.id in imported:
            return None  # a module's attribute: _imported_use, from the Name
        if _module_chain(node.value, imported) is not None:  # `datasets.Dataset.from_dict`: each link's own list
            return _chain_reason(file_name, node, imported)
        if node.attr not in ALLOWED_ATTRIBUTES:
            return (f"{file_name} reaches the attribute {node.attr} of a value (not among the attributes lm-eval's "
                    "own hook files take)")
    elif isinstance(node, ast.Name):
        return _name_reason(file_name, node, imported, parents)
    elif isinstance(node, ast.Subscript):
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, str) and index.value.startswith("__"):
            return f"{file_name} subscripts by the dunder string {index.value!r}"
    return None


def _call_reason(file_name: str, node: ast.Call, literals: dict) -> str | None:
    called = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
    if called in REFUSED_CALLS:
        return f"{file_name} calls {called} (it {REFUSED_CALLS[called]})"
    if isinstance(node.func, ast.Name) and called == "type" and (len(node.args) != 1 or node.keywords):
        return f"{file_name} calls type with other than one argument (it builds a class)"
    if isinstance(node.func, ast.Attribute) and called in FORMAT_METHODS:
        receiver = node.func.value
        if isinstance(receiver, ast.Constant) and isinstance(receiver.value, str):
            templates = [receiver.value]
        elif isinstance(receiver, ast.Name) and receiver.id in literals:
            templates = literals[receiver.id]
        else:
            return (f"{file_name} calls .{called} on a format string that is not a literal (a field could reach "
                    "attributes)")
        reaching = next(filter(None, map(_reaching_field, templates)), None)
        if reaching:
            return f"{file_name} formats a string whose field {reaching} reaches an attribute or item"
    return None


def _name_reason(file_name: str, node: ast.Name, imported: dict, parents: dict) -> str | None:
    if node.id in BUILTIN_NAMES and node.id not in ALLOWED_BUILTINS:  # anywhere: a builtin handed on is reached
        why = f"it {WHY_BUILTIN[node.id]}" if node.id in WHY_BUILTIN else \
            "not among the builtins lm-eval's own hook files use"
        return f"{file_name} uses {node.id} ({why})"
    if node.id == "globals":  # only globals().update({...}), how global_mmlu binds its functions
        call, attribute = parents.get(node), parents.get(parents.get(node))
        if not (isinstance(call, ast.Call) and isinstance(attribute, ast.Attribute) and attribute.attr == "update"):
            return f"{file_name} uses globals() other than globals().update(...)"
    if node.id in imported and not isinstance(node.ctx, ast.Store):
        return _imported_use(file_name, node, imported[node.id], parents)
    return None


def _module_chain(node, imported: dict) -> str | None:
    """The dotted name of an attribute chain rooted at an imported name (`datasets.Dataset`), else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in imported:
        return ".".join([imported[node.id], *reversed(parts)])
    return None


def _chain_reason(file_name: str, node, imported: dict) -> str | None:
    """Why a link of a module's attribute chain is refused, the innermost first (numpy.random in numpy.random.rand,
    though the walk meets the whole chain first), or None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
        prefix = _module_chain(node.value, imported)
        return _chain_reason(file_name, node.value, imported) or (
            None if node.attr in MODULE_ATTRIBUTES.get(prefix or "", ALLOWED_ATTRIBUTES) else
            f"{file_name} reaches {prefix}.{node.attr} (not on the hook check's list of module attributes)")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        dotted = imported[node.value.id]
        if node.attr not in MODULE_ATTRIBUTES.get(dotted, ()):
            return f"{file_name} reaches {dotted}.{node.attr} (not on the hook check's list of module attributes)"
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
    if isinstance(parent, ast.If) and parent.test is node:  # `if TYPE_CHECKING:` (0.4.13's hook files)
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


def _string_bindings(tree: ast.Module) -> dict:
    """name -> its string literals, for each name every binding of which in the file is a plain string literal
    (a template a hook calls .format on: `PROMPT = "..."`); a name bound otherwise anywhere is left out."""
    literals: dict = {}
    other: set = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.comprehension, ast.NamedExpr)) else []
        value = node.value if isinstance(node, ast.Assign) else None
        for target in targets:
            if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                literals.setdefault(target.id, []).append(value.value)
            else:
                other.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        if isinstance(node, ast.arg):
            other.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ExceptHandler)) and node.name:
            other.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            other.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Global):
            other.update(node.names)
    return {name: values for name, values in literals.items() if name not in other}


@functools.lru_cache(maxsize=65536)
def _reaching_field(text: str) -> str | None:
    """The first replacement field of `text`, read as str.format reads it (nested fields in a format spec too),
    whose name reaches an attribute or an item ('{0.gi_frame}', '{x[__globals__]}'), or None (also for text
    .format would refuse: it raises before reaching anything)."""
    try:
        for _, field, spec, _ in string.Formatter().parse(text):
            if field is not None and ("." in field or "[" in field):
                return "{" + field + "}"
            if spec and "{" in spec:
                nested = _reaching_field(spec)
                if nested:
                    return nested
    except ValueError:
        return None
    return None
