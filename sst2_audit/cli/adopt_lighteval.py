"""sst2-audit adopt LIGHTEVAL-OUT --profile NAME: a lighteval run (its --output-dir, or its results file) held to
a profile of the reviewer's lock (audit/adopt_lighteval.py), and kept as an adopted folder (adopted.json, the results
file and the details' digests) that `audit` re-checks, with --bundle packed for a reviewer, with --export-eee written
as Every Eval Ever records."""

import time

from sst2_audit.audit.adopt import Adoption
from sst2_audit.audit.adopt_lighteval import LightevalChoiceAdoption, refuse_unsupported, schema_words
from sst2_audit.audit.adopt_rescore import run_levels
from sst2_audit.cli.adopt_shared import adopted_target, logged, report_task
from sst2_audit.cli.common import lock_and_profile, spec_for_run
from sst2_audit.formats import lighteval_details
from sst2_audit.formats.manifest import cache_for
from sst2_audit.scoring.shards import from_launcher
from sst2_audit.util.errors import InputError
from sst2_audit.util.progress import set_quiet


def adopt_lighteval(args, lock, models: dict) -> int:
    if args.profile is None:
        raise InputError(f"{args.output}: a lighteval run names lighteval's tasks, which no lock pins: say which "
                         "profile of your lock its prompts are held to, with --profile NAME (adopt or corpus).")
    lock, profile = lock_and_profile(args, lock)
    args.cache = cache_for(args.cache, profile.name)
    spec = spec_for_run(lock, profile, None)
    refuse_unsupported(spec, lock.settings_for(profile.name, spec))
    name, out = adopted_target(args, f"adopted-{profile.name}")
    output = lighteval_details.read_run(args.output, args.task[0] if args.task else None,
                                        keep_text=getattr(args, "export_eee", None) is not None)
    shards = from_launcher()  # one process, or the N a launcher started: each rescores its share, rank 0 reports
    try:
        set_quiet(not shards.lead)
        adoption = Adoption(lock, profile, spec, args.cache, output, 0 if args.structural else args.rescore,
                            args.seed, args.bound, shards=shards, models=models,
                            shape=LightevalChoiceAdoption(output.flat))
        seed = shards.seed(args.seed)
        timings: dict = {}
        start = time.perf_counter()
        outcome = run_levels(adoption, timings, seed)
        timings["total"] = round(time.perf_counter() - start, 3)
        head = [f"adoption of the lighteval run {output.results_path} ({output.samples_path.name}, "
                f"{schema_words(output.flat)}): task {output.task}, {logged(output)}, held to the reviewer's lock "
                f"{lock.given} profile {profile.name} (task {spec.name})"]
        code = report_task(args, adoption, outcome, (name, out, seed, timings), head) if shards.lead else None
        return shards.broadcast(code)  # every process exits as rank 0 does
    finally:
        shards.close()
