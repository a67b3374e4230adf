"""A lighteval run's own files as `adopt` reads them (issue 62): `results/<model>/results_<ts>.json` and, per task,
`details/<model>/<ts>/details_<task>_<ts>.parquet`. Someone else's files: the results read as strict JSON within the
size limit, the details parquet streamed one batch of rows at a time, each row's text reduced to its sha256 digests
as it is read, every field the levels use typed; a malformed file is exit 2 naming the file, row and field.

Both details schemas are read (checked against the real writers, scripts/make_lighteval_run.py):
- lighteval 0.11 and later (0.13.0 here): three structs per row, `doc` (query, choices, gold_index, id: the doc's
  position in the split, ...), `model_response` (input_tokens: the context's; output_tokens; logprobs: rounded to 10
  digits by its response cache's pandas round trip; argmax_logits_eq_gold) and `metric`;
- before 0.11 (0.10.0 here): flat columns, `full_prompt` (the scored context), `choices`, `gold_index`,
  `predictions` ([log-likelihood, is_greedy] per choice, full precision), `input_tokens` (per choice, the model's
  input: the context and the continuation but its last token, then `padded` pad tokens), `cont_tokens`, `metrics`;
  no doc id: each row's doc is named by lighteval's row rule (audit/adopt_lighteval.py) and held to it.
lighteval logs no release of its own (`lighteval_sha` is "?" in a wheel install): the schema is what is known."""

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.formats.lm_eval_output import MAX_RESULTS_BYTES, MAX_SAMPLES_BYTES
from sst2_audit.formats.records import LIGHTEVAL_DETAILS_FILE, LIGHTEVAL_RESULTS_FILE
from sst2_audit.formats.run_settings import MAX_ROWS
from sst2_audit.formats.schema import convert, field_at, typed
from sst2_audit.util.environment import scrub_absolute_paths
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_text, tokens_hash

STRUCTS = ("doc", "model_response", "metric")  # the post-0.11 schema's top-level columns
FLAT = ("full_prompt", "choices", "gold_index", "predictions", "input_tokens", "cont_tokens", "padded", "metrics",
        "num_effective_few_shots")  # the pre-0.11 schema's, as read
BATCH_ROWS = 256
# The most rows a details file may hold: twice the most rows of a split a profile can score, and 16 (the adoption's
# own rule for a samples file, audit/adopt.py::prepare_rows); a command passes its split's bound where the lock pins it
MAX_DETAILS_ROWS = 2 * MAX_ROWS + 16


@dataclass(slots=True)
class LightevalRow:
    """One details row of a loglikelihood task, its text as digests."""
    doc_id: int | None  # doc.id (the doc's position in the evaluated split); None where the schema logs none
    query_sha256: str  # of the context lighteval scored the choices after (doc.query; full_prompt before 0.11)
    choices_sha256: list[str]  # of each choice, the continuation scored
    gold: list[int]  # gold_index as a list
    scores: list[float]  # each choice's summed log-likelihood, as logged
    greedy: list[bool]  # each choice's is-greedy flag, as logged (a bool; before 0.11 a float 0.0 or 1.0)
    inputs_sha256: list[str]  # tokens_hash([ids]) of the logged model input: [the context's] (0.11+), or per choice
    input_lengths: list[int]  # their lengths
    continuations_sha256: list[str]  # tokens_hash([ids]) of each logged continuation's tokens (0.13.0 logs the
    # first choice's only, whatever the number of choices)
    metrics: dict[str, float]  # metric name -> the row's value as a float (lighteval logs acc as an int 0/1)
    fewshots: int


@dataclass
class LightevalClaims:
    """What the results file says of the task and the run, typed where the levels compare it."""
    task: str  # the results key
    shots: int  # config_tasks' num_fewshots (0.11+), else the task name's last field
    splits: list  # evaluation_splits
    metrics: list  # each metric's metric_name
    reported: dict  # the task's results: {"acc": ..., "acc_stderr": ...}
    max_samples: int | None  # config_general.max_samples (--max-samples)
    dtype: str | None  # model_config.dtype (0.11+) or model_dtype
    said: dict  # model name, device, batch size: claimed, not checkable here


@dataclass
class LightevalOutput:
    results_path: Path
    samples_path: Path  # the details parquet
    task: str  # lighteval's task key in the results, e.g. "sst2demo|0"
    results: dict
    samples: list  # LightevalRow, in the file's order
    results_sha256: str
    samples_sha256: str
    flat: bool  # the schema before lighteval 0.11
    claims: LightevalClaims
    public: bool = False
    texts: list | None = None  # per row (the scored context, [each choice]), kept only for --export-eee

    @property
    def random_seed(self) -> None:
        return None  # lighteval logs no seed of a task's doc processing: a task that draws one is refused


def is_lighteval_run(path: Path) -> bool:
    """A lighteval --output-dir (results/ and details/ beside each other) or one of its results files."""
    path = Path(path)
    if path.is_dir():
        return (path / "results").is_dir() and (path / "details").is_dir()
    return path.name.startswith("results_") and path.suffix == ".json" and path.parent.parent.name == "results" \
        and (path.parent.parent.parent / "details").is_dir()


def find_files(path: Path, task: str | None) -> tuple[Path, Path, str]:
    """(results file, details parquet, task key) of a lighteval run: one results file, and the details of the one
    task it reports (or of `task`)."""
    path = Path(path)
    found = sorted((path / "results").rglob("results_*.json")) if path.is_dir() else [path]
    if len(found) != 1:
        raise InputError(f"{path}: expected one lighteval results file (results/<model>/results_<timestamp>.json), "
                         f"found {len(found)}{': ' + ', '.join(str(p) for p in found[:4]) if found else ''}; name "
                         "the one to adopt.")
    results_path = found[0]
    stamp = results_path.stem[len("results_"):]
    root = results_path.parent.parent.parent
    model = results_path.parent.relative_to(root / "results")
    raw = strict_json.loads(strict_json.read_bytes(results_path, MAX_RESULTS_BYTES), str(results_path))
    key = _task_key(raw, task, str(results_path))
    details = root / "details" / model / stamp / f"details_{key}_{stamp}.parquet"
    if os.path.lexists(details):
        strict_json.require_regular(details)  # a link, folder or pipe under its name is named as such
    else:
        raise InputError(f"{details}: lighteval's details of task {key} are missing (lighteval writes them with "
                         "--save-details).")
    return results_path, details, key


def _task_key(raw, task: str | None, where: str) -> str:
    """The task adopted: `task`, or the one the results report (besides lighteval's "all")."""
    tasks = sorted(key for key in typed(dict, field_at(raw, ("results",), where), f"{where}: results") if key != "all")
    if task is None and len(tasks) != 1:
        raise InputError(f"{where}: the run reports the tasks {tasks}; name one with --task.")
    key = task or tasks[0]
    if key not in tasks:
        raise InputError(f"{where}: task {key!r} is not in the run; it reports {tasks}.")
    return key


def check_results(raw, task: str, where: str) -> LightevalClaims:
    typed(dict, raw, where)
    results = typed(dict, field_at(raw, ("results", task), where), f"{where}: results.{task}")
    reported = {name: typed(float, field_at(results, (name,), f"{where}: results.{task}"), f"{where}: results.{task}."
                            f"{name}") for name in ("acc", "acc_stderr")}
    tasks = typed(dict, field_at(raw, ("config_tasks",), where), f"{where}: config_tasks")
    key = task if task in tasks else task.rsplit("|", 1)[0]  # before 0.11 keyed without the shots field
    config = typed(dict, field_at(tasks, (key,), f"{where}: config_tasks"), f"{where}: config_tasks.{key}")
    shots = config.get("num_fewshots") if "num_fewshots" in config else task.rsplit("|", 1)[-1]
    if type(shots) is str and shots.isdigit() and shots.isascii() and len(shots) < 4:
        shots = int(shots)
    metrics = typed(list[dict], config.get("metrics", config.get("metric")), f"{where}: config_tasks.{key}.metrics")
    general = typed(dict, field_at(raw, ("config_general",), where), f"{where}: config_general")
    model = general.get("model_config") if isinstance(general.get("model_config"), dict) else general
    dtype = model.get("dtype", general.get("model_dtype"))
    return LightevalClaims(
        task, typed(int, shots, f"{where}: config_tasks.{key}.num_fewshots"),
        typed(list[str], config.get("evaluation_splits"), f"{where}: config_tasks.{key}.evaluation_splits"),
        [typed(str, m.get("metric_name"), f"{where}: config_tasks.{key}.metrics[].metric_name") for m in metrics],
        reported, typed(int | None, general.get("max_samples"), f"{where}: config_general.max_samples"),
        typed(str | None, dtype, f"{where}: config_general dtype"),
        {name: model.get(name, general.get(name)) for name in ("model_name", "device", "batch_size")})


def _metrics(metric: dict, where: str) -> dict:
    found = {}
    for name, value in metric.items():
        value = typed(int | float, value, f"{where}.{name}")
        if type(value) is float and not math.isfinite(value):
            raise InputError(f"{where}.{name}: expected a finite number, got {value!r}.")
        found[name] = float(value)
    return found


def _counted(where: str, choices: list, **lists) -> None:
    if not 1 <= len(choices) <= 256 or any(len(values) != len(choices) for values in lists.values()):
        counts = ", ".join(f"{len(values)} {name}" for name, values in lists.items())
        raise InputError(f"{where}: expected one of each per choice (1 to 256 choices), got {len(choices)} choices, "
                         f"{counts}.")


def _row(raw, where: str) -> LightevalRow:
    """A row of the schema of lighteval 0.11 and later."""
    doc, response = typed(dict, raw.get("doc"), f"{where}.doc"), typed(dict, raw.get("model_response"),
                                                                       f"{where}.model_response")
    ident = typed(str, doc.get("id"), f"{where}.doc.id")
    if not (ident.isdigit() and ident.isascii() and len(ident) < 12):
        raise InputError(f"{where}.doc.id: expected the doc's position in the split (digits), got {ident[:40]!r}.")
    choices = typed(list[str], doc.get("choices"), f"{where}.doc.choices")
    gold = doc.get("gold_index")
    gold = typed(list[int], [gold] if type(gold) is int else gold, f"{where}.doc.gold_index")
    scores = typed(list[float], response.get("logprobs"), f"{where}.model_response.logprobs")
    greedy = typed(list[bool], response.get("argmax_logits_eq_gold"), f"{where}.model_response.argmax_logits_eq_gold")
    _counted(where, choices, logprobs=scores, argmax_logits_eq_gold=greedy)
    output_tokens = typed(list[list[int]], response.get("output_tokens"), f"{where}.model_response.output_tokens")
    if len(output_tokens) > len(choices):
        raise InputError(f"{where}.model_response.output_tokens: {len(output_tokens)} lists for {len(choices)} "
                         "choices.")
    input_tokens = typed(list[int], response.get("input_tokens"), f"{where}.model_response.input_tokens")
    return LightevalRow(
        int(ident), sha256_text(typed(str, doc.get("query"), f"{where}.doc.query")),
        [sha256_text(choice) for choice in choices], gold, scores, greedy, [tokens_hash([input_tokens])],
        [len(input_tokens)], [tokens_hash([ids]) for ids in output_tokens],
        _metrics(typed(dict, raw.get("metric"), f"{where}.metric"), f"{where}.metric"),
        len(typed(list, doc.get("fewshot_samples", []), f"{where}.doc.fewshot_samples")))


def _flat_row(raw, where: str) -> LightevalRow:
    """A row of the flat schema before lighteval 0.11: the model input per choice, padding stripped."""
    choices = typed(list[str], raw.get("choices"), f"{where}.choices")
    predictions = typed(list[list[float]], raw.get("predictions"), f"{where}.predictions")
    if any(len(pair) != 2 or pair[1] not in (0.0, 1.0) for pair in predictions):
        raise InputError(f"{where}.predictions: expected [log-likelihood, is_greedy (0.0 or 1.0)] per choice.")
    inputs = typed(list[list[int]], raw.get("input_tokens"), f"{where}.input_tokens")
    padded = typed(list[int], raw.get("padded"), f"{where}.padded")
    continuations = typed(list[list[int]], raw.get("cont_tokens"), f"{where}.cont_tokens")
    _counted(where, choices, predictions=predictions, input_tokens=inputs, padded=padded, cont_tokens=continuations)
    if any(not 0 <= pad <= len(ids) for pad, ids in zip(padded, inputs)):
        raise InputError(f"{where}.padded: expected at most each input's length, got {padded[:8]!r}.")
    unpadded = [ids[:len(ids) - pad] for ids, pad in zip(inputs, padded)]
    return LightevalRow(
        None, sha256_text(typed(str, raw.get("full_prompt"), f"{where}.full_prompt")),
        [sha256_text(choice) for choice in choices], typed(list[int], raw.get("gold_index"), f"{where}.gold_index"),
        [pair[0] for pair in predictions], [pair[1] == 1.0 for pair in predictions],
        [tokens_hash([ids]) for ids in unpadded], [len(ids) for ids in unpadded],
        [tokens_hash([ids]) for ids in continuations],
        _metrics(typed(dict, raw.get("metrics"), f"{where}.metrics"), f"{where}.metrics"),
        typed(int, raw.get("num_effective_few_shots"), f"{where}.num_effective_few_shots"))


def read_details(path: Path, keep_text: bool = False, max_rows: int = MAX_DETAILS_ROWS) -> tuple[list, str, bool,
                                                                                                list | None]:
    """(rows, the file's sha256, flat, texts): the parquet streamed by batches of rows (memory: one batch and the
    rows' digests; with keep_text, each row's context and choices too, for --export-eee). A parquet's rows are not
    bounded by its size (a repeated row compresses to nothing: 2,000,000 rows in 293 KB took 3.4 GB and 3 minutes to
    be refused), so more than max_rows in its metadata are refused before a row is read."""
    import pyarrow
    import pyarrow.parquet as parquet

    digest, where = hashlib.sha256(), str(path)
    texts: list | None = [] if keep_text else None
    with strict_json.open_regular(path, MAX_SAMPLES_BYTES) as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        handle.seek(0)
        rows: list = []
        try:
            details = parquet.ParquetFile(handle)
            names = details.schema_arrow.names
            flat = all(name in names for name in FLAT)
            if not flat and not all(name in names for name in STRUCTS):
                raise InputError(f"{where}: not lighteval details: expected the columns {list(STRUCTS)} (lighteval "
                                 f"0.11 and later) or {list(FLAT)} (before 0.11), got {names[:12]}.")
            read = _flat_row if flat else _row
            if details.metadata.num_rows > max_rows:
                raise InputError(f"{where}: {details.metadata.num_rows} rows, more than the {max_rows} a run of the "
                                 "split can log; refused before any row is read.")
            for batch in details.iter_batches(batch_size=BATCH_ROWS, columns=list(FLAT if flat else STRUCTS)):
                if len(rows) + batch.num_rows > max_rows:  # the metadata's count is the file's claim too
                    raise InputError(f"{where}: more than {max_rows} rows; refused.")
                for raw in batch.to_pylist():
                    rows.append(read(raw, f"{where}: row {len(rows)}"))
                    if texts is not None:  # typed by the row's reader above
                        doc = raw if flat else raw["doc"]
                        texts.append((doc["full_prompt" if flat else "query"], list(doc["choices"])))
        except (pyarrow.ArrowException, OSError) as error:
            raise InputError(f"{where}: not a readable parquet file ({str(error)[:200]}).") from None
    if not rows:
        raise InputError(f"{where}: no rows.")
    return rows, digest.hexdigest(), flat, texts


def read_run(path: Path, task: str | None, keep_text: bool = False,
             max_rows: int = MAX_DETAILS_ROWS) -> LightevalOutput:
    results_path, details_path, key = find_files(path, task)
    results_bytes = strict_json.read_bytes(results_path, MAX_RESULTS_BYTES)
    raw = strict_json.loads(results_bytes, str(results_path))
    claims = check_results(raw, key, str(results_path))
    rows, details_sha256, flat, texts = read_details(details_path, keep_text, max_rows)
    return LightevalOutput(results_path, details_path, key, raw, rows, hashlib.sha256(results_bytes).hexdigest(),
                           details_sha256, flat, claims, texts=texts)


def public_copy(output: LightevalOutput) -> dict[str, bytes]:
    """What an adopted folder keeps of a lighteval run: its results file with someone else's paths as <path>, and
    each details row as the digests it was read into (no data text); a row of the flat schema keeps no doc id, as
    logged (the row rule names it again when the copy is audited)."""
    results = json.dumps(scrub_absolute_paths(output.results), indent=2, ensure_ascii=False) + "\n"
    rows = "".join(json.dumps(dict(dataclasses.asdict(row), doc_id=None if output.flat else row.doc_id)) + "\n"
                   for row in output.samples)
    return {LIGHTEVAL_RESULTS_FILE: results.encode(), LIGHTEVAL_DETAILS_FILE: rows.encode()}


def read_public(folder: Path, task: str | None) -> LightevalOutput:
    """An adopted folder's public copy (public_copy), someone else's file like any: strict JSON, every row typed;
    the schema is the rows': no doc id in any row is the flat one (before 0.11), a doc id in every row the later."""
    results_path, details_path = Path(folder) / LIGHTEVAL_RESULTS_FILE, Path(folder) / LIGHTEVAL_DETAILS_FILE
    results_bytes = strict_json.read_bytes(results_path, MAX_RESULTS_BYTES)
    raw = strict_json.loads(results_bytes, str(results_path))
    key = _task_key(raw, task, str(results_path))
    claims = check_results(raw, key, str(results_path))
    details_bytes = strict_json.read_bytes(details_path, MAX_SAMPLES_BYTES)
    rows = [convert(LightevalRow, line, f"{details_path}: row {number}")
            for number, line in enumerate(strict_json.loads_lines(details_bytes, str(details_path)))]
    named = {row.doc_id is not None for row in rows}
    if len(named) != 1:
        raise InputError(f"{details_path}: expected every row to name its doc id (lighteval 0.11 and later) or none "
                         f"to (before 0.11), got {'both' if named else 'no rows'}.")
    return LightevalOutput(results_path, details_path, key, raw, rows, hashlib.sha256(results_bytes).hexdigest(),
                           hashlib.sha256(details_bytes).hexdigest(), named == {False}, claims, public=True)
