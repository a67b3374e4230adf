"""run --study NAME --variant P ...: one task under several variants (profiles of one task and one data that
differ in their settings: shot count, shot seed, ...), each a full dev run of its own, then study.json with
the paired numbers (protocol/study.py) and study.html. Layout: <out>/<profile>/ per variant, study.json last."""

from pathlib import Path

from sst2_audit.formats import records
from sst2_audit.formats.study import STUDY_FILE, STUDY_PAGE, StudyRecord, StudyVariant
from sst2_audit.pages.study import render_study
from sst2_audit.protocol.rules import notice_for
from sst2_audit.protocol.study import study_numbers
from sst2_audit.run import job as run_job
from sst2_audit.formats.manifest import cache_for
from sst2_audit.task.spec import require_data_for, spec_for
from sst2_audit.util import atomic
from sst2_audit.util.errors import InputError
from sst2_audit.util.hashing import canonical_json, sha256_file
from sst2_audit.util.progress import say


def require_variants(lock, profiles: list) -> None:
    """Two or more profiles of the lock, one task, the same data files: only their settings differ."""
    if len(profiles) < 2 or len(set(profiles)) != len(profiles):
        raise InputError(f"--variant: a study needs two or more different profiles (the first is the base), got "
                         f"{profiles}.")
    first = lock.profile(profiles[0])
    for name in profiles[1:]:
        profile = lock.profile(name)
        if profile.task != first.task or profile.data != first.data:
            raise InputError(f"--variant {name}: a study's variants score one task on the same data; {name} has task "
                             f"{profile.task} and its own data, the base {first.name} task {first.task}.")


def study_record(lock, profiles: list, metric: str, out: Path, run_name: str) -> StudyRecord:
    runs, variants = {}, []
    for name in profiles:
        run_file = Path(out) / name / records.RUN_FILE
        runs[name] = records.read(run_file, records.RunRecord)
        variants.append(StudyVariant(name, name, sha256_file(run_file), dict(lock.profile(name).settings)))
    base = lock.profile(profiles[0])
    return StudyRecord(run_name, lock.sha256, base.task, base.demo, notice_for(base), variants,
                       study_numbers(runs, metric))


def run_study(lock, profiles: list, metric: str, cache: Path, out: Path, private: Path, run_name: str) -> StudyRecord:
    require_variants(lock, profiles)
    if Path(out).exists():
        raise InputError(f"--out {out} already exists; a study's folder is never overwritten.")
    spec = spec_for(lock, lock.profile(profiles[0]).task)
    if metric not in spec.metrics:
        raise InputError(f"--metric {metric}: task {spec.name} reports {', '.join(spec.metrics)}.")
    for name in profiles:
        require_data_for(spec, lock.profile(name))
    for number, name in enumerate(profiles, start=1):
        say(f"[study {run_name}: variant {number}/{len(profiles)}, {name}, settings "
            f"{canonical_json(lock.profile(name).settings)}]")
        run_job.execute(run_job.RunOptions(lock, lock.profile(name), cache_for(cache, name), Path(out) / name,
                                           Path(private) / name, f"{run_name}-{name}", spec))
    record = study_record(lock, profiles, metric, out, run_name)
    atomic.write_text(Path(out) / STUDY_PAGE, render_study(record))
    atomic.write_json(Path(out) / STUDY_FILE, records.to_dict(record))  # last: its presence means complete
    return record
