"""sst2-audit adopt LIGHTEVAL-OUT --profile NAME: a lighteval run (its --output-dir, or its results file) held to
a profile of the reviewer's lock (audit/adopt_lighteval.py). The verdict is printed; nothing is written yet."""

from sst2_audit.audit.adopt import Adoption
from sst2_audit.audit.adopt_lighteval import LightevalChoiceAdoption, refuse_unsupported, schema_words
from sst2_audit.audit.adopt_rescore import run_levels
from sst2_audit.cli.adopt_shared import logged, print_outcome
from sst2_audit.cli.common import lock_and_profile, spec_for_run
from sst2_audit.formats import lighteval_details
from sst2_audit.formats.manifest import cache_for
from sst2_audit.scoring.shards import from_launcher, launched
from sst2_audit.util.errors import InputError
from sst2_audit.util.sanitize import printable

NOT_YET = ("--bundle", "bundle"), ("--export-eee", "export_eee"), ("--out", "out"), ("--run-name", "run_name")


def refuse_not_written(args, what: str) -> None:
    """An adoption whose verdict is printed, not written (a lighteval run): the options that write, and a launcher's
    processes, are refused before any work (exit 2)."""
    given = [option for option, name in NOT_YET if getattr(args, name, None)]
    if given:
        raise InputError(f"{args.output}: {what} is printed, not written, for now: {', '.join(given)} cannot be "
                         "used with it.")
    if launched() > 1:
        raise InputError(f"{what} runs in one process for now: run it without a launcher.")


def adopt_lighteval(args, lock, models: dict) -> int:
    if args.profile is None:
        raise InputError(f"{args.output}: a lighteval run names lighteval's tasks, which no lock pins: say which "
                         "profile of your lock its prompts are held to, with --profile NAME (adopt or corpus).")
    refuse_not_written(args, "a lighteval run's adoption")
    lock, profile = lock_and_profile(args, lock)
    args.cache = cache_for(args.cache, profile.name)
    spec = spec_for_run(lock, profile, None)
    refuse_unsupported(spec, lock.settings_for(profile.name, spec))
    shards = from_launcher()
    output = lighteval_details.read_run(args.output, args.task[0] if args.task else None)
    adoption = Adoption(lock, profile, spec, args.cache, output, 0 if args.structural else args.rescore, args.seed,
                        args.bound, models=models, shape=LightevalChoiceAdoption(output.flat))
    seed = shards.seed(args.seed)
    outcome = run_levels(adoption, {}, seed)  # the timings are a written record's: nothing is written here
    head = [f"adoption of the lighteval run {output.results_path} ({output.samples_path.name}, "
            f"{schema_words(output.flat)}): task {output.task}, "
            f"{logged(output)}, held to the reviewer's lock {lock.given} profile {profile.name} (task {spec.name})"]
    print_outcome(outcome, head, adoption, output.results_path)
    print(f"nothing written: a lighteval run's adoption is printed, not kept as a folder yet "
          f"({printable(str(args.output))})")
    return outcome.exit_code
