"""Which installed lm-eval tasks the audit supports, and why not: the support policy (metrics, hooks, few-shot
samplers) and the listing of the installed multiple_choice tasks."""

import re
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.releases import scope_reason
from sst2_audit.protocol.generation import generation_reason
from sst2_audit.protocol.metrics import choice_count_needed, yaml_metrics
from sst2_audit.protocol.perplexity import ROLLING_METRICS
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.task.hook_check import draws_random
from sst2_audit.task.hooks import code_reason, find, Hook, HOOK_KEYS, INERT_KEYS, RESULTS_KEY, source_sha256
from sst2_audit.task.yaml_file import read as read_yaml
from sst2_audit.util.errors import CheckFailed, InputError




@dataclass(frozen=True)
class ResultsRule:
    """A process_results hook we re-derive: the metric of METRICS computing it (None: the YAML's metrics), the YAML
    metric_list it must come with (lm-eval's names), and the document field holding the 0/1 label of each choice;
    or, for a loglikelihood_rolling task, the document field whose words and bytes it counts."""
    metric: str | None
    metric_list: tuple
    labels: tuple = ()  # the path of keys to the choices' labels in a document
    counted: str | None = None  # a rolling task's: the field counted (default: doc_to_target's text)


# process_results hooks recognised by the sha256 of the function's own source (hooks.source_sha256): the
# same bytes in another file are the same function; any edit is another function, refused.
RESULTS_RULES = {
    # truthfulqa/utils.py and okapi/truthfulqa_multilingual/utils.py process_results_mc2 (SOURCE_MAP step 62)
    "e4c822b6b242625dce81f4a63c00630d81b4cd406ccebe64e8399091917e6d14":
        ResultsRule("mc2", ("acc",), ("mc2_targets", "labels")),
    # wikitext/preprocess_wikitext.py process_results: the words and bytes of doc["page"], before the detokenizer
    # doc_to_target applies (SOURCE_MAP step 97)
    "63f322707ad6f395b690b41477c74228b2f48d6bc5a87643c7b89c2aa3c059a2":
        ResultsRule(None, tuple(ROLLING_METRICS), counted="page"),
}


def installed_tasks_root() -> Path:
    return installed_root() / "lm_eval" / "tasks"


def yaml_sources(reading) -> list:
    """(relative path, bytes) of every file a reading parsed: where a `!function` hook was written."""
    return [(relative, reading.data[relative]) for relative in reading.files]


def hook_reason(config: dict, reading) -> tuple:
    """(why the config's `!function` hooks cannot run as pinned shared code or None, the process_results
    hook's rule or None). Without the YAML's path any hook is refused: it cannot be located."""
    import yaml

    functions = sorted(key for key, value in config.items() if isinstance(value, yaml.Node))
    if not functions:
        return None, None
    other = [key for key in functions if key not in (*HOOK_KEYS, RESULTS_KEY, *INERT_KEYS)]
    if other:
        return (f"uses `!function` hooks for {', '.join(other)} (shared hooks: {', '.join(HOOK_KEYS)}; "
                f"a {RESULTS_KEY} hook only where its metric is re-derived)"), None
    if reading is None:
        return f"uses `!function` hooks ({', '.join(functions)})", None

    root = installed_tasks_root().parent.parent
    try:
        hooks = find(config, yaml_sources(reading), root)
    except (InputError, ValueError) as error:
        return f"has a `!function` hook that cannot be located ({error})", None
    rule = None
    for hook in hooks:
        if hook.key == RESULTS_KEY:
            rule = results_rule(hook)  # the function's source hashed once, for the reason and the metric
            if rule is None:
                return (f"has its own process_results ({hook.path}::{hook.function}), a metric computed by task "
                        f"code that is not re-derived (re-derived: truthfulqa's process_results_mc2)"), None
        reason = code_reason(Path(hook.file), hook.function) or _draws_reason(config, hook)
        if reason:
            return f"has a `!function` {hook.key} hook that cannot run as pinned shared code: {reason}", None
    return None, rule


def _draws_reason(config: dict, hook: Hook) -> str | None:
    """Why a hook that draws from random cannot be given lm-eval's state (hooks.seeded), or None: only process_docs
    draws at one point lm-eval's seeding fixes, and only when every split the task processes is one split (the
    first map of it draws from the seeded state, later calls read datasets' cache of that map; a second split would
    draw in lm-eval's construction order)."""
    if not draws_random(Path(hook.file).read_bytes()):
        return None
    if hook.key != "process_docs":
        return (f"{Path(hook.file).name} draws from random in a {hook.key} hook (lm-eval calls it once per request "
                "and again per log line: only a process_docs hook draws at a point its seeding fixes)")
    splits = {str(config[key]) for key in (f"{name}_split" for name in ("training", "validation", "test", "fewshot"))
              if config.get(key) is not None}
    if len(splits) > 1:
        return (f"{Path(hook.file).name} draws from random and the task processes the splits {sorted(splits)} (each "
                "split's map draws after the one before it, in lm-eval's construction order)")
    return None


def results_rule(hook: Hook) -> ResultsRule | None:
    return RESULTS_RULES.get(source_sha256(Path(hook.file), hook.function) or "")


def metrics_of(config: dict, rule: ResultsRule | None) -> tuple:
    """The metrics a run records, in metric_list's order: the YAML's argmax metrics, or a re-derived
    process_results hook's metric (lm-eval reports it under the YAML's name)."""
    names = tuple(m.get("metric") if isinstance(m, dict) else m for m in config.get("metric_list")
                  or [{"metric": "acc"}])
    return (rule.metric,) if rule is not None and rule.metric and names == rule.metric_list else names


def unsupported_reason(config: dict, reading=None) -> str | None:
    """Why this config is outside the audit's protocol, or None."""
    hooks, rule = hook_reason(config, reading)
    if hooks:
        return hooks
    if config.get("output_type") == "generate_until":
        if config.get("process_results") is not None:
            return "has its own process_results (a generate_until task: exact_match alone is re-derived)"
        return generation_reason(config) or _shared_reason(config)
    if config.get("output_type") == "loglikelihood_rolling":
        return rolling_reason(config, rule)
    if config.get("output_type") != "multiple_choice":
        return (f"output_type is {config.get('output_type')!r}, not multiple_choice, generate_until or "
                "loglikelihood_rolling")
    if config.get("process_results") is not None:
        if rule is None:  # a plain (not `!function`) process_results, or one hook_reason did not accept
            return "has its own process_results"
        names = tuple(m.get("metric") if isinstance(m, dict) else m for m in config.get("metric_list") or [])
        if names != rule.metric_list:
            return (f"reports metrics {list(names)} through its process_results, which is re-derived for "
                    f"{list(rule.metric_list)} only")
    names = metrics_of(config, rule)
    other = [n for n in names if n not in (yaml_metrics() if rule is None else (rule.metric,))]
    if other:
        return f"reports metrics {other} (supported: {', '.join(yaml_metrics())})"
    fixed = config.get("doc_to_choice")
    needed = choice_count_needed(names)
    if needed and isinstance(fixed, (list, dict)) and len(fixed) != needed[1]:
        return (f"reports {needed[0]}, defined for {needed[1]} choices (lm-eval's aggregation), over {len(fixed)} "
                "choices")
    if config.get("doc_to_choice") is None:
        return "has no doc_to_choice"
    if config.get("filter_list"):
        return "applies filters"
    return _shared_reason(config)


def rolling_reason(config: dict, rule: ResultsRule | None) -> str | None:
    """Why a loglikelihood_rolling config is outside the protocol, or None: its metrics lm-eval's perplexities,
    counted by lm-eval's own rule or a recognised process_results (wikitext's), no shots, no filters."""
    names = [m.get("metric") if isinstance(m, dict) else m for m in config.get("metric_list") or []]
    other = [str(name) for name in names if name not in ROLLING_METRICS]
    if not names or other or len(set(names)) != len(names):
        return (f"reports metrics {other or names} (a loglikelihood_rolling task: {', '.join(ROLLING_METRICS)}, each "
                "once)")
    for entry in config.get("metric_list") or []:  # lm-eval's own aggregation of each, or none named
        metric = ROLLING_METRICS[entry["metric"]] if isinstance(entry, dict) else None
        if metric is not None and entry.get("aggregation", metric.aggregation) != metric.aggregation:
            return (f"aggregates {metric.name} by {str(entry.get('aggregation'))[:40]!r} (re-derived: "
                    f"{metric.aggregation})")
    if config.get("process_results") is not None and (rule is None or rule.counted is None):
        return "has its own process_results (a loglikelihood_rolling task: lm-eval's counts or wikitext's)"
    if config.get("num_fewshot") or config.get("fewshot_config") or config.get("filter_list"):
        return "sets shots or filters (a loglikelihood_rolling request is the document's text alone)"
    if config.get("doc_to_target") is None:
        return "has no doc_to_target (the text a loglikelihood_rolling request scores)"
    if not (config.get("test_split") or config.get("validation_split")):
        return "names neither a test nor a validation split"
    return None


def _shared_reason(config: dict) -> str | None:
    """What both output types need: shots we re-derive, one prompt per document, a split to score."""
    fewshot = fewshot_reason(config)
    if fewshot:
        return fewshot
    if config.get("use_prompt"):
        return "uses a promptsource prompt"
    if config.get("gen_prefix") is not None:  # lm-eval appends target_delimiter + gen_prefix to the context
        return "sets gen_prefix (a prefix of the answer), which the independent path does not re-derive yet"
    if isinstance(config.get("doc_to_text"), int):
        return "has multiple inputs"
    if not (config.get("test_split") or config.get("validation_split")):
        return "names neither a test nor a validation split"
    return None


SAMPLERS = ("default", "first_n")  # the few-shot samplers fewshot.py re-derives


def fewshot_reason(config: dict) -> str | None:
    """Why this config's few-shot prompts cannot be re-derived, or None. Checked for every config, not only
    few-shot ones: a profile may pin shots for any task (a `fewshot_config` alone draws nothing at 0 shots)."""
    fewshot = config.get("fewshot_config") or {}
    if not isinstance(fewshot, dict):
        return f"has a fewshot_config that is not a mapping ({str(fewshot)[:40]!r})"
    sampler = fewshot.get("sampler", "default")
    if sampler not in SAMPLERS:
        return f"draws shots with the sampler {sampler!r} (re-derived: {', '.join(SAMPLERS)})"
    overrides = sorted(set(fewshot) & {"doc_to_text", "doc_to_target", "doc_to_choice", "process_docs"})
    if overrides:
        return f"overrides {', '.join(overrides)} for its shots (fewshot_config), which is not re-derived"
    samples = fewshot.get("samples")
    if "samples" in fewshot and not (isinstance(samples, list) and samples
                                     and all(isinstance(doc, dict) for doc in samples)):
        return ("takes its shots from fewshot_config.samples that are not a literal list of documents (a "
                "function's samples are not re-derived)")
    shots = config.get("num_fewshot")
    if shots is not None and not (type(shots) is int and 0 <= shots <= 1024):
        return f"states num_fewshot {str(shots)[:20]!r}, not an integer within 0..1024"
    return None


TASK_LINE = re.compile(r"^['\"]?task['\"]?:[ \t]*(.+?)[ \t]*$", re.MULTILINE)  # a YAML's own task name


def installed_configs(pattern: str = "*"):
    """(path, reading) of every installed task YAML whose task name matches the glob `pattern` (a YAML
    names its own task, so a file whose `task:` line cannot match is skipped before it is parsed)."""
    import fnmatch

    tasks = installed_tasks_root()
    root = tasks.parent.parent
    for path in sorted(tasks.rglob("*.yaml")):
        if pattern != "*":
            named = TASK_LINE.search(path.read_text(encoding="utf-8", errors="replace"))
            if named is None or not fnmatch.fnmatchcase(named.group(1).strip("'\""), pattern):
                continue
        try:
            reading = read_yaml(root, path.relative_to(root).as_posix())
        except (InputError, CheckFailed):  # a YAML this reader refuses is not a task we can list
            continue
        config = reading.config
        if (isinstance(config, dict) and isinstance(config.get("task"), str)
                and fnmatch.fnmatchcase(config["task"], pattern)):
            yield path, reading


def list_installed(pattern: str = "*", version: str | None = None, output_type: str = "multiple_choice") -> list:
    """(task, YAML path, None or the reason it is unsupported) of every installed task of `output_type`
    whose name matches the glob `pattern`; `version`: the lock's lm-eval release, whose scope applies too."""
    root = installed_tasks_root()
    return [(reading.config["task"], str(path.relative_to(root.parent.parent)), _reason(reading, version))
            for path, reading in installed_configs(pattern) if reading.config.get("output_type") == output_type]


def _reason(reading, version: str | None) -> str | None:
    reason = unsupported_reason(reading.config, reading)
    if reason is None and version is not None:  # what run and --pin would refuse under the lock's release
        beyond = scope_reason(version, fewshot_keys=list(reading.config.get("fewshot_config") or {}),
                              includes=reading.widest_include)
        reason = f"has {beyond}, outside lm-eval {version}'s scope" if beyond else None
    return reason
