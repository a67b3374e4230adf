"""Auditing an adopted folder or bundle: its public copy of the lm-eval files goes through the adoption's levels
again, on the reviewer's lock, cache and machine, and adopted.json (a claim like every file in it) must say what
they find, row by row."""

import dataclasses
from pathlib import Path

from sst2_audit.audit.adopt_generation import answer_changes, exact_match_summary
from sst2_audit.audit.adopt_rescore import rescored_summary
from sst2_audit.audit.adopt_scores import flip_test, row_class
from sst2_audit.audit.findings import LevelResult
from sst2_audit.audit.loading import BUNDLE_LOCK, BUNDLE_MANIFEST
from sst2_audit.formats import strict_json
from sst2_audit.formats.manifest import Manifest
from sst2_audit.formats.adopted import FLIP, NOT_DRAWN, ROW_CLASSES, SEALED
from sst2_audit.formats.adopted_generation import GENERATION_CLASSES
from sst2_audit.protocol.drift import DRIFT_BOUND
from sst2_audit.util.hashing import sha256_bytes

# the fields a re-adoption must reproduce exactly, per row; `rescored` is compared apart (a drawn sample)
ROW_FIELDS = ("label", "doc_hash", "prompt_hash", "target_hash", "context_length", "candidate_token_counts",
              "candidate_tokens_sha256", "choice_lengths", "shots", "logged", "logged_metrics", "true_choices")
# a row's tokens: None where the adoption rescored nothing (it derives none: lm-eval logs none)
TOKEN_FIELDS = ("context_length", "candidate_token_counts", "candidate_tokens_sha256")
RECORD_FIELDS = ("profile", "task", "metrics", "demo", "notice", "lock_sha256", "reported", "rederived",
                 "config_differences", "claims", "row_set")


def tokens_unclaimed(row, name: str, fields: tuple, rescored) -> bool:
    """A token field the record leaves null for a row nobody rescored (`rescored` None): an adoption that rescores
    nothing derives no tokens (lm-eval logs none), so nothing is claimed there to compare. A rescored row's tokens
    (its bound's sqrt(tokens)) are always compared."""
    return name in fields and getattr(row, name) is None and rescored is None


def claims_tokens(rows, fields: tuple, rescored: str) -> bool:
    """A record whose rows hold tokens or a rescore (the field `rescored`): its audit derives the tokens to hold
    them to (AdoptShape.tokenizes)."""
    return any(getattr(row, rescored) is not None or any(getattr(row, name) is not None for name in fields)
               for row in rows)


def _rescored(level: LevelResult, where: str, claimed, here, bits: bool) -> bool:
    """The recorded rescore against this machine's: bits where this machine runs the lock's mode, else the
    drift bound between CPUs (True: only within that bound)."""
    if here is None or claimed is None:  # not drawn this time, or by the adoption (--structural, --rescore N): the
        return False  # audit's own rescore level held the row's logged scores, and the record claims no rescore
    if bits or len(claimed) != len(here):
        level.expect(where, "rescored", here, claimed)
        return False
    if any(abs(a - b) > DRIFT_BOUND for a, b in zip(claimed, here)):
        level.expect(where, f"rescored (within the drift bound {DRIFT_BOUND:g})", here, claimed)
    return claimed != here


def undrawn_row(level: LevelResult, where: str, row, fields: tuple) -> None:
    """A row only this audit rescored: the adoption drew no rescore of it (--structural, --rescore N), so its record
    says `not drawn` and holds none of a rescore's fields; the audit's own rescore level held its logged scores."""
    level.expect(where, "row_class (a row the adoption did not rescore)", NOT_DRAWN, row.row_class)
    for name in fields:
        level.expect(where, f"{name} (a row the adoption did not rescore)", None, getattr(row, name))


def _own_arithmetic(level: LevelResult, claimed, iters: int) -> None:
    """adopted.json's summaries against its own rows: the reviewer's number, the row counts, each rescored row's class
    under the recorded bound and the flips' test, re-derived from the recorded scores (each row's rescore is held to
    this machine's below), so an edited summary or class cannot stand beside the rows."""
    level.expect("adopted.json", "rescored_summary (re-derived from its rows' rescored scores)",
                 rescored_summary(claimed.questions, claimed.metrics, iters), claimed.rescored_summary)
    level.expect("adopted.json", "row_classes (counted from its rows)",
                 {name: sum(q.row_class == name for q in claimed.questions) for name in ROW_CLASSES},
                 claimed.row_classes)
    flips: list = []
    for question in claimed.questions:
        if question.rescored is None:
            continue
        found, _, row_flips = row_class(question, claimed.bound, claimed.metrics)
        level.expect(f"row idx {question.idx}", "row_class (its scores under the recorded bound)", found,
                     question.row_class)
        flips += row_flips if found == FLIP else []
    test = flip_test(flips)
    level.expect("adopted.json", "flips (re-derived from its rows)",
                 {"counts": test.counts, "one_way": test.one_way} if claimed.rescore.get("rows") != 0 else {},
                 claimed.flips)


def compared_record(level: LevelResult, claimed, rederived, names, rows: str) -> dict:
    """The record's fields `names`, its bound and its rows' doc_ids (the field `rows`) against the record re-derived
    here; returns the re-derived rows by doc_id."""
    for name in names:
        level.expect("adopted.json", name, getattr(rederived, name), getattr(claimed, name))
    # the files the record names are your cache's (the same lock's profile) by path, role, hash and pin; a hash your
    # cache cannot know (a weight file the lock leaves unhashed, not fetched) is not compared
    unknown = {entry.path for entry in rederived.resources if entry.sha256 is None}
    level.expect("adopted.json", "resources (path, role, sha256 and pin of your cache's files)",
                 _files(rederived.resources, unknown), _files(claimed.resources, unknown))
    level.expect("adopted.json", "bound", dataclasses.asdict(rederived.bound), dataclasses.asdict(claimed.bound))
    mine = {row.idx: row for row in getattr(rederived, rows)}
    level.expect("adopted.json", f"{rows} (doc_ids)", sorted(mine), [row.idx for row in getattr(claimed, rows)])
    return mine


def _file(entry, unknown=frozenset()) -> list:
    """What names a cache's file: path, role, sha256 (None where unknown holds its path) and the lock's pin."""
    return [entry.path, entry.role, None if entry.path in unknown else entry.sha256, entry.locked_sha256]


def _files(entries, unknown: set) -> list:
    return sorted(_file(entry, unknown) for entry in entries)


def drift_said(level: LevelResult, drifted: int) -> None:
    """Recorded rescores equal to this machine's within the drift bound only: drift, said with its cause."""
    if drifted:
        level.drift_only = True
        level.drift_reason = (f"{drifted} recorded rescore(s) equal this machine's within the drift bound "
                              f"{DRIFT_BOUND:g} only: this machine does not run the lock's numeric mode")


def check(claimed, rederived, bits: bool, iters: int = 0) -> LevelResult:
    """adopted.json against the record the levels re-derived here."""
    level = LevelResult("adopted record")
    _own_arithmetic(level, claimed, iters)
    mine = compared_record(level, claimed, rederived, RECORD_FIELDS, "questions")
    drifted = 0
    for question in claimed.questions:
        here = mine.get(question.idx)
        if here is None:
            continue
        where = f"row idx {question.idx}"
        for name in ROW_FIELDS:
            if tokens_unclaimed(question, name, TOKEN_FIELDS, question.rescored):
                continue
            level.expect(where, name, getattr(here, name), getattr(question, name))
        drifted += _rescored(level, where, question.rescored, here.rescored, bits)
        if here.rescored is not None and question.rescored is None:
            undrawn_row(level, where, question, ("max_abs_diff",))
        elif here.rescored is not None or here.row_class == SEALED:
            level.expect(where, "row_class", here.row_class, question.row_class)
    drift_said(level, drifted)
    return level


def _own_generation_arithmetic(level: LevelResult, claimed) -> None:
    """A generate_until adopted.json's summaries against its own rows (as _own_arithmetic)."""
    for field_name, per_row in (("rescored_summary", "rescored_exact_match"), ("greedy_summary", "greedy_exact_match")):
        level.expect("adopted.json", f"{field_name} (re-derived from its rows)",
                     exact_match_summary(claimed.rows, claimed.filters, per_row), getattr(claimed, field_name))
    level.expect("adopted.json", "row_classes (counted from its rows)",
                 {name: sum(row.row_class == name for row in claimed.rows) for name in GENERATION_CLASSES},
                 claimed.row_classes)
    level.expect("adopted.json", "answer_changes (re-derived from its rows)",
                 answer_changes(claimed.rows, claimed.filters), claimed.answer_changes)


GENERATED_FIELDS = ("doc_hash", "prompt_hash", "target_hash", "context_length", "shots", "response_sha256",
                    "filtered_sha256", "logged_exact_match")
GENERATED_TOKEN_FIELDS = ("context_length",)  # None where the adoption re-decoded nothing
DECODE_FACTS = ("closest_step", "closest_margin", "ties", "left_at")  # compared where this machine runs the mode
REDECODED_FIELDS = ("rescored_response_sha256", "generated_tokens_sha256", "generated_tokens", "stopped",
                    "rescored_exact_match", "greedy_response_sha256", "greedy_exact_match", "row_class")


def check_generation(claimed, rederived, bits: bool) -> LevelResult:
    """A generate_until task's adopted.json against the record re-derived here: the decode's tokens are compared
    wherever this machine re-decoded the row; the margins only where it runs the lock's numeric mode."""
    level = LevelResult("adopted record")
    _own_generation_arithmetic(level, claimed)
    mine = compared_record(level, claimed, rederived,
                           (*(f for f in RECORD_FIELDS if f != "metrics"), "filters", "generation_kwargs"), "rows")
    for row in claimed.rows:
        here = mine.get(row.idx)
        if here is None:
            continue
        where = f"row idx {row.idx}"
        for name in GENERATED_FIELDS:
            if tokens_unclaimed(row, name, GENERATED_TOKEN_FIELDS, row.rescored_response_sha256):
                continue
            level.expect(where, name, getattr(here, name), getattr(row, name))
        if here.rescored_response_sha256 is not None and row.rescored_response_sha256 is None:
            undrawn_row(level, where, row, tuple(name for name in (*REDECODED_FIELDS, *DECODE_FACTS)
                                                 if name != "row_class"))
            continue
        if here.rescored_response_sha256 is None:
            if row.rescored_response_sha256 is None:  # nobody re-decoded it: its record holds no decode's facts
                for name in (*REDECODED_FIELDS, *DECODE_FACTS):
                    if name != "row_class":
                        level.expect(where, f"{name} (a row nobody re-decoded)", None, getattr(row, name))
            continue
        # a near-tie row was followed along the logged text at adoption; the public copy has no text to follow: its
        # recorded ties were taken again, and where that gave the logged hash the row is compared in full, else
        # only its class (the verdict says it was not re-followed)
        same = here.rescored_response_sha256 == here.response_sha256
        if not same and bits and claimed.bits_required and row.ties and all("rank" in tie for tie in row.ties):
            pairs = "; ".join(f"{tie['step']}, {tie['rank']}" for tie in row.ties)[:200]
            level.fail(f"{where}: the near ties adopted.json records (step, rank: {pairs}) do not give the logged "
                       "generation here; the adopting machine and this one both run the lock's numeric mode, so they "
                       "must")
        for name in (REDECODED_FIELDS if same else ("row_class",)) + (DECODE_FACTS if bits and same else ()):
            level.expect(where, name, getattr(here, name), getattr(row, name))
    return level


def bundle_copies(folder: Path, claimed) -> LevelResult:
    """An adopted bundle's copies of the adopting lock and cache manifest, held to adopted.json (nothing in a bundle
    rides along unchecked): the lock's sha256 is the record's lock_sha256 (itself held to the reviewer's lock), the
    manifest's files are the record's resources by path, role, sha256 and pin (a cache prepared without the
    weights lists them with the pinned hash and no size)."""
    level = LevelResult("bundle lock and manifest")
    lock = strict_json.read_bytes(folder / BUNDLE_LOCK)
    level.expect(BUNDLE_LOCK, "sha256 (adopted.json's lock_sha256)", claimed.lock_sha256, sha256_bytes(lock))
    manifest = Manifest.from_dict(strict_json.read(folder / BUNDLE_MANIFEST), str(folder / BUNDLE_MANIFEST))
    level.expect(BUNDLE_MANIFEST, "files (adopted.json's resources: path, role, sha256, pin)",
                 [_file(entry) for entry in claimed.resources], [_file(entry) for entry in manifest.files])
    return level
