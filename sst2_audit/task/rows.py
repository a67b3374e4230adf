"""The evaluated split's rows as run, identity and rescore all take them: the cache verified against the
lock first (hash before read), then the parquet read, the rows by position, and the lock's split rule."""

from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.fields import columns_of
from sst2_audit.formats.manifest import Manifest, read_manifest, require_matching, verify_files
from sst2_audit.formats.releases import release_of
from sst2_audit.task import chat, fewshot
from sst2_audit.task.dataset import read_parquet
from sst2_audit.task.split import make_split, Split
from sst2_audit.util.errors import InputError


@dataclass(frozen=True)
class SplitRows:
    manifest: Manifest  # the cache's manifest, matched to the lock's profile
    by_idx: dict  # position -> dataset.Row
    split: Split


def matching_manifest(lock, profile, cache):
    """The cache's manifest, refused unless it was prepared for this lock's profile."""
    return require_matching(read_manifest(cache), Path(cache), lock, profile)


def verified_rows(lock, profile, spec, cache, roles, manifest=None, weights: bool = True,
                  random_seed: int | None = None) -> SplitRows:
    """Raises CheckFailed when a file of `roles` differs from the manifest (weights: manifest.verify_files).
    random_seed: simple_evaluate's, which a process_docs hook may draw from (default: the profile's seed, what run
    hands simple_evaluate; an adopted run's is its own claim)."""
    manifest = manifest or matching_manifest(lock, profile, cache)
    verify_files(cache, manifest, roles=roles, weights=weights)
    parquet = Path(cache) / manifest.file(spec.eval_split).path
    settings = lock.settings_for(profile.name, spec)
    seed = settings["seed"] if random_seed is None else random_seed
    rows = spec.processed(read_parquet(parquet, columns=columns_of(profile.data)), parquet, seed)  # lm-eval's docs
    by_idx = {row.idx: row for row in rows}
    split = make_split(list(by_idx), lock.split.salt, lock.split.dev_rows, lock.split.confirm_rows,
                       spec.eval_split, settings.get("dev_rows"))
    return SplitRows(manifest, by_idx, split)


def shown_ids(ids, limit: int = 20) -> str:
    """An id list as a message shows it: the first `limit`, and how many more were cut."""
    ids = list(ids)
    return f"{ids[:limit]}" + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def shot_plan(lock, profile, spec, cache, manifest, data: SplitRows, scored_ids: list):
    """The few-shot plan of a profile that pins num_fewshot > 0, else None; under the profile's chat settings the
    chat.ChatPlan around it, every prompt rendered. Its shot split's file was verified with the rest of the cache;
    a plan that would show a sealed confirmation row as a shot is refused here, before any model call."""

    settings, release = lock.settings_for(profile.name, spec), release_of(lock.evaluator.version)
    chat_settings = chat.ChatSettings.of(settings)
    plan = _fewshot_plan(lock, profile, spec, cache, manifest, data, scored_ids, settings,
                         chat.wastes_a_draw(chat_settings, release))
    if chat_settings.plain:
        return plan
    template = chat.template_of(cache, manifest, profile.name) if chat_settings.apply_chat_template else None
    return chat.plan(spec, chat_settings, plan, [data.by_idx[idx] for idx in scored_ids], template, release)


def _fewshot_plan(lock, profile, spec, cache, manifest, data: SplitRows, scored_ids: list, settings: dict,
                  wasted_draw: bool):
    if settings["num_fewshot"] == 0:
        return None

    def rows_of(split: str) -> list:
        if split == spec.eval_split:
            return list(data.by_idx.values())
        parquet = Path(cache) / manifest.file(split).path
        return spec.processed(read_parquet(parquet, columns=columns_of(profile.data)), parquet, settings["seed"])

    plan = fewshot.plan(spec, settings["num_fewshot"], settings["seed"], fewshot.shot_docs(spec, rows_of),
                        [data.by_idx[idx] for idx in scored_ids],
                        release_of(lock.evaluator.version).fewshot_resamples, wasted_draw)
    sealed = plan.sealed(spec, data.split.confirm_ids)
    if sealed and not settings.get("shots_may_show_sealed_rows"):
        raise InputError(f"profile {profile.name}: {settings['num_fewshot']} shots drawn from the evaluated split "
                         f"{spec.eval_split!r} would show {len(sealed)} sealed confirmation rows as shots (with "
                         f"their answers): {shown_ids(sealed)}; the confirmation set is never shown to a model. Pin "
                         "a task whose shots come from another split, or allow it explicitly: sst2-audit prepare "
                         "--pin ... --shots-may-show-sealed-rows (the profile setting shots_may_show_sealed_rows: "
                         "true, recorded and shown on the card).")
    return plan
