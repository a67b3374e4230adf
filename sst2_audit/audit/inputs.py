"""The reviewer's verified inputs for one audited run, built once, in the main thread, when the record
levels have passed: the cache hashed against the reviewer's lock (model and splits, each file once), the
rows and the split, the shot plan of the ids the run's mode scores, and the tokenizer. The identity level
and the rescore both read them; no thread re-derives them."""

import threading
from dataclasses import dataclass, field
from pathlib import Path

from sst2_audit.audit.loading import RunFolder
from sst2_audit.formats.manifest import is_weights
from sst2_audit.scoring.model import import_model_code, load_tokenizer
from sst2_audit.task.rows import shot_plan, SplitRows, verified_rows
from sst2_audit.task.split import rows_of
from sst2_audit.util import warm
from sst2_audit.util.errors import CheckFailed, InputError


@dataclass
class Inputs:
    data: SplitRows | None = None
    scored: list = field(default_factory=list)  # the ids the run's mode scores, from the reviewer's split
    shots: object = None  # the few-shot plan of those ids, or None (zero-shot)
    tokenizer: object = None
    error: Exception | None = None  # a cache file that differs (CheckFailed) or a refused shot plan (InputError):
    # raised by the level that would have met it, so the verdict is what it was when each level derived its own
    tokenizer_free: threading.Event = field(default_factory=threading.Event)  # the identity level is done with it
    unhashed: list = field(default_factory=list)  # the model's weights, when no level loads them


def build(run: RunFolder, cache, weights: bool = True) -> Inputs | None:
    """None for a run whose record or profile the levels will refuse (they name why). weights=False (no rescore):
    the model's weights are neither hashed nor loaded, and no model code is imported."""
    try:
        record, spec = run.record, run.task_spec()
    except (CheckFailed, InputError):
        return None
    if record is None or spec is None:
        return None
    inputs = Inputs()
    profile = run.lock.profile(record.profile)
    try:
        inputs.data = verified_rows(run.lock, profile, spec, cache, roles=("model", *spec.splits), weights=weights)
        inputs.unhashed = [] if weights else [entry.path for entry in inputs.data.manifest.files if is_weights(entry)]
        inputs.scored = rows_of(record.mode, inputs.data.split.dev_ids, inputs.data.split.confirm_ids)
        inputs.shots = shot_plan(run.lock, profile, spec, cache, inputs.data.manifest, inputs.data, inputs.scored)
    except (CheckFailed, InputError) as error:
        inputs.error = error
        return inputs
    warm.wait("transformers")
    inputs.tokenizer = load_tokenizer(Path(cache) / "model")
    if weights:  # here, in the main thread: the rescore thread's load imports nothing
        import_model_code(Path(cache) / "model")
    return inputs
