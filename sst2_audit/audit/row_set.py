"""Which rows an adopted run logged, against the rules a reviewer recognises: the row set is a claim too.

A submitter who drops the rows a model got wrong (and recomputes the numbers and lm-eval's task hash) changes the
metric without changing one logged score. So the logged doc_ids are compared with:
- the whole split (n-samples.original: lm-eval's count of the evaluated split's documents);
- lm-eval's `--limit N` (config.limit): its first N documents, ceil(N * rows) for a fraction (get_sample_size);
- the reviewer's profile: its first k dev rows in hash order (what `run --rows k` scores).
lm-eval logs no `--samples` ids in either release (config.limit stays null): 0.4.9.2 counts the whole split as
n-samples.effective, 0.4.13 the scored documents. A `--samples` run is recognised only where its ids are one of
the rules above (the tests' runs take the profile's first dev rows in hash order).

A run whose counts contradict what its own release writes is a FAIL. A row set that matches no rule is never a
PASS: the verdict names the nearest rule, its missing and extra doc_ids, and the metric "over k of n rows".
"""

import math
from dataclasses import dataclass, field

from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats.releases import release_of
from sst2_audit.task.rows import shown_ids

WHOLE, LIMIT, DEV = "the whole split", "lm-eval's --limit", "the profile's dev rows in hash order"


def most_lines(docs: int, spec) -> int:
    """The most samples lines a run of a split of `docs` docs may log before any per-row work: twice them and 16,
    a line per doc and filter lm-eval logs it under (the shape's logged_filters)."""
    return (2 * docs + 16) * len(spec.shape.logged_filters(spec))


@dataclass
class RowSet:
    """The logged rows against the rules: the rule matched (None: none), or the nearest and what it lacks."""
    logged: int  # distinct doc_ids logged
    split_rows: int  # the reviewer's evaluated split
    rule: str | None  # the rule the logged set equals, in words
    nearest: str | None = None  # no rule matched: the closest, in words
    missing: list[int] = field(default_factory=list)  # doc_ids the nearest rule has and the run did not log
    extra: list[int] = field(default_factory=list)  # doc_ids the run logged outside the nearest rule

    def words(self) -> str:
        if self.rule:
            return f"rows: {self.logged} of {self.split_rows}, {self.rule}"
        return (f"rows: {self.logged} of {self.split_rows} logged match no rule a reviewer recognises (the whole "
                f"split, lm-eval's --limit, the profile's dev rows in hash order); nearest: {self.nearest}, "
                f"{len(self.missing)} missing (doc_ids {shown_ids(self.missing, 12)}), {len(self.extra)} extra "
                f"(doc_ids {shown_ids(self.extra, 12)}): every number is over these {self.logged} rows only")


def limit_rows(limit, original: int) -> int | None:
    """lm-eval's get_sample_size: a fraction below 1 is ceil(fraction * rows), else int(limit); capped at rows."""
    if limit is None:
        return None
    return min(int(math.ceil(original * limit)) if limit < 1.0 else int(limit), original)


def _rules(split_ids: list, dev_ids: tuple, logged: set, limit: int | None) -> list:
    """(words, ids) of every rule that applies to a set of this size."""
    rules = [(f"{WHOLE} ({len(split_ids)} rows)", split_ids)]
    if limit is not None:
        rules.append((f"{LIMIT} {limit}: its first {limit} rows", split_ids[:limit]))
    positions = {idx: number for number, idx in enumerate(dev_ids)}
    if logged and logged <= set(positions):
        # the shortest prefix of the hash order holding every logged dev row: the prefix a dropped row came from
        reach = max(positions[idx] for idx in logged) + 1
        rules.append((f"{DEV}, the first {reach}", list(dev_ids[:reach])))
    elif len(logged) <= len(dev_ids):
        rules.append((f"{DEV}, the first {len(logged)}", list(dev_ids[:len(logged)])))
    return rules


def check_row_set(adoption, level: LevelResult) -> RowSet:
    """The row set's claims into `level` (a contradiction fails it), and what the set matched."""
    results, task = adoption.output.results, adoption.spec.name
    release = release_of(adoption.lock.evaluator.version)
    split_ids = sorted(adoption.split_rows.by_idx)
    logged = {sample.doc_id for sample in adoption.output.samples}
    counts = results["n-samples"][task]
    limit_claim = results["config"].get("limit")
    if limit_claim is not None and (type(limit_claim) not in (int, float) or not 0 < limit_claim < 1e12):
        level.fail(f"results: config.limit: expected null or a positive number (lm-eval's --limit), got "
                   f"{limit_claim!r}")
        limit_claim = None
    limit = limit_rows(limit_claim, len(split_ids))
    level.expect("results", f"n-samples.{task}.original (the split's rows, as lm-eval counts its eval docs)",
                 len(split_ids), counts.get("original"))
    if limit is not None or release.n_samples_effective_is_scored:
        effective, how = (len(logged), "the rows logged") if limit is None else (limit, f"--limit's {limit} rows")
    else:  # 0.4.9.2 counts the whole split unless --limit was given, whatever --samples chose
        effective, how = len(split_ids), "the split's rows (lm-eval 0.4.9.2 without --limit)"
    level.expect("results", f"n-samples.{task}.effective ({how})", effective, counts.get("effective"))
    if limit is not None:
        level.expect("samples", f"doc_ids (--limit {limit_claim!r}: lm-eval's first {limit} rows)",
                     list(range(limit)) if limit <= len(split_ids) else split_ids, sorted(logged))
    rules = _rules(split_ids, adoption.split_rows.split.dev_ids, logged, limit)
    for words, ids in rules:
        if set(ids) == logged:
            return RowSet(len(logged), len(split_ids), words)
    words, ids = min(rules, key=lambda rule: len(set(rule[1]) ^ logged))
    return RowSet(len(logged), len(split_ids), None, words, sorted(set(ids) - logged), sorted(logged - set(ids)))
