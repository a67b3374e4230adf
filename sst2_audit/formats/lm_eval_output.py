"""lm-eval's own output (its results and per-sample logs) as the audit reads it: only the fields it reads are
typed, the rest is kept."""

import sys
import typing
from pathlib import Path
from dataclasses import dataclass

from sst2_audit.formats import strict_json
from sst2_audit.formats.schema import field_at, typed
from sst2_audit.protocol.metrics import METRICS, result_key
from sst2_audit.util.environment import scrub_absolute_paths
from sst2_audit.util.errors import InputError
from sst2_audit.protocol.rules import doc_hash
from sst2_audit.util.hashing import sha256_bytes, sha256_text


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
        for position, pair in enumerate(_responses(resp, here)):
            typed(float, pair[0], f"{here}[{position}][0]")
            typed(bool, pair[1], f"{here}[{position}][1]")
    return sample


MAX_PADDING = 4096  # lm-eval's padding responses on one logged request (at most the processes' request difference)


def _responses(resp, here: str) -> list:
    """A candidate's logged responses: [[log-likelihood, is_greedy]], or more than one pair where lm-eval's
    data-parallel evaluate appended its padding requests' responses to the last request of a process with fewer
    (SOURCE_MAP step 85); the first is the request's own, as lm-eval's filter takes it."""
    if not (type(resp) is list and 1 <= len(resp) <= 1 + MAX_PADDING
            and all(type(pair) is list and len(pair) == 2 for pair in resp)):
        raise InputError(f"{here}: expected [[log-likelihood, is_greedy]] (and lm-eval's padding responses after "
                         f"it), got {str(resp)[:60]!r}.")
    return resp


def check_lm_eval_results(raw, task: str, where: str, metrics=("acc",), filters=("none",), stderr_hint=float) -> dict:
    """The results fields the audit compares, typed; the dict is returned unchanged. stderr_hint: str where lm-eval
    reports none ("N/A": a perplexity)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(raw).__name__}.")
    names = [METRICS[m].reported_as if m in METRICS else m for m in metrics]  # mc2 is lm-eval's `acc`
    reported = tuple(((("results", task, result_key(m, f)), float), (("results", task, result_key(m, f, True)),
                                                                     stderr_hint))
                     for m in names for f in filters)
    # the release first: a run of another release is named as such before a field it lacks stops the parse; a
    # minimised results file without `configs` is read, and the claims level says what it cannot compare
    configs = raw.get("configs")
    if configs is not None and (not isinstance(configs, dict) or not isinstance(configs.get(task, {}), dict)):
        raise InputError(f"{where}: configs.{task}: expected an object (the task's logged config).")
    if "lm_eval_version" in raw:  # logged by 0.4.9.2 and 0.4.13, by no release up to 0.4.8
        typed(str, raw["lm_eval_version"], f"{where}: lm_eval_version")
    for path, hint in (*(entry for pair in reported for entry in pair),
                       (("n-shot", task), int), (("n-samples", task), dict),
                       (("config", "random_seed"), int), (("transformers_version",), str)):
        typed(hint, field_at(raw, path, where), f"{where}: {'.'.join(path)}")
    return raw


# --- a plain `lm_eval --log_samples --output_path OUT` run, as `adopt` reads it (SOURCE_MAP step 71) -----------
# lm-eval writes OUT/<model_name_sanitized>/results_<date_id>.json and, per task, samples_<task>_<date_id>.jsonl
# beside it (loggers/evaluation_tracker.py). The samples file holds every value as a string where lm-eval's
# sanitize_list ran (resps, filtered_resps), `arguments` as {"gen_args_i": {"arg_j": ...}}, `target` as str().
MAX_RESULTS_BYTES = 64 << 20  # a leaderboard run's results file is about 2 MB
MAX_SAMPLES_BYTES = 512 << 20  # the full MMLU test split's samples with their text: about 90 MB
HASH_FIELDS = ("doc_hash", "prompt_hash", "target_hash")


@dataclass(slots=True)
class LoggedText:
    """The sha256 digests of a sample's logged text, taken as its line is read: the identity level compares them with
    the pinned row's, so the text itself is kept only for an export (the reader's memory stays flat in the file's
    size: a leaderboard samples file is mostly its few-shot contexts, repeated once per candidate)."""
    doc_hash: str  # doc_hash() of the logged doc
    contexts: list  # sha256 of each request's context (arg_0); the first is the logged context's prompt_hash
    continuations: list  # sha256 of each request's continuation (arg_1); [] for a generate_until request
    target: str  # sha256 of the logged target


def logged_text(doc: dict, arguments: list, target: str, generated: bool = False) -> LoggedText:
    digests: dict = {}  # a multiple_choice task logs one context per candidate, the same each time: hashed once
    contexts = [digests.get(context) or digests.setdefault(context, sys.intern(sha256_text(context)))
                for context, _ in arguments]
    continuations = [] if generated else [sys.intern(sha256_text(c)) for _, c in arguments]
    return LoggedText(sys.intern(doc_hash(doc)), contexts, continuations, sys.intern(sha256_text(target)))


@dataclass(slots=True)
class PlainSample:
    """One logged sample of a plain run. `logged`: the digests of its text (None in our public copy, which holds
    none); doc, arguments and target: the text itself, kept only when asked (an export)."""
    doc_id: int
    scores: list  # per candidate: the logged log-likelihood (resps[k][0][0]) as a float
    greedy: list  # per candidate: resps[k][0][1]
    filtered: list  # per candidate: filtered_resps[k][0], as a float
    doc_hash: str
    prompt_hash: str
    target_hash: str
    metrics: dict  # lm-eval's name -> the logged per-document value (a float, or [gold, prediction])
    filter: str = "none"
    metric_names: list | None = None  # the sample's `metrics`: the names lm-eval logged values of
    logged: LoggedText | None = None
    doc: dict | None = None
    arguments: list | None = None  # [(context, continuation)] per request
    target: str | None = None


@dataclass
class PlainOutput:
    results_path: Path  # the results file as given
    samples_path: Path
    task: str
    results: dict  # the results JSON, typed where read (check_lm_eval_results)
    samples: list  # PlainSample, in the file's order
    results_sha256: str
    samples_sha256: str
    public: bool  # our public copy (no text), not lm-eval's own file

    @property
    def random_seed(self) -> int:
        return self.results["config"]["random_seed"]  # typed by check_lm_eval_results


def logged_float(text, where: str) -> float:
    """A logged log-likelihood: lm-eval's str(float) in its own file (read exactly: the text must be the float's own
    repr, so " 1.0", "1_0" or "+1.0", which Python's float() would take, are refused), a float in our public copy."""
    value = text
    if type(text) is str:
        try:
            value = float(text)
        except ValueError:
            raise InputError(f"{where}: expected a log-likelihood, got {text[:60]!r}.") from None
        if repr(value) != text:
            raise InputError(f"{where}: expected a log-likelihood as Python writes a float, got {text[:60]!r}.")
    return typed(float, value, where)


def _flag(text, where: str) -> bool:
    if text in ("True", "False"):
        return text == "True"
    return typed(bool, text, where)


def _arguments(raw, where: str) -> list:
    """{"gen_args_0": {"arg_0": context, "arg_1": continuation}, ...} in order, each a (str, str)."""
    raw = typed(dict, raw, where)
    if list(raw) != [f"gen_args_{i}" for i in range(len(raw))]:
        raise InputError(f"{where}: expected keys gen_args_0.. in order, got {list(raw)[:4]!r}.")
    pairs = []
    for key, pair in raw.items():
        pair = typed(dict[str, str], pair, f"{where}.{key}")
        if list(pair) != ["arg_0", "arg_1"]:
            raise InputError(f"{where}.{key}: expected arg_0 and arg_1 (a log-likelihood request), got {list(pair)!r}.")
        pairs.append((pair["arg_0"], pair["arg_1"]))
    return pairs


TEXT_FIELDS = ("doc", "arguments", "target")  # in lm-eval's own file, never in our public copy
SAMPLE_FIELDS = ("doc_id", *TEXT_FIELDS, "resps", "filtered_resps", "filter", "metrics", *HASH_FIELDS)


def read_plain_sample(raw, where: str, reported: tuple, public: bool = False, legacy: bool = False,
                      keep_text: bool = False) -> PlainSample:
    """One line of a samples file (lm-eval's own or our public copy), typed; a malformed one is exit 2. legacy: the
    results file names no release (lm-eval 0.4.8 and earlier): its lines log neither `filter` nor `metrics` (one
    line per document of a multiple_choice task, filter none; the metrics are the values it logs)."""
    raw = typed(dict, raw, where)
    if legacy and "filter" not in raw and "metrics" not in raw:
        raw = dict(raw, filter="none", metrics=[name for name in reported if name in raw])
    missing = [name for name in ("doc_id", "resps", "filtered_resps", *HASH_FIELDS, "filter", "metrics",
                                 *(() if public else TEXT_FIELDS)) if name not in raw]
    if missing:
        raise InputError(f"{where}: lm-eval sample lacks fields {missing}.")
    resps, filtered = typed(list, raw["resps"], f"{where}.resps"), typed(list, raw["filtered_resps"], where)
    if len(resps) != len(filtered) or not resps or len(resps) > 256:
        raise InputError(f"{where}: expected 1 to 256 candidates in resps and as many filtered_resps, got "
                         f"{len(resps)} and {len(filtered)}.")
    scores, greedy, kept = [], [], []
    for number, (resp, one) in enumerate(zip(resps, filtered)):
        here = f"{where}.resps[{number}]"
        for position, pair in enumerate(_responses(resp, here)[1:], start=1):  # padding: read, typed, not used
            logged_float(pair[0], f"{here}[{position}][0]"), _flag(pair[1], f"{here}[{position}][1]")
        if not (type(one) is list and len(one) == 2):
            raise InputError(f"{where}.filtered_resps[{number}]: expected [log-likelihood, is_greedy].")
        scores.append(logged_float(resp[0][0], f"{here}[0][0]"))
        greedy.append(_flag(resp[0][1], f"{here}[0][1]"))
        kept.append(logged_float(one[0], f"{where}.filtered_resps[{number}][0]"))
    names = typed(list[str], raw["metrics"], f"{where}.metrics")
    if sorted(set(names)) != sorted(set(reported)):
        raise InputError(f"{where}.metrics: expected the task's metrics {sorted(set(reported))}, got {names[:8]!r}.")
    unknown = sorted(set(raw) - set(SAMPLE_FIELDS) - set(names))
    if unknown:
        raise InputError(f"{where}: unexpected field(s) {[name[:40] for name in unknown[:5]]} (lm-eval logs "
                         f"{', '.join(SAMPLE_FIELDS)} and each metric's value).")
    metrics = {name: typed(float | list[int], raw[name], f"{where}.{name}") for name in reported if name in raw}
    _no_text(raw, where, public)
    sample = PlainSample(
        typed(int, raw["doc_id"], f"{where}.doc_id"), scores, greedy, kept,
        *logged_hashes(raw, where), metrics,
        filter=typed(str, raw["filter"], f"{where}.filter"),
        metric_names=names)
    if not public:
        doc, arguments = typed(dict, raw["doc"], f"{where}.doc"), _arguments(raw["arguments"], f"{where}.arguments")
        target = typed(str, raw["target"], f"{where}.target")
        sample.logged = logged_text(doc, arguments, target)
        if keep_text:
            sample.doc, sample.arguments, sample.target = doc, arguments, target
    return sample


def _no_text(raw: dict, where: str, public: bool) -> None:
    if public and any(name in raw for name in TEXT_FIELDS):
        raise InputError(f"{where}: a public copy holds no doc, arguments or target (data text).")


def public_sample(sample: PlainSample) -> dict:
    """Our public copy of one sample: no doc, arguments or target (data text); lm-eval's hashes kept."""
    return {"doc_id": sample.doc_id, "resps": [[[s, g]] for s, g in zip(sample.scores, sample.greedy)],
            "filtered_resps": [[s, g] for s, g in zip(sample.filtered, sample.greedy)],
            **{name: getattr(sample, name) for name in HASH_FIELDS}, "filter": sample.filter,
            "metrics": sample.metric_names, **sample.metrics}


def public_results(results: dict) -> dict:
    """Our public copy of a results file: someone else's machine paths as <path>, and 0.4.13's
    model_name_sanitized (the model name with '/' as '__') as the scrubbed name, so it cannot keep the path."""
    public = scrub_absolute_paths(results)
    if isinstance(public.get("model_name_sanitized"), str) and public.get("model_name") != results.get("model_name"):
        public["model_name_sanitized"] = str(public["model_name"]).replace("/", "__")
    return public


def logged_hashes(raw: dict, where: str) -> tuple[str, str, str]:
    """lm-eval's three hashes, interned: the digests of an honest line's text are the same strings, kept once."""
    doc, prompt, target = (sys.intern(typed(str, raw[name], f"{where}.{name}")) for name in HASH_FIELDS)
    return doc, prompt, target


def read_plain_files(results_path: Path, samples_path: Path, task: str, metrics, public: bool,
                     filters=None, keep_text: bool = False, reader=None, stderr_hint=float,
                     max_samples: int | None = None) -> PlainOutput:
    """The results and samples files (lm-eval's own, or our public copy of them), strictly and within limits; the
    samples file streamed line by line, each sample's text reduced to its digests unless keep_text (an export).
    A row's layout by its task's shape (task/shapes.py::samples_args): filters, a generate_until task's; reader,
    a reader of another shape's rows (raw, where, public, keep_text); neither, multiple_choice rows. max_samples:
    the most lines a run of the split can log (cli/adopt_shared.py::most_samples), refused at the line past it."""
    results_bytes = strict_json.read_bytes(results_path, MAX_RESULTS_BYTES)
    results = check_lm_eval_results(strict_json.loads(results_bytes, str(results_path)), task, str(results_path),
                                    metrics, filters or ("none",), stderr_hint)
    reported = tuple(METRICS[m].reported_as for m in metrics) if filters is None and reader is None else ()
    legacy = "lm_eval_version" not in results
    if legacy and (filters is not None or reader is not None) and not public:
        raise InputError(f"{results_path}: a run that names no lm-eval release (0.4.8 or earlier): adopt reads its "
                         "multiple_choice tasks only (its samples lines name no filter and no metrics).")
    if reader is None:  # a row of a multiple_choice task, or of a generate_until task's (its filters)
        reader = read_generated_sample if filters is not None else (
            lambda raw, where, public, keep: read_plain_sample(raw, where, reported, public, legacy, keep))
    lines = strict_json.Lines(samples_path, MAX_SAMPLES_BYTES)
    samples: list = []
    for number, raw in lines:
        if max_samples is not None and len(samples) == max_samples:
            raise InputError(f"{samples_path}: more than {max_samples} samples, more than a run of the split can "
                             f"log; refused at line {number}.")
        samples.append(reader(raw, f"{samples_path}:{number}", public, keep_text))
    if not samples:
        raise InputError(f"{samples_path}: no samples.")
    return PlainOutput(Path(results_path), Path(samples_path), task, results, samples, sha256_bytes(results_bytes),
                       str(lines.sha256), public)


# --- a generate_until task's samples: one line per document and filter (SOURCE_MAP step 80) ----------------------
@dataclass(slots=True)
class GeneratedSample:
    """One logged line of a generate_until task. The texts are None in our public copy (a generation can quote the
    data): it keeps their sha256 instead. `logged`: the digests of the doc, context and target (lm-eval's own file);
    the generation and the answer are kept (the rescore reads them); doc, arguments, target only when asked."""
    doc_id: int
    filter: str
    exact_match: float
    response_sha256: str  # of resps[0][0], the generation lm-eval logged
    filtered_sha256: str  # of filtered_resps[0], the filter's answer
    doc_hash: str
    prompt_hash: str
    target_hash: str
    response: str | None = None
    filtered: str | None = None
    logged: LoggedText | None = None
    generation_kwargs: dict | None = None  # the logged request's (arg_1)
    doc: dict | None = None
    arguments: list | None = None  # [(context, generation_kwargs)]
    target: str | None = None


GENERATED_FIELDS = ("doc_id", *TEXT_FIELDS, "resps", "filtered_resps", "filter", "metrics", "exact_match",
                    *HASH_FIELDS)
PUBLIC_GENERATED_FIELDS = ("doc_id", "resps_sha256", "filtered_resps_sha256", "filter", "metrics", "exact_match",
                           *HASH_FIELDS)


def read_generated_sample(raw, where: str, public: bool = False, keep_text: bool = False) -> GeneratedSample:
    raw = typed(dict, raw, where)
    fields = PUBLIC_GENERATED_FIELDS if public else GENERATED_FIELDS
    missing, unknown = [n for n in fields if n not in raw], sorted(set(raw) - set(fields))
    if missing or unknown:
        raise InputError(f"{where}: a generate_until sample {'lacks ' + str(missing) if missing else ''}"
                         f"{' and ' if missing and unknown else ''}"
                         f"{'has unexpected ' + str([n[:40] for n in unknown[:5]]) if unknown else ''} (expected "
                         f"{', '.join(fields)}).")
    if typed(list[str], raw["metrics"], f"{where}.metrics") != ["exact_match"]:
        raise InputError(f"{where}.metrics: expected ['exact_match'], got {raw['metrics'][:4]!r}.")
    if public:
        response, filtered = None, None
        response_sha = typed(list[list[str]], raw["resps_sha256"], f"{where}.resps_sha256")
        filtered_sha = typed(list[str], raw["filtered_resps_sha256"], f"{where}.filtered_resps_sha256")
        shapes = (response_sha, filtered_sha)
    else:
        shapes = (typed(list[list[str]], raw["resps"], f"{where}.resps"),
                  typed(list[str], raw["filtered_resps"], f"{where}.filtered_resps"))
    if not (len(shapes[0]) == 1 and len(shapes[0][0]) == 1 and len(shapes[1]) == 1):
        raise InputError(f"{where}: expected one request with one response and one filtered answer, got "
                         f"{len(shapes[0])} requests and {len(shapes[1])} answers.")
    if public:
        response_sha, filtered_sha = shapes[0][0][0], shapes[1][0]
    else:
        response, filtered = shapes[0][0][0], shapes[1][0]
        response_sha, filtered_sha = sha256_bytes(response.encode()), sha256_bytes(filtered.encode())
    sample = GeneratedSample(
        typed(int, raw["doc_id"], f"{where}.doc_id"), typed(str, raw["filter"], f"{where}.filter"),
        typed(float, raw["exact_match"], f"{where}.exact_match"), response_sha, filtered_sha,
        *logged_hashes(raw, where), response, filtered)
    if not public:
        doc, arguments = typed(dict, raw["doc"], f"{where}.doc"), _generation_arguments(raw["arguments"],
                                                                                       f"{where}.arguments")
        target = typed(str, raw["target"], f"{where}.target")
        sample.logged, sample.generation_kwargs = logged_text(doc, arguments, target, generated=True), arguments[0][1]
        if keep_text:
            sample.doc, sample.arguments, sample.target = doc, arguments, target
    return sample


def _generation_arguments(raw, where: str) -> list:
    """{"gen_args_0": {"arg_0": context, "arg_1": generation_kwargs}}: one (str, dict)."""
    raw = typed(dict, raw, where)
    if list(raw) != ["gen_args_0"]:
        raise InputError(f"{where}: expected the one request gen_args_0, got {list(raw)[:4]!r}.")
    pair = typed(dict, raw["gen_args_0"], f"{where}.gen_args_0")
    if list(pair) != ["arg_0", "arg_1"]:
        raise InputError(f"{where}.gen_args_0: expected arg_0 (the context) and arg_1 (the generation kwargs), got "
                         f"{list(pair)[:4]!r}.")
    return [(typed(str, pair["arg_0"], f"{where}.gen_args_0.arg_0"),
             typed(dict, pair["arg_1"], f"{where}.gen_args_0.arg_1"))]


def public_generated_sample(sample: GeneratedSample) -> dict:
    """Our public copy of a generate_until line: the generation and the answer as sha256, no text."""
    return {"doc_id": sample.doc_id, "resps_sha256": [[sample.response_sha256]],
            "filtered_resps_sha256": [sample.filtered_sha256], **{n: getattr(sample, n) for n in HASH_FIELDS},
            "filter": sample.filter, "metrics": ["exact_match"], "exact_match": sample.exact_match}
