"""A loglikelihood_rolling task's samples (lm-eval's perplexity tasks) as `adopt` reads them: one line per document,
its one request the whole text (`arguments.gen_args_0.arg_0`), its one response the summed log-likelihood of every
rolling window (`resps [["<float>"]]`, a string where lm-eval's sanitizer ran), and per metric the pair
[log-likelihood, words or bytes] (SOURCE_MAP step 97)."""

from dataclasses import dataclass

from sst2_audit.formats.lm_eval_output import (HASH_FIELDS, logged_float, logged_hashes, logged_text, LoggedText,
                                              TEXT_FIELDS)
from sst2_audit.formats.schema import typed
from sst2_audit.protocol.perplexity import ROLLING_METRICS
from sst2_audit.util.errors import InputError


@dataclass(slots=True)
class RolledSample:
    """One logged document of a loglikelihood_rolling task; `logged`: the digests of its text (None in our public
    copy, which holds none); doc, arguments and target only when asked (an export)."""
    doc_id: int
    score: float  # resps[0][0]: the text's log-likelihood, summed over its windows
    filtered: float  # filtered_resps[0]
    doc_hash: str
    prompt_hash: str
    target_hash: str
    metrics: dict  # lm-eval's name -> the logged [log-likelihood, count]
    filter: str = "none"
    metric_names: list | None = None
    logged: LoggedText | None = None
    doc: dict | None = None
    arguments: list | None = None  # [(text, "")]
    target: str | None = None


FIELDS = ("doc_id", *TEXT_FIELDS, "resps", "filtered_resps", "filter", "metrics", *HASH_FIELDS)


def read_rolling_sample(raw, where: str, public: bool = False, keep_text: bool = False) -> RolledSample:
    raw = typed(dict, raw, where)
    names = typed(list[str], raw.get("metrics"), f"{where}.metrics")
    if not names or len(set(names)) != len(names) or any(name not in ROLLING_METRICS for name in names):
        raise InputError(f"{where}.metrics: expected distinct names among {list(ROLLING_METRICS)}, got "
                         f"{[str(n)[:40] for n in names[:5]]!r}.")
    fields = [name for name in FIELDS if not (public and name in TEXT_FIELDS)] + names
    missing, unknown = [n for n in fields if n not in raw], sorted(set(raw) - set(fields))
    if missing or unknown:
        raise InputError(f"{where}: a loglikelihood_rolling sample " + " and ".join(
            ([f"lacks {missing}"] if missing else []) + ([f"has unexpected {[n[:40] for n in unknown[:5]]}"]
                                                          if unknown else [])) + f" (expected {', '.join(fields)}).")
    resps, filtered = typed(list[list], raw["resps"], f"{where}.resps"), typed(list, raw["filtered_resps"], where)
    if not (len(resps) == 1 and len(resps[0]) == 1 and len(filtered) == 1):
        raise InputError(f"{where}: expected one request with one log-likelihood and one filtered value, got "
                         f"{len(resps)} requests and {len(filtered)} filtered values.")
    metrics = {}
    for name in names:
        pair = typed(list, raw[name], f"{where}.{name}")
        if len(pair) != 2:
            raise InputError(f"{where}.{name}: expected [log-likelihood, count], got {str(pair)[:60]!r}.")
        metrics[name] = [typed(float, pair[0], f"{where}.{name}[0]"), typed(int, pair[1], f"{where}.{name}[1]")]
    sample = RolledSample(typed(int, raw["doc_id"], f"{where}.doc_id"),
                          logged_float(resps[0][0], f"{where}.resps[0][0]"),
                          logged_float(filtered[0], f"{where}.filtered_resps[0]"), *logged_hashes(raw, where), metrics,
                          filter=typed(str, raw["filter"], f"{where}.filter"), metric_names=names)
    if not public:
        doc, arguments = typed(dict, raw["doc"], f"{where}.doc"), _text_argument(raw["arguments"], where)
        target = typed(str, raw["target"], f"{where}.target")
        sample.logged = logged_text(doc, [(arguments, "")], target, generated=True)
        if keep_text:
            sample.doc, sample.arguments, sample.target = doc, [(arguments, "")], target
    return sample


def _text_argument(raw, where: str) -> str:
    """{"gen_args_0": {"arg_0": text}}: the one request's text."""
    raw = typed(dict[str, dict], raw, f"{where}.arguments")
    if list(raw) != ["gen_args_0"] or list(raw["gen_args_0"]) != ["arg_0"]:
        raise InputError(f"{where}.arguments: expected {{\"gen_args_0\": {{\"arg_0\": text}}}} (one rolling request), "
                         f"got keys {[str(k)[:40] for k in raw][:4]!r}.")
    return typed(str, raw["gen_args_0"]["arg_0"], f"{where}.arguments.gen_args_0.arg_0")


def public_rolled_sample(sample: RolledSample) -> dict:
    """Our public copy of one document's line: no doc, arguments or target (data text); the numbers and hashes."""
    return {"doc_id": sample.doc_id, "resps": [[sample.score]], "filtered_resps": [sample.filtered],
            **{name: getattr(sample, name) for name in HASH_FIELDS}, "filter": sample.filter,
            "metrics": sample.metric_names, **sample.metrics}
