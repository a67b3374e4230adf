"""A generate_until task's answer: the filters and exact_match, re-derived as pure functions of the generated text
(no lm_eval import), and the rule that reads them from a task config, with the reason when it cannot.

Written from lm-eval's filters (filters/extraction.py, selection.py, transformation.py), its filter ensembles
(a filter_list entry is a pipeline; no filter_list is the one pipeline "none" = take_first) and its exact_match
(api/metrics.py exact_match_hf_evaluate, called by ConfigurableTask.process_results with one reference and one
prediction); SOURCE_MAP steps 80-82.
"""

import re
import string
from dataclasses import dataclass

# lm-eval's registered filters that are pure functions of one response, re-derived here; the others (map,
# majority_vote, take_first_k, format_span, regex_pos, multi_choice_regex, custom, decontaminate) are refused
FILTERS = ("regex", "take_first", "lowercase", "uppercase", "remove_whitespace")
FILTER_ARGS = {"regex": {"regex_pattern", "group_select", "fallback"}}
# a greedy decode's whole setting; top_p and top_k only shape sampling (transformers applies them with do_sample)
GENERATION_KEYS = {"until", "do_sample", "temperature", "max_gen_toks", "top_p", "top_k"}
EXACT_MATCH = "exact_match"  # a generate_until task's one metric, as lm-eval names it
EXACT_MATCH_ARGS = {"ignore_case", "ignore_punctuation", "ignore_numbers", "regexes_to_ignore"}
METRIC_KEYS = {"metric", "aggregation", "higher_is_better", *EXACT_MATCH_ARGS}


@dataclass(frozen=True)
class Step:
    function: str
    regex_pattern: str = r"#### (\-?[0-9\.\,]+)"  # RegexFilter's defaults
    group_select: int = 0
    fallback: str = "[invalid]"


@dataclass(frozen=True)
class Pipeline:
    name: str  # the filter key lm-eval reports under (`exact_match,<name>`)
    steps: tuple

    def apply(self, response: str) -> str:
        """One response through the pipeline: each filter on the list of one response, then take_first."""
        values = [response]
        for step in self.steps:
            if step.function == "take_first":
                return values[0]
            values = [_one(step, value) for value in values]
        raise ValueError(f"filter {self.name} ends without take_first")  # rule_reason refuses such a pipeline


def _one(step: Step, response) -> str:
    if step.function == "regex":
        response = response if isinstance(response, str) else ""
        found = re.findall(step.regex_pattern, response)
        if not found:
            return step.fallback
        match = found[step.group_select]
        if isinstance(match, tuple):  # several groups: the first non-empty one
            match = next((m for m in match if m), step.fallback)
        return match.strip()
    if step.function == "lowercase":
        return response.lower()
    if step.function == "uppercase":
        return response.upper()
    return response.strip()  # remove_whitespace


@dataclass(frozen=True)
class ExactMatch:
    ignore_case: bool = False
    ignore_punctuation: bool = False
    ignore_numbers: bool = False
    regexes_to_ignore: tuple | None = None

    def score(self, prediction: str, reference: str) -> float:
        """exact_match_hf_evaluate on one pair. Its numpy string arrays drop trailing NUL characters, and it
        builds them only after a regex step or via asarray: either way the comparison is of NUL-stripped text."""
        for pattern in self.regexes_to_ignore or ():
            prediction, reference = re.sub(pattern, "", prediction), re.sub(pattern, "", reference)
        prediction, reference = prediction.rstrip("\x00"), reference.rstrip("\x00")
        if self.ignore_case:
            prediction, reference = prediction.lower(), reference.lower()
        for ignored, flag in ((string.punctuation, self.ignore_punctuation), (string.digits, self.ignore_numbers)):
            if flag:
                table = str.maketrans("", "", ignored)
                prediction, reference = prediction.translate(table), reference.translate(table)
        return 1.0 if prediction.rstrip("\x00") == reference.rstrip("\x00") else 0.0


@dataclass(frozen=True)
class GenerationRule:
    """What a generate_until task asks of a generation, read from its config."""
    generation_kwargs: dict  # as the task logs them in each request (until, do_sample, temperature[, max_gen_toks])
    pipelines: tuple  # Pipeline, in filter_list's order
    exact_match: ExactMatch

    @property
    def max_gen_toks(self) -> int:
        return self.generation_kwargs.get("max_gen_toks", 256)  # HFLM's default

    @property
    def filter_names(self) -> list:
        return [pipeline.name for pipeline in self.pipelines]


def _steps(entry, where: str) -> tuple:
    """A filter_list entry's steps, or raise ValueError with the reason."""
    if not (isinstance(entry, dict) and isinstance(entry.get("name"), str) and isinstance(entry.get("filter"), list)):
        raise ValueError(f"has a filter_list entry {str(entry)[:60]!r} without a name and a list of filters")
    steps = []
    for raw in entry["filter"]:
        function = raw.get("function") if isinstance(raw, dict) else None
        if function not in FILTERS:
            raise ValueError(f"applies the filter {str(function)[:40]!r} in {where} {entry['name']!r} (re-derived: "
                             f"{', '.join(FILTERS)})")
        args = {k: v for k, v in raw.items() if k != "function"}
        if set(args) - FILTER_ARGS.get(function, set()):
            raise ValueError(f"passes {sorted(args)} to the filter {function} (re-derived without them)")
        step = Step(function, **args)
        if not (isinstance(step.regex_pattern, str) and type(step.group_select) is int
                and isinstance(step.fallback, str)):
            raise ValueError(f"gives the regex filter in {entry['name']!r} arguments of unexpected types")
        try:
            re.compile(step.regex_pattern)
        except re.error as error:
            raise ValueError(f"has a regex filter pattern that does not compile ({error})") from None
        steps.append(step)
    if not steps or steps[-1].function != "take_first" or any(s.function == "take_first" for s in steps[:-1]):
        raise ValueError(f"has a filter pipeline {entry['name']!r} that does not end with its one take_first")
    return tuple(steps)


def effective_generation_kwargs(config: dict) -> dict:
    """generation_kwargs as TaskConfig.__post_init__ leaves them (and each request logs them): the temperature a
    float, `until` the fewshot delimiter when unstated, greedy defaults when the config states none. HFLM then
    decodes greedily unless do_sample is true or a temperature is above 0 (_model_generate)."""
    import copy

    delimiter = config.get("fewshot_delimiter", "\n\n")
    kwargs = copy.deepcopy(config.get("generation_kwargs"))
    if kwargs is None:
        return {"until": None if delimiter is None else [delimiter], "do_sample": False, "temperature": 0}
    if not isinstance(kwargs, dict):
        raise ValueError(f"has generation_kwargs {str(kwargs)[:40]!r}, not a mapping")
    if "temperature" in kwargs:
        try:
            kwargs["temperature"] = float(kwargs["temperature"])
        except (TypeError, ValueError):
            raise ValueError(f"has a temperature {str(kwargs['temperature'])[:20]!r} lm-eval cannot read") from None
    kwargs.setdefault("until", [delimiter])
    return kwargs


def generation_rule(config: dict) -> GenerationRule:
    """The rule of a generate_until config, or raise ValueError naming why it is outside the protocol."""
    kwargs = effective_generation_kwargs(config)
    if set(kwargs) - GENERATION_KEYS:
        raise ValueError(f"sets generation_kwargs {sorted(set(kwargs) - GENERATION_KEYS)} (a greedy decode takes "
                         f"{', '.join(sorted(GENERATION_KEYS))})")
    until = kwargs.get("until")
    if not (isinstance(until, str) or (isinstance(until, list) and all(isinstance(u, str) for u in until))):
        raise ValueError(f"has generation_kwargs.until {str(until)[:40]!r}, not text or a list of text")
    temperature = kwargs.get("temperature", 0.0)
    if kwargs.get("do_sample") not in (False, None) or not isinstance(temperature, (int, float)) or temperature:
        raise ValueError("samples its generations (do_sample or a temperature above 0): not a greedy decode")
    max_gen = kwargs.get("max_gen_toks", 256)
    if not (type(max_gen) is int and 1 <= max_gen <= 8192):
        raise ValueError(f"states max_gen_toks {str(max_gen)[:20]!r}, not an integer within 1..8192")
    if config.get("repeats", 1) != 1:
        raise ValueError(f"repeats each request {config.get('repeats')!r} times (one greedy decode is re-derived)")
    metrics = config.get("metric_list") or []
    if not (len(metrics) == 1 and isinstance(metrics[0], dict) and metrics[0].get("metric") == EXACT_MATCH):
        names = [m.get("metric") if isinstance(m, dict) else m for m in metrics]
        raise ValueError(f"reports metrics {names} (a generate_until task: exact_match alone is re-derived)")
    metric = metrics[0]
    if set(metric) - METRIC_KEYS or metric.get("aggregation", "mean") != "mean":
        raise ValueError(f"configures exact_match with {sorted(set(metric) - {'metric'})} (re-derived: mean "
                         f"aggregation, {', '.join(sorted(EXACT_MATCH_ARGS))})")
    ignored = metric.get("regexes_to_ignore")
    if ignored is not None and not (isinstance(ignored, list) and all(isinstance(r, str) for r in ignored)):
        raise ValueError("has regexes_to_ignore that are not a list of patterns")
    flags = {k: metric.get(k, False) for k in ("ignore_case", "ignore_punctuation", "ignore_numbers")}
    if any(type(v) is not bool for v in flags.values()):
        raise ValueError("has exact_match flags that are not true or false")
    entries = config.get("filter_list") or [{"name": "none", "filter": [{"function": "take_first"}]}]
    if not isinstance(entries, list):
        raise ValueError("has a filter_list that is not a list")
    pipelines = tuple(Pipeline(entry["name"], _steps(entry, "the pipeline")) for entry in entries
                      if isinstance(entry, dict)) if all(isinstance(e, dict) for e in entries) else None
    if pipelines is None or len({p.name for p in pipelines}) != len(pipelines):
        raise ValueError("has filter_list entries that are not named mappings, or two with one name")
    return GenerationRule(dict(kwargs), pipelines,
                          ExactMatch(**flags, regexes_to_ignore=tuple(ignored) if ignored is not None else None))


def generation_reason(config: dict) -> str | None:
    """Why a generate_until config is outside the protocol, or None."""
    try:
        generation_rule(config)
    except ValueError as error:
        return str(error)
    if config.get("doc_to_choice") is not None:
        return "has a doc_to_choice (its target is a choice index mapped to text)"
    return None
