"""The dev / sealed confirmation partition of the validation rows.

Rule (also written in the lock): order rows by sha256(salt + ":" + str(idx)),
ties by idx; the first dev_rows are the dev set, the next confirm_rows are the
confirmation set. Confirmation rows reach a model only in a confirmation run (mode "confirm"): once per
pre-registration and profile, its ticket claimed in the cache first (run/confirm.py); every other run calls
require_dev() on the ids before either scoring path sees them.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from sst2_audit.formats.run_settings import MAX_ROWS
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import canonical_json, sha256_text

SMOKE_ROWS = 2  # --smoke scores the first two dev rows
CONFIRM_MODE = "confirm"  # a confirmation run scores every confirmation row, in hash order, and no dev row


def split_key(salt: str, idx: int) -> str:
    return sha256_text(f"{salt}:{idx}")


ROW_HASH_RULE = "sha256(canonical_json(doc))"
LEGACY_ROW_HASH_RULE = "sha256(canonical_json([sentence, label]))"  # records of schema 1 and 2 (SST-2 only)


def row_hash(doc: dict, rule: str = ROW_HASH_RULE) -> str:
    """Freezes a confirmation row's content (every field) without publishing its text."""
    if rule == LEGACY_ROW_HASH_RULE:
        return sha256_text(canonical_json([doc.get("sentence"), doc.get("label")]))
    if rule != ROW_HASH_RULE:
        raise InputError(f"split.row_hash_rule: expected {ROW_HASH_RULE!r} (or {LEGACY_ROW_HASH_RULE!r} in "
                         f"records before schema 3), got {rule!r}.")
    return sha256_text(canonical_json(doc))


@dataclass(frozen=True)
class Split:
    dev_ids: tuple  # in hash order
    confirm_ids: tuple  # in hash order

    def require_dev(self, ids) -> None:
        sealed = sorted(set(ids) & set(self.confirm_ids))
        if sealed:
            raise CheckFailed(
                f"refusing to score confirmation rows {sealed}: the confirmation set is sealed "
                "and never reaches a model."
            )
        outside = sorted(set(ids) - set(self.dev_ids))
        if outside:
            raise CheckFailed(f"refusing to score rows {outside}: they are not dev rows of this split.")

    def require_confirm(self, ids) -> None:
        """require_dev's counterpart for a confirmation run (its ticket claimed, or its chain verified): every id a
        confirmation row, never a dev row."""
        outside = sorted(set(ids) - set(self.confirm_ids))
        if outside:
            raise CheckFailed(f"refusing to score rows {outside} in a confirmation run: they are not confirmation "
                              "rows of this split.")

    def scored(self, rows: int | None) -> list:
        """The ids a run scores: the first `rows` dev rows in hash order (a prefix: no choosing), else all."""
        if rows is not None and rows > len(self.dev_ids):  # a count past a full-split profile's rows
            raise InputError(f"--rows {rows}: the profile has {len(self.dev_ids)} dev rows.")
        return list(self.dev_ids if rows is None else self.dev_ids[:rows])


def mode_for(scored: list, dev: Sequence, confirm: Sequence = ()) -> str | None:
    """How run.json names what a run scored: "full", "smoke" (the first SMOKE_ROWS), "first-N" (a group's
    per-subtask row count), "confirm" (every confirmation row); None when the scored ids are none of these."""
    if scored and list(scored) == list(confirm):
        return CONFIRM_MODE
    if list(scored) != list(dev[:len(scored)]) or not scored:
        return None
    return "full" if len(scored) == len(dev) else "smoke" if len(scored) == SMOKE_ROWS else f"first-{len(scored)}"


def rows_of(mode: str, dev: Sequence, confirm: Sequence = ()) -> list:
    """The ids a run of this mode scores (the arithmetic level's expectation)."""
    if mode == CONFIRM_MODE:
        return list(confirm)
    if mode.startswith("first-") and mode[6:].isdigit():
        return list(dev[:int(mode[6:])])
    return list(dev[:SMOKE_ROWS] if mode == "smoke" else dev)


def make_split(idx_values, salt: str, dev_rows: int, confirm_rows: int, split_name: str = "validation",
               profile_rows: int | str | None = None) -> Split:
    """The lock's rule; profile_rows (a profile's `dev_rows`: a count or "all") takes the dev rows on past the
    sealed block in the same hash order, so the lock's first dev rows and its confirmation rows stay what they are
    (a full-split profile: every row that is not sealed)."""
    ordered = sorted(idx_values, key=lambda idx: (split_key(salt, idx), idx))
    if len(ordered) < dev_rows + confirm_rows:
        raise InputError(
            f"{split_name} split has {len(ordered)} rows; the split rule needs at least "
            f"{dev_rows + confirm_rows} ({dev_rows} dev + {confirm_rows} confirmation)."
        )
    open_rows = ordered[:dev_rows] + ordered[dev_rows + confirm_rows:]
    dev = ordered[:dev_rows] if profile_rows is None else open_rows if profile_rows == "all" else \
        open_rows[:int(profile_rows)]
    if type(profile_rows) is int and len(dev) < profile_rows:
        raise InputError(f"{split_name} split has {len(ordered)} rows; the profile's dev_rows {profile_rows} needs "
                         f"{profile_rows + confirm_rows} ({profile_rows} dev + {confirm_rows} sealed confirmation).")
    if len(dev) > MAX_ROWS:
        raise InputError(f"{split_name} split has {len(open_rows)} rows that are not sealed; a profile's dev_rows "
                         f"`all` takes at most {MAX_ROWS}: pin a count instead (--dev-rows {MAX_ROWS}).")
    return Split(tuple(dev), tuple(ordered[dev_rows:dev_rows + confirm_rows]))
