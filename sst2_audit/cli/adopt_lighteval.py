"""sst2-audit adopt LIGHTEVAL-OUT --profile NAME: a lighteval run (its --output-dir, or its results file) held to
a profile of the reviewer's lock (audit/adopt_lighteval.py), and kept as an adopted folder (adopted.json, the results
file and the details' digests) that `audit` re-checks, with --bundle packed for a reviewer, with --export-eee written
as Every Eval Ever records."""

from sst2_audit.audit.adopt_lighteval import LightevalChoiceAdoption, refuse_unsupported, schema_words
from sst2_audit.cli.adopt_shared import adopt_task, adopted_target, logged, most_samples
from sst2_audit.cli.common import lock_and_profile, spec_for_run
from sst2_audit.formats import lighteval_details
from sst2_audit.formats.manifest import cache_for
from sst2_audit.util.errors import InputError


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
                                        keep_text=getattr(args, "export_eee", None) is not None,
                                        max_rows=most_samples(profile, spec))
    return adopt_task(args, (lock, profile, spec, output), LightevalChoiceAdoption(output.flat), models, (name, out),
                      lambda done: [f"adoption of the lighteval run {done.results_path} ({done.samples_path.name}, "
                                    f"{schema_words(done.flat)}): task {done.task}, {logged(done)}, held to the "
                                    f"reviewer's lock {lock.given} profile {profile.name} (task {spec.name})"])
