"""run --preregister / --confirm / --study, and the audit of a confirmation or study folder (audit --out DIR)."""

from pathlib import Path

from sst2_audit.audit.confirmation import check_chain, preregister, verify_for_confirm
from sst2_audit.audit.loading import load_run
from sst2_audit.audit.runner import Policy, run_levels
from sst2_audit.audit import study_level
from sst2_audit.audit.verdict import GroupOutcome
from sst2_audit.bundle import confirmation as confirmation_bundle
from sst2_audit.formats import prereg as formats, strict_json
from sst2_audit.cli.common import audit_words, auditable, numeric_mode, show_verdict
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.study import STUDY_FILE, STUDY_PAGE, StudyRecord
from sst2_audit.protocol.decision import outcome_line
from sst2_audit.formats.manifest import cache_for
from sst2_audit.run.confirm import card, confirm
from sst2_audit.run.job import default_run_name
from sst2_audit.run.study import run_study
from sst2_audit.util import atomic
from sst2_audit.util.commands import command_line
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file
from sst2_audit.util.progress import set_quiet
from sst2_audit.util.sanitize import RUN_NAME, terminal


def is_confirmation(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / formats.CONFIRMATION_FILE).is_file()


def is_study(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / STUDY_FILE).is_file()


def _folders(args, default: str) -> tuple:
    name = args.run_name or default_run_name(default, False).replace("-full-", "-")
    if not RUN_NAME.match(name) or len(name) > 60:
        raise InputError(f"--run-name {name!r}: expected letters, digits, '.', '_' or '-' (at most 60), starting "
                         "with a letter or digit.")
    out, private = args.out or Path("runs") / name, args.private or Path("private") / name
    if out.exists():
        raise InputError(f"--out {out} already exists; a confirmation's or study's folder is never overwritten.")
    return name, out, private


def preregister_main(args) -> int:
    out = args.preregister
    if out.exists():
        raise InputError(f"--preregister {out} already exists; a pre-registration is never overwritten.")
    atomic.require_writable_folder(out.parent, "--preregister")
    if not args.dev_run or args.rule is None or args.metric is None:
        raise InputError("--preregister needs --dev-run DIR (one a profile), --rule KIND and --metric NAME "
                         "(--threshold X with --rule at-least).")
    lock = load_lock(args.lock)
    record, rule = preregister(lock, out, args.dev_run, args.rule, args.metric, args.threshold)
    formats.write(out, record)
    lines = [f"pre-registration {out}: sha256 {sha256_file(out)}",
             f"  rule          {rule.statement()}",
             *(f"  dev run       {d.profile}: {d.path} ({d.rows} rows, {record.rule.metric} {d.value!r}, run.json "
               f"{d.run_sha256[:12]})" for d in record.dev_runs),
             f"  on dev        {outcome_line(rule, record.dev_outcome)}",
             f"  confirm       {lock.split.confirm_rows} sealed rows per profile, once: "
             + command_line("run", "--confirm", out, *audit_words(args, out)[2:])]
    print(terminal(lines))
    return 0


def confirm_main(args) -> int:
    lock = load_lock(args.lock)
    numeric_mode(lock)
    prereg_file = args.confirm
    if not prereg_file.is_file():
        raise InputError(f"--confirm {prereg_file}: expected a pre-registration file (run --preregister), got "
                         f"{'a folder' if prereg_file.is_dir() else 'nothing there'}.")
    name, out, private = _folders(args, "confirm")
    set_quiet(args.quiet or args.json)
    verified = verify_for_confirm(lock, prereg_file, args.cache)
    record = confirm(lock, verified, out, private, name, args.reconfirm)
    for run in record.runs:  # each confirmation run, as the confirmation's audit will read it
        auditable(out / run.run, lock, verified.caches[run.profile], record.preregistration_sha256)
    words = audit_words(args, out)
    print(terminal([f"confirmation {name} of pre-registration {record.preregistration_sha256[:12]}",
                    f"  outcome       {record.outcome_line}",
                    f"  record        {out / formats.CONFIRMATION_FILE}",
                    "  next          audit (the chain, every confirmation row rescored): "
                    + command_line("audit", *words)]))
    return 0


def audit_confirmation(args, folder: Path, level_lines, shown=None, sums=None) -> int:
    """The chain, each dev run's audit without a rescore (its record and identity levels), each confirmation
    run audited as any run; one verdict first and last. `folder`: a confirmation folder, or a verified
    confirmation bundle unpacked (`shown` names the bundle, `sums` its level). --bundle packs it after a PASS."""
    shown = shown or folder
    confirmation_file = folder / formats.CONFIRMATION_FILE
    confirmation_bytes = strict_json.read_bytes(confirmation_file)  # what the audit checks and a bundle packs
    record = formats.parse_versioned(confirmation_bytes, str(confirmation_file), formats.ConfirmationRecord)
    chain, rule, prereg_bytes = check_chain(folder, record, args.reviewer_lock)
    profiles = list(rule.profiles) if rule is not None else []
    if args.bundle:  # refused before the audit's work, not after it
        confirmation_bundle.bundle_target(record, profiles, args.results)
    runs = {}
    for profile in profiles:
        dev = folder / formats.DEV_FOLDER / profile
        if dev.is_dir():
            runs[formats.DEV_FOLDER, profile] = load_run(dev, args.reviewer_lock)
            dev_outcome = run_levels(runs[formats.DEV_FOLDER, profile], cache_for(args.cache, profile),
                                     Policy(0, not args.arithmetic_only, args.accept_old_schema))
            for level in dev_outcome.levels:
                for problem in level.problems[:5]:
                    chain.fail(f"dev run {profile}: {level.name}: {problem}")
            chain.notes.append(f"dev run {profile}: " + ", ".join(
                f"{level.name} {'SKIPPED' if level.skipped else 'PASS' if level.passed else 'FAIL'}"
                for level in dev_outcome.levels) + " (not rescored: the decision rests on the confirmation rows)")
    rescore = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    # audited as part of this chain, whose own level decides whether it holds (a broken chain fails the verdict)
    policy = Policy(rescore, not args.arithmetic_only, args.accept_old_schema, args.seed,
                    confirmation=record.preregistration_sha256)
    sections, members = [], {}
    for member in record.runs:
        run_folder = folder / formats.CONFIRM_FOLDER / member.profile
        if member.profile not in profiles or not run_folder.is_dir():
            continue  # the chain level names it; a folder the pre-registration does not name is never opened
        run = runs[formats.CONFIRM_FOLDER, member.profile] = load_run(run_folder, args.reviewer_lock)
        outcome = members[member.profile] = run_levels(run, cache_for(args.cache, member.profile), policy)
        where = run_folder if shown == folder else \
            f"{shown} ({confirmation_bundle.run_member(formats.CONFIRM_FOLDER, member.profile)})"
        sections += [f"--- confirmation run {member.profile}: {outcome.verdict()}"]
        sections += level_lines(where, run, outcome)[1:-1]
    spent = "".join(f"; the record says the sealed rows of {profile} were confirmed {count} time(s) before from the "
                    "submitter's cache (--reconfirm)" for profile, count in record.prior_confirmations.items() if count)
    result = GroupOutcome(members, chain, len(record.runs), True, "confirmation", formats.CANNOT_KNOW + spent)
    verdict = result.verdict()
    lines = [verdict, f"audit of confirmation {record.run_name} in {shown}: pre-registration "
             f"{record.preregistration_sha256[:12]}, {len(record.runs)} profile(s)",
             f"  decision rule  {record.statement}", f"  outcome        {record.outcome_line}"]
    show_verdict(lines + (sums.lines() if sums else []) + chain.lines() + sections + [verdict], result, shown)
    if args.bundle:
        if result.failed:
            raise CheckFailed(f"the audit of {shown} failed; no bundle is packed for a confirmation that does not "
                              "pass.")
        checked = {formats.CONFIRMATION_FILE: confirmation_bytes, formats.PREREG_FILE: prereg_bytes,
                   formats.CONFIRMATION_CARD: card(record).encode()}  # the card as the chain level regenerated it
        path = confirmation_bundle.pack(checked, record, runs, {p: cache_for(args.cache, p) for p in profiles},
                                        args.results)
        print(terminal([f"bundle: {path}"]))
    return result.exit_code


def study_main(args) -> int:
    lock = load_lock(args.lock)
    numeric_mode(lock)
    if not args.variant or args.metric is None:
        raise InputError("--study needs --variant PROFILE twice or more (the first is the base) and --metric "
                         "(acc or acc_norm).")
    name, out, private = _folders(args, f"study-{args.study}")
    set_quiet(args.quiet or args.json)
    record = run_study(lock, args.variant, args.metric, args.cache, out, private, name)
    for variant in record.variants:  # each variant's run, as the study's audit will read it
        auditable(out / variant.run, lock, cache_for(args.cache, variant.profile))
    numbers = record.numbers
    lines = [f"*** {record.notice} ***"] if record.demo else []
    lines += [f"study {name}: task {record.task}, {len(record.variants)} variants on the same "
              f"{len(numbers['questions'])} dev rows, {numbers['metric']}, base {numbers['base']}"]
    for variant in record.variants:
        paired = numbers["paired"].get(variant.profile)
        low, high = paired["interval"] if paired else (0.0, 0.0)
        shown = (f"; variant - base {paired['difference']:+.4f} (95% Bonett-Price interval {low:+.4f} to "
                 f"{high:+.4f}), only base right {paired['base_only']}, only variant right "
                 f"{paired['variant_only']}, exact McNemar p = {paired['mcnemar_p']:.4g} (unadjusted, "
                 f"{len(numbers['paired'])} comparisons; Holm {paired['mcnemar_p_holm']:.4g}: "
                 f"{'differs' if paired['differs'] else 'no difference shown'})" if paired else " (base)")
        lines.append(f"  {variant.profile:<28} {numbers['values'][variant.profile]:.4f}{shown}")
    spread = numbers["spread"]
    lines += [f"  spread        {spread['min']:.4f} to {spread['max']:.4f} (sd {spread['sd']:.4f}); "
              f"{spread['questions_that_flip']} questions right under some variants, wrong under others",
              f"  page          {out / STUDY_PAGE}",
              "  next          audit (every variant's rows rescored): "
              + command_line("audit", *audit_words(args, out))]
    print(terminal(lines))
    return 0


def audit_study(args, folder: Path, level_lines) -> int:
    """Every variant's run audited as any run, then the study level; one verdict first and last."""
    record = formats.read_versioned(folder / STUDY_FILE, StudyRecord)
    lock = args.reviewer_lock
    study = study_level.check(folder, record, lock)
    rescore = 0 if args.structural else ("all" if args.rescore is None else args.rescore)
    policy = Policy(rescore, not args.arithmetic_only, args.accept_old_schema, args.seed)
    sections, members = [], {}
    for variant in record.variants:
        run_folder = folder / variant.profile
        if variant.profile not in lock.profiles or variant.run != variant.profile or not run_folder.is_dir():
            continue  # the study level names it; a folder the lock does not name is never opened
        run = load_run(run_folder, lock)
        outcome = members[variant.profile] = run_levels(run, cache_for(args.cache, variant.profile), policy)
        sections += [f"--- variant {variant.profile}: {outcome.verdict()}"]
        sections += level_lines(run_folder, run, outcome)[1:-1]
    result = GroupOutcome(members, study, len(record.variants), True, "study")
    verdict = result.verdict()
    lines = [verdict, f"audit of study {record.run_name} in {folder}: {len(record.variants)} variants of task "
             f"{record.task}, base {record.variants[0].profile if record.variants else None}"]
    show_verdict(lines + study.lines() + sections + [verdict], result, folder)
    return result.exit_code
