"""lm-eval's own output (its results and per-sample logs) as the audit reads it: only the fields it reads are
typed, the rest is kept."""

import typing
from dataclasses import dataclass

from sst2_audit.formats.schema import typed
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.util.errors import InputError


# lm-eval's own output, as the audit reads it: only the fields it reads are typed, the rest is kept.
@dataclass
class LmEvalSample:
    doc_id: int
    target: int | str  # doc_to_target: an index, or text (a multiple-input task's shared continuation)
    resps: list[list[list]]  # per candidate: [[log-likelihood, is_greedy]]
    prompt_hash: str
    doc_hash: str
    metrics: dict[str, float | list[int]]  # every logged per-document value of a registered metric, by lm-eval's name


REPORTED = sorted({metric.reported_as for metric in METRICS.values()})  # lm-eval's names of our metrics


SAMPLE_HINTS = {name: hint for name, hint in typing.get_type_hints(LmEvalSample).items() if name != "metrics"}


def check_lm_eval_sample(raw, where: str) -> LmEvalSample:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
    missing = [name for name in SAMPLE_HINTS if name not in raw]  # a metric's value: compared by arithmetic
    if missing:
        raise InputError(f"{where}: lm-eval sample lacks fields {missing}.")
    sample = LmEvalSample(**{name: typed(hint, raw[name], f"{where}.{name}") for name, hint in SAMPLE_HINTS.items()},
                          metrics={name: typed(float | list[int], raw[name], f"{where}.{name}")
                                   for name in REPORTED if name in raw})
    for number, resp in enumerate(sample.resps):
        here = f"{where}.resps[{number}]"
        if not (len(resp) == 1 and type(resp[0]) is list and len(resp[0]) == 2):
            raise InputError(f"{here}: expected [[log-likelihood, is_greedy]], got {str(resp)[:60]!r}.")
        typed(float, resp[0][0], f"{here}[0][0]")
        typed(bool, resp[0][1], f"{here}[0][1]")
    return sample


def check_lm_eval_results(raw, task: str, where: str, metrics=("acc",)) -> dict:
    """The results fields the audit compares, typed; the dict is returned unchanged."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
    names = [METRICS[m].reported_as if m in METRICS else m for m in metrics]  # mc2 is lm-eval's `acc`
    reported = tuple(((("results", task, f"{m},none"), float), (("results", task, f"{m}_stderr,none"), float))
                     for m in names)
    for path, hint in (*(entry for pair in reported for entry in pair),
                       (("configs", task), dict), (("n-shot", task), int), (("n-samples", task), dict),
                       (("config", "random_seed"), int),
                       (("lm_eval_version",), str), (("transformers_version",), str)):
        value = raw
        for key in path:
            if not isinstance(value, dict) or key not in value:
                raise InputError(f"{where}: field {'.'.join(map(str, path))} is missing.")
            value = value[key]
        typed(hint, value, f"{where}: {'.'.join(path)}")
    return raw
