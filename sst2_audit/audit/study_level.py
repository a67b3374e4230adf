"""The study level: study.json against the reviewer's lock (each variant a profile with the settings it
claims), each variant's run.json by sha256, every number re-derived from the variants' records, and
study.html regenerated from study.json. Every variant's run is audited as any run (cli/experiments.py)."""

from pathlib import Path

from sst2_audit.audit.findings import LevelResult
from sst2_audit.formats import records
from sst2_audit.formats.study import STUDY_PAGE, StudyRecord
from sst2_audit.pages.study import render_study
from sst2_audit.protocol.rules import notice_for
from sst2_audit.protocol.study import study_numbers
from sst2_audit.run.study import require_variants
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import sha256_file


def check(folder: Path, record: StudyRecord, lock) -> LevelResult:
    result = LevelResult("study")
    names = [variant.profile for variant in record.variants]
    unknown = [name for name in names if name not in lock.profiles]
    if unknown:
        result.fail(f"variants {unknown}: not profiles of your lock ({lock.path.name})")
        return result
    try:
        require_variants(lock, names)
    except InputError as error:
        result.fail(str(error))
        return result
    base = lock.profile(names[0])
    result.expect("study", "lock_sha256 (your lock's)", lock.sha256, record.lock_sha256)
    result.expect("study", "task, demo, notice (the base profile's in your lock)",
                  [base.task, base.demo, notice_for(base)], [record.task, record.demo, record.notice])
    runs = {}
    for variant in record.variants:
        where = f"variant {variant.profile}"
        run_file = Path(folder) / variant.profile / records.RUN_FILE
        result.expect(where, "settings (the profile's in your lock)", dict(lock.profile(variant.profile).settings),
                      variant.settings)
        if not result.expect(where, "run (its folder: the profile's name)", variant.profile, variant.run) \
                or not run_file.is_file():
            result.fail(f"{where}: {run_file} is missing")
            continue
        result.expect(where, "run.json sha256", sha256_file(run_file), variant.run_sha256)
        runs[variant.profile] = records.read(run_file, records.RunRecord)
        result.expect(where, "profile and mode", [variant.profile, "full"],
                      [runs[variant.profile].profile, runs[variant.profile].mode])
    if len(runs) == len(names):
        try:
            metric = record.numbers.get("metric")
            if not isinstance(metric, str):
                raise TypeError(f"numbers.metric must be a metric's name, got {str(metric)[:40]!r}")
            rederived = study_numbers(runs, metric)
        except (InputError, KeyError, TypeError) as error:
            result.fail(f"study numbers cannot be re-derived from the variants' records ({error})")
            return result
        for key in sorted(set(rederived) | set(record.numbers)):
            result.expect("study numbers", f"{key} (re-derived)", rederived.get(key), record.numbers.get(key))
    if result.passed:  # a page is regenerated only from a record whose every field checked out
        page = Path(folder) / STUDY_PAGE
        result.expect("study", f"{STUDY_PAGE} (regenerated from study.json)", render_study(record),
                      page.read_text(encoding="utf-8") if page.is_file() else None)
    return result
