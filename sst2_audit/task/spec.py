"""The task as data: one typed spec per lm-eval multiple_choice task, read from the installed YAML.

Every other module asks the spec: which split is evaluated, how a document becomes a context,
its choices and its gold index, which delimiter goes before a choice, which metrics are reported.
The YAML is read with lm-eval's own loader (`include:` resolved) from the installed package,
whose files the lock pins by sha256; rendering is our own Jinja2 environment configured as
lm-eval's (StrictUndefined, trailing newlines kept, the `regex_replace` filter), so the
independent path never imports lm_eval. SST-2 is one instance: nothing outside this module
asks for a task by name.
"""

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.releases import require_release_scope
from sst2_audit.protocol.generation import generation_rule, GenerationRule
from sst2_audit.protocol.perplexity import ROLLING_METRICS
from sst2_audit.task.dataset import read_table, Row
from sst2_audit.task import hook_check
from sst2_audit.task.evaluator_pin import installed_root, verify_pinned
from sst2_audit.task.hooks import find, Hook, HOOK_KEYS, load, RESULTS_KEY, source
from sst2_audit.task.shapes import SHAPES, shape_of, TaskShape
from sst2_audit.task.yaml_file import read as read_yaml
from sst2_audit.util import warm
from sst2_audit.util.errors import InputError
from sst2_audit.util.suggest import did_you_mean
from sst2_audit.task.support import (
    ResultsRule, yaml_sources, metrics_of, results_rule, unsupported_reason,
)

TASKCONFIG_DEFAULTS = {"target_delimiter": " ", "description": ""}  # lm-eval's TaskConfig defaults


@dataclass(frozen=True)
class TaskSpec:
    name: str
    yaml_path: str  # relative to the folder holding the lm_eval package
    yaml_files: tuple  # every YAML file the loader read (the task's own first, then its includes)
    official: dict  # the merged official config, as lm-eval's loader returns it
    eval_split: str  # the split lm-eval scores: test_split if named, else validation_split
    splits: tuple  # every split the config names (fewshot_split too): the data files a run needs
    doc_to_text: object
    doc_to_choice: object
    doc_to_target: object
    target_delimiter: str
    description: str
    metrics: tuple  # from metric_list, in its order
    num_fewshot: int | None = None  # the YAML's own shot count (a profile's default), None when unstated
    hooks: tuple = ()  # the task's `!function` hooks (hooks.Hook), pinned: shared code, and a process_results
    results_rule: ResultsRule | None = None  # how we re-derive the task's process_results hook, if it has one
    widest_include: int = 0  # the most files one of its YAMLs' `include:` names (yaml_file.Reading)
    generation: GenerationRule | None = None  # a generate_until task's decode, filters and exact_match; else None
    shape: TaskShape = SHAPES["multiple_choice"]  # task/shapes.py: what differs by lm-eval's output_type


    @property
    def shared_hooks(self) -> tuple:
        """The hooks both paths run as the same pinned code (not a process_results: that one is re-derived)."""
        return tuple(hook for hook in self.hooks if hook.key in HOOK_KEYS)

    @property
    def rederived_hooks(self) -> tuple:
        """The process_results hook lm-eval alone runs, whose metric the independent path re-derives."""
        return tuple(hook for hook in self.hooks if hook.key == RESULTS_KEY)

    def true_choices(self, doc: dict, count: int) -> list | None:
        """A value metric's true choices (mc2: the choices labelled 1), None for an argmax task."""
        if self.results_rule is None or not self.results_rule.labels:
            return None
        labels: object = doc
        for key in self.results_rule.labels:
            labels = labels.get(key) if isinstance(labels, dict) else None
        field = ".".join(self.results_rule.labels)
        if not (isinstance(labels, list) and len(labels) == count
                and all(type(x) is int and x in (0, 1) for x in labels)):
            raise InputError(f"task {self.name}: {field} must be a 0/1 integer per choice ({count} choices), "
                             f"got {str(labels)[:60]!r}.")
        return [index for index, label in enumerate(labels) if label == 1]

    @property
    def code_files(self) -> tuple:
        """The hook files the task runs (relative to the lm_eval package's folder), pinned like its YAML."""
        return tuple(dict.fromkeys(hook.path for hook in self.hooks))

    @property
    def process_docs(self) -> Hook | None:
        return next((hook for hook in self.hooks if hook.key == "process_docs"), None)

    @property
    def draws_random(self) -> bool:
        """Whether its process_docs hook draws from random (hooks.seeded): its docs depend on simple_evaluate's seed."""
        hook = self.process_docs
        return hook is not None and hook_check.draws_random(Path(hook.file).read_bytes())

    def config(self, callables: bool, random_seed: int | None = None) -> dict:
        """The official config with each hook as lm-eval holds it: the function (to run the task; a hook that draws
        from random draws from random_seed, hooks.seeded), or its source as TaskConfig.to_dict logs it (to rebuild
        the logged config)."""
        import copy

        config = copy.deepcopy({key: value for key, value in self.official.items()
                                if key not in {hook.key for hook in self.hooks}})
        config.update({hook.key: load(hook, random_seed) if callables else source(hook) for hook in self.hooks})
        return config

    def processed(self, rows: list, parquet, random_seed: int | None = None) -> list:
        """A split's rows as lm-eval's docs: through the pinned process_docs hook when the task has one
        (it gets a datasets.Dataset of the verified parquet, as lm-eval's loader builds one; a hook that draws from
        random draws from random_seed, simple_evaluate's)."""
        hook = self.process_docs
        if hook is None:
            return rows

        warm.wait("transformers")  # datasets' fingerprint pickler reads transformers if it is in sys.modules
        import datasets

        docs = hook(datasets.Dataset(read_table(parquet)), random_seed=random_seed)
        return [Row(position, dict(doc)) for position, doc in enumerate(docs)]

    @property
    def fixed_choices(self) -> tuple | None:
        """The choice list when the YAML states it (public); None when it comes from the document."""
        return tuple(self.doc_to_choice) if isinstance(self.doc_to_choice, list) else None

    def choice_names(self, count: int) -> tuple:
        """How summaries name choice k: its text when the YAML fixes it, else 'choice k'."""
        fixed = self.fixed_choices
        return fixed if fixed is not None else tuple(f"choice {k}" for k in range(count))

    # --- rendering, as lm-eval's ConfigurableTask does it (SOURCE_MAP steps 9-12) ---
    def prefix(self, doc: dict) -> str:
        """The task's description rendered for this document ("" when it has none)."""
        return render(self.description, doc) if self.description else ""

    def text(self, doc: dict) -> str:
        """doc_to_text alone (a few-shot context puts the shots between the description and this)."""
        text = self._doc_to_text(doc)
        if not isinstance(text, str):
            raise InputError(f"task {self.name}: doc_to_text gave {type(text).__name__} {str(text)[:40]!r}; "
                             "a context must be text.")
        return text

    def input_index(self, doc: dict) -> int | None:
        """A multiple-input task's doc_to_text gives the right choice's index (winogrande), else None."""
        text = self._doc_to_text(doc)
        return text if type(text) is int else None

    def shot_question(self, doc: dict) -> str:
        """A shot's question text (ContextSampler.get_context): doc_to_text, or the chosen choice of a
        multiple-input task."""
        index = self.input_index(doc)
        return self.text(doc) if index is None else self.choices(doc)[index]

    def requests(self, doc: dict, prefix: str) -> list:
        """(context, continuation) per choice as construct_requests builds them; `prefix` is the description
        and the shots. A multiple-input task puts each choice in the context and scores the shared
        continuation, doc_to_target (SOURCE_MAP step 61). A generate_until task's one request is its context
        (lm-eval pairs it with the generation_kwargs; "" stands for them here)."""
        return self.shape.requests(self, doc, prefix)

    def choice_requests(self, doc: dict, prefix: str) -> list:
        """A multiple_choice task's requests (task/shapes.py)."""
        choices, text = self.choices(doc), self._doc_to_text(doc)
        if isinstance(text, str):
            return [(prefix + text, self.target_delimiter + choice) for choice in choices]
        target = self.target(doc)
        if not isinstance(target, str):
            raise InputError(f"task {self.name}: a multiple-input doc_to_target must give the shared continuation "
                             f"as text, got {type(target).__name__} {str(target)[:40]!r}.")
        return [(prefix + choice, self.target_delimiter + target) for choice in choices]

    def _doc_to_text(self, doc: dict):
        setting = self.doc_to_text
        if isinstance(setting, str) and setting in doc:
            text = doc[setting]
        elif isinstance(setting, str):
            text = _last[2] if _last[0] is setting and _last[1] is doc else render(setting, doc)
            _last[:] = setting, doc, text
            if text.isdigit():  # lm-eval reads digits as a choice index: a multiple-input task
                text = int(text)
        elif isinstance(setting, Hook):
            text = setting(doc)
        else:
            text = setting
        if not (isinstance(text, str) or type(text) is int):
            raise InputError(f"task {self.name}: doc_to_text gave {type(text).__name__} {str(text)[:40]!r}; "
                             "expected text, or a choice index (a multiple-input task).")
        return text

    def choices(self, doc: dict) -> list:
        setting = self.doc_to_choice
        if isinstance(setting, str):
            choices = doc[setting] if setting in doc else ast.literal_eval(render(setting, doc))
        elif isinstance(setting, dict):
            choices = list(setting.values())
        elif isinstance(setting, Hook):
            choices = setting(doc)
        else:
            choices = setting
        if not (isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices)):
            raise InputError(f"task {self.name}: doc_to_choice must give a non-empty list of strings, "
                             f"got {str(choices)[:60]!r}.")
        return list(choices)

    def target(self, doc: dict):
        """doc_to_target as lm-eval returns it (and logs it as the sample's `target`)."""
        setting = self.doc_to_target
        if isinstance(setting, str) and setting in doc:
            return doc[setting]
        if isinstance(setting, str):
            text = render(setting, doc)
            return ast.literal_eval(text) if text.isdigit() else text
        if isinstance(setting, Hook):
            return setting(doc)
        return setting

    def rolling_text(self, doc: dict) -> str:
        """A loglikelihood_rolling task's one request: doc_to_target's text, scored whole (task/shapes.py)."""
        text = self.target(doc)
        if not isinstance(text, str) or not text:
            raise InputError(f"task {self.name}: doc_to_target gave {type(text).__name__} {str(text)[:40]!r}; a "
                             "loglikelihood_rolling request scores a non-empty text.")
        return text

    def rolling_counts(self, doc: dict) -> dict:
        """{metric: the words or bytes lm-eval divides by}: of doc_to_target's text, or of the field a recognised
        process_results counts (wikitext's: the page before its detokenizer)."""
        counted = self.results_rule.counted if self.results_rule is not None else None
        text = doc.get(counted) if counted else self.rolling_text(doc)
        if not isinstance(text, str):
            raise InputError(f"task {self.name}: the field {counted!r} its process_results counts is "
                             f"{type(text).__name__}, not text.")
        return {name: ROLLING_METRICS[name].count(text) for name in self.metrics}

    def reference(self, doc: dict) -> str:
        """A generate_until task's gold answer as process_results compares it: doc_to_target, cast to the
        response's type (text) when it is not text; a list (lm-eval's multiple targets) is not re-derived."""
        target = self.target(doc)
        if isinstance(target, (list, tuple, dict)):
            raise InputError(f"task {self.name}: doc_to_target gave {type(target).__name__} {str(target)[:40]!r}; "
                             "multiple targets are not re-derived.")
        return target if isinstance(target, str) else str(target)

    def gold(self, doc: dict, choices: list) -> int:
        """The target resolved to a choice index as process_results does (a multiple-input task's gold is
        doc_to_text's index); out of range is bad data."""
        index = self.input_index(doc)
        target = self.target(doc) if index is None else index
        if isinstance(target, str):
            target = choices.index(target) if target in choices else -1
        if type(target) is not int or not 0 <= target < len(choices):
            raise InputError(f"task {self.name}: the gold answer {str(target)[:40]!r} is not an index into the "
                             f"{len(choices)} choices.")
        return target


_ENVIRONMENT = None
# [template, doc, text] of the last doc_to_text rendered: a question asks for it for its requests, its gold and a
# shot's question; a Jinja render cannot change the doc, so the same objects give the same text (the identity level
# of a 73,584-row adoption rendered each row three times)
_last: list = [None, None, None]


@functools.lru_cache(maxsize=1024)
def _compiled(template: str):
    """A task's few templates compiled once (lm-eval compiles one per call: the same template renders the same)."""
    return _ENVIRONMENT.from_string(template)  # type: ignore[union-attr]  # render() made the environment first


def render(template: str, doc: dict) -> str:
    """A Jinja2 template rendered as lm_eval.utils.apply_template does (SOURCE_MAP step 9b)."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        from jinja2 import BaseLoader, Environment, StrictUndefined

        _ENVIRONMENT = Environment(loader=BaseLoader, undefined=StrictUndefined,  # type: ignore[arg-type]  # lm-eval's
                                   keep_trailing_newline=True)  # own call (utils.py), the class, kept as it is
        _ENVIRONMENT.filters["regex_replace"] = lambda s, pattern, repl, count=0: re.sub(pattern, repl, s, count=count)
    try:
        return _compiled(template).render(**doc)
    except Exception as error:  # a template naming a field the data lacks, etc.
        raise InputError(f"template {template[:60]!r}: cannot render it for this document ({error}).") from None


# --- reading the installed YAML ---


def spec_from_yaml(name: str, relative: str, root: Path, pins: dict | None = None) -> TaskSpec:
    """The spec of the YAML at root/relative; with the lock's pins, every file is verified before it is parsed."""
    reading = read_yaml(root, relative, pins, f"task {name}")  # lm-eval never reads a task YAML itself here
    config = reading.config
    reason = unsupported_reason(config, reading)
    if reason:
        raise InputError(f"task {name} ({relative}) is not supported: it {reason}.")
    if config.get("task") != name:
        raise InputError(f"task {name}: {relative} defines task {config.get('task')!r}, not {name!r}.")
    files = tuple(reading.files)
    # every split lm-eval reads: its loader builds each one named, and shots come from fewshot_split (MMLU's dev)
    splits = tuple(dict.fromkeys(s for s in (config.get("training_split"), config.get("validation_split"),
                                             config.get("test_split"), config.get("fewshot_split")) if s))

    hooks = find(config, yaml_sources(reading), root)
    hooked = {hook.key: hook for hook in hooks}
    rule = results_rule(hooked[RESULTS_KEY]) if RESULTS_KEY in hooked else None
    metrics = metrics_of(config, rule)
    return TaskSpec(
        name=name, yaml_path=relative, yaml_files=files, official=config,
        eval_split=config.get("test_split") or config["validation_split"], splits=splits,
        doc_to_text=hooked.get("doc_to_text", config.get("doc_to_text")),
        doc_to_choice=hooked.get("doc_to_choice", config.get("doc_to_choice")),
        doc_to_target=hooked.get("doc_to_target", config.get("doc_to_target")),
        target_delimiter=config.get("target_delimiter", TASKCONFIG_DEFAULTS["target_delimiter"]),
        description=config.get("description") or TASKCONFIG_DEFAULTS["description"], metrics=metrics,
        num_fewshot=config.get("num_fewshot"), hooks=hooks, results_rule=rule, widest_include=reading.widest_include,
        generation=generation_rule(config) if config.get("output_type") == "generate_until" else None,
        shape=shape_of(config.get("output_type")),
    )


def spec_for(lock, name: str) -> TaskSpec:
    """The spec of a task the lock pins (evaluator.tasks names its YAML; every file read must be pinned)."""

    tasks = lock.evaluator.tasks
    if name not in tasks:
        raise InputError(f"{lock.path}: task {name!r} is not pinned{did_you_mean(name, tasks)} (evaluator.tasks "
                         f"has {sorted(tasks)}); "
                         "`sst2-audit run --list-tasks` lists the installed tasks and whether they are supported.")

    root = installed_root()
    # the pinned files beside the task's YAML first: a changed hook is a failed check naming its file, before its
    # changed source could make the task look unsupported
    folder = str(Path(tasks[name]).parent) + "/"
    verify_pinned(lock, {path: sha for path, sha in lock.evaluator.files.items()
                         if path.startswith(folder) and "/" not in path[len(folder):]})
    spec = spec_from_yaml(name, tasks[name], root, lock.evaluator.files)  # each YAML verified before parsed
    unpinned = [f for f in spec.yaml_files + spec.code_files if f not in lock.evaluator.files]
    if unpinned:
        raise InputError(f"{lock.path}: task {name} reads {', '.join(unpinned)}, which evaluator.files does not pin.")
    import dataclasses

    # each hook carries the lock's pin: it is loaded only from bytes of that sha256 (hooks.load)
    pinned = tuple(dataclasses.replace(hook, sha256=lock.evaluator.files[hook.path]) for hook in spec.hooks)
    rendering = {hook.key: hook for hook in pinned if hook.key in HOOK_KEYS and hook.key != "process_docs"}  # doc_to_*
    require_release_scope(lock.evaluator.version, str(lock.given or lock.path), task=f"task {name}",
                          fewshot_keys=list(spec.official.get("fewshot_config") or {}), includes=spec.widest_include)
    return dataclasses.replace(spec, hooks=pinned, **rendering)


def require_data_for(spec: TaskSpec, profile) -> None:
    """A profile's data files must be exactly the splits the task config names."""
    have = sorted(f.split for f in profile.data.files)
    if have != sorted(spec.splits):
        raise InputError(f"profile {profile.name}: its data files are for splits {have}; task {spec.name} names "
                         f"{sorted(spec.splits)} (it scores {spec.eval_split!r}; lm-eval 0.4.9.2 builds every split "
                         "its YAML names, so each needs a file).")
