"""sst2-audit adopt: audit a plain `lm_eval --log_samples --output_path OUT` run and keep it as an adopted folder
(and bundle) that `audit` re-checks; also the audit of such a folder or bundle (cli/audit.py hands it here)."""

from pathlib import Path

from sst2_audit.audit.adopt_shapes import shape_for
from sst2_audit.audit.adopt_run import pin_command, plan_run
from sst2_audit.bundle import adopted as adopted_bundle
from sst2_audit.cli.adopt_lighteval import adopt_lighteval
from sst2_audit.cli.adopt_run import adopt_run, audit_adopted_run
from sst2_audit.cli.adopt_shared import (adopt_task, adopted_target, audit_task, logged, most_samples,
                                         print_outcome, refuse_unexported)
from sst2_audit.cli.common import (AUDIT_EXIT_CODES, lock_and_profile, numeric_mode, Parser, spec_for_run,
                                   with_format, with_profile)
from sst2_audit.formats import lighteval_details, lm_eval_run
from sst2_audit.formats.lm_eval_run import read_run_index
from sst2_audit.formats.adopted import ADOPTED_FILE
from sst2_audit.formats.adopted_read import read_adopted
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.manifest import cache_for
from sst2_audit.scoring.model import no_model_in_this_process
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.sanitize import printable


def rescore_rows(text: str):
    if text == "all":
        return "all"
    if not text.isdigit() or int(text) == 0:
        raise InputError(f"--rescore: expected a positive number of rows or 'all', got {text!r}")
    return int(text)


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit adopt", description="Audit a plain lm-eval run (lm_eval --log_samples "
                    "--output_path OUT) against your lock and cache, and keep it as an auditable folder. With no "
                    "--profile, every task the run logged is matched to the profile of your lock that pins it.",
                    epilog="example:\n  sst2-audit adopt OUT --profile embedded --bundle\n\n" + AUDIT_EXIT_CODES)
    with_profile(parser)
    with_format(parser)
    parser.add_argument("output", type=Path, help="lm-eval's --output_path folder, or its results_<date>.json (or a "
                                                  "lighteval run's --output-dir, or its results file, with --profile)")
    parser.add_argument("--task", action="append", metavar="TASK",
                        help="adopt only this task of the run (repeat for more; default: every task the run logged)")
    parser.add_argument("--run-name", help="the adopted folder's name (default: adopted-<profile>-<UTC time>, or "
                                           "adopted-run-<UTC time> for a run of many tasks)")
    parser.add_argument("--out", type=Path, help="where the adopted folder is written (default: runs/<run-name>)")
    parser.add_argument("--bound", type=float, metavar="NATS",
                        help="hold every logged score to |logged - rescored| <= NATS (default: derived from the "
                             "dtype the run claims, and stated)")
    parser.add_argument("--rescore", type=rescore_rows, default="all", metavar="N|all",
                        help="rescore N logged rows drawn at random (default: all; a sample gives exit 4)")
    parser.add_argument("--structural", action="store_true", help="every level but the rescore (exit 4)")
    parser.add_argument("--seed", type=int, help="seed of the --rescore draw (default: drawn fresh and printed)")
    parser.add_argument("--bundle", action="store_true", help="also pack results/<run-name>.tar.gz when nothing failed")
    parser.add_argument("--results", type=Path, default=Path("results"), help="where --bundle writes")
    parser.add_argument("--export-eee", type=Path, metavar="DIR",
                        help="also write each adopted task as Every Eval Ever records (its aggregate and instance "
                             "files, schema 0.3.0) under DIR/data/..., the verdict on every record")
    return parser


def main(argv, owns_process: bool = False, models: dict | None = None) -> int:
    """models: what earlier adoptions in this process loaded (model_key -> (model, tokenizer)); a corpus pass hands
    one to each of its runs, so a model verified and loaded for one run serves the next (the same hashes)."""
    args = _parser().parse_args(argv)
    models = {} if models is None else models
    if args.bound is not None and not (args.bound >= 0 and args.bound != float("inf")):
        raise InputError(f"--bound: expected a finite number of nats >= 0, got {args.bound!r}.")
    if owns_process and args.structural:
        no_model_in_this_process()
    lock = load_lock(args.lock)
    numeric_mode(lock)
    if lighteval_details.is_lighteval_run(args.output):
        return adopt_lighteval(args, lock, models)
    if args.profile is None:  # the run is read first: its tasks choose the reviewer's profiles (issue 65)
        index = read_run_index(args.output)
        plan = plan_run(lock, index, args.task)
        if len(plan.members) > 1 or plan.left_out or index.groups:
            return adopt_run(args, lock, index, plan, models)
        args.profile, args.task = plan.members[0][1], None
    elif args.task and len(args.task) > 1:
        raise InputError(f"--profile {args.profile} adopts one task; leave out --profile to adopt the tasks "
                         f"{', '.join(args.task)} of the run together.")
    lock, profile = lock_and_profile(args, lock)
    args.cache = cache_for(args.cache, profile.name)  # a cache of many profiles holds this one in <cache>/<profile>
    spec = spec_for_run(lock, profile, args.task[0] if args.task else None)
    refuse_unexported(args, spec)
    name, out = adopted_target(args, f"adopted-{profile.name}")
    try:
        output = lm_eval_run.read_plain_output(args.output, spec.name, spec.metrics, **spec.shape.samples_args(spec),
                                               keep_text=args.export_eee is not None,
                                               max_samples=most_samples(profile, spec))
    except lm_eval_run.TaskNotInRun as missing:
        raise InputError(f"{missing}; the profile {profile.name} of {lock.given} pins task {spec.name}. "
                         + " ".join(_taken_by(lock, task) for task in missing.tasks)) from None
    return adopt_task(args, (lock, profile, spec, output), shape_for(spec), models, (name, out), lambda done: [
        f"adoption of {done.results_path} ({done.samples_path.name}): task {spec.name}, {logged(done)}, against the "
        f"reviewer's lock {lock.given} profile {profile.name}"])


def _taken_by(lock, task: str) -> str:
    """Which of the lock's profiles adopt a task of the run, or the command that pins it."""
    profiles = sorted(name for name in lock.profiles if lock.profile(name).task == task)
    if profiles:
        return f"Task {task}: adopt it with --profile {' or --profile '.join(profiles)}."
    return f"Task {task}: no profile of this lock pins it; pin it with `{pin_command(lock, task, None)}`."


def audit_adopted(args, path: Path, scratch: Path) -> int:
    """audit --out ADOPTED or --bundle-file ADOPTED.tar.gz: the public copy through the adoption's levels on the
    reviewer's lock, cache and machine, then adopted.json against what they found (a run of many tasks: each task
    so, then the run's record, cli/adopt_run.py)."""
    if adopted_bundle.is_adopted_run(path):
        return audit_adopted_run(args, path, scratch)
    sums = None
    if path.is_file():
        try:
            folder, checks = adopted_bundle.unpack_verified(path, scratch)
        except CheckFailed:
            print("VERDICT: FAIL (bundle SHA256SUMS and members): the bundle was refused before any record was "
                  "read; exit 1")
            raise
        sums = f"bundle SHA256SUMS and members: PASS ({checks} checks)"
    else:
        folder = path
    packed = _to_pack(args, folder)
    outcome, adoption, claimed = audit_task(args, folder, {})
    head = [f"audit of the adopted run {claimed.run_name} in {path}: task {adoption.spec.name}, "
            f"{logged(adoption.output)}, against the reviewer's lock {adoption.lock.given}"] + ([sums] if sums else [])
    print_outcome(outcome, head, adoption, path)
    if packed is not None and not outcome.failed:  # a `run` of another shape, or an adoption kept without --bundle
        if {name: (folder / name).read_bytes() for name in packed} != packed:
            raise CheckFailed(f"{folder}: a file changed while it was audited; nothing packed.")
        bundle = adopted_bundle.pack(folder, packed, claimed.run_name, adoption.lock, adoption.cache, args.results)
        print(f"bundle: {printable(bundle)}")
    return outcome.exit_code


def _to_pack(args, folder: Path) -> dict | None:
    """audit --out ADOPTED --bundle: the folder's files as read before the audit (packed only as read), the bundle's
    name refused before any work when it exists."""
    if not getattr(args, "bundle", False):
        return None
    adopted_bundle.bundle_path(read_adopted(folder / ADOPTED_FILE).run_name, args.results)
    names = {item.name for item in folder.iterdir()}
    return {name: (folder / name).read_bytes() for name in adopted_bundle.public_files(names)}
