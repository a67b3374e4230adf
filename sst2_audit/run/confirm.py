"""run --confirm PREREG: score the sealed confirmation rows of each profile a pre-registration names, once.

The caller (cli/confirm.py) has verified the pre-registration against the lock and audited its dev runs.
Here: one ticket per profile is claimed in that profile's cache before any row is scored (a second attempt
is refused, naming the first; an interrupted confirmation still counts, its rows may have reached the
model), the pre-registration and the dev runs' public records are copied into the confirmation folder (so
the chain travels with it), each profile's confirmation rows are scored as any run (both paths, identity,
agreement), and confirmation.json states the rule's outcome. Layout:

    <out>/preregistration.json   <out>/dev/<profile>/...   <out>/confirm/<profile>/...
    <out>/CONFIRMATION.md        <out>/confirmation.json (last: its presence means complete)
"""

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from sst2_audit.formats import prereg as formats
from sst2_audit.formats import records
from sst2_audit.protocol.decision import outcome, outcome_line
from sst2_audit.run import job as run_job
from sst2_audit.task.spec import spec_for
from sst2_audit.util import atomic
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import sha256_file, sha256_text
from sst2_audit.util.progress import say
from sst2_audit.util.sanitize import markdown_cell

TICKETS = "confirmations"  # inside a profile's cache: <sha256 of the pre-registration>.json, one per confirmation


def ticket_path(cache: Path, prereg_sha256: str) -> Path:
    return Path(cache) / TICKETS / f"{prereg_sha256}.json"


def require_unclaimed(caches: dict, prereg_sha256: str) -> None:
    """A pre-registration confirmed before from these caches is refused at once, naming the first confirmation."""
    taken = [(profile, ticket_path(cache, prereg_sha256)) for profile, cache in caches.items()
             if ticket_path(cache, prereg_sha256).exists()]
    if taken:
        profile, path = taken[0]
        try:
            first = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            first = {}
        raise CheckFailed(
            f"pre-registration {prereg_sha256[:12]} was already confirmed for profile {profile}: run "
            f"{first.get('run_name')!r} in {first.get('out')!r}, started {first.get('started')} (ticket {path}). "
            "A pre-registration is confirmed at most once; an interrupted confirmation counts too, since its rows "
            "may have reached the model. Write a new pre-registration for a new decision.")


def sealed_ticket_path(cache: Path, lock_sha256: str, profile: str) -> Path:
    """The ticket of a profile's sealed rows under one lock (the lock fixes the data, the split and so the sealed
    ids): every confirmation of them from this cache, under any pre-registration, is listed in it."""
    return Path(cache) / TICKETS / f"sealed-{sha256_text(lock_sha256 + '|' + profile)}.json"


def prior_confirmations(caches: dict, lock_sha256: str) -> dict:
    """profile -> the confirmations of its sealed rows this cache recorded before (a list, oldest first)."""
    found = {}
    for profile, cache in caches.items():
        path = sealed_ticket_path(cache, lock_sha256, profile)
        if path.exists():
            try:
                listed = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                listed = [{"note": f"unreadable ticket {path}"}]
            found[profile] = listed if isinstance(listed, list) else [listed]
    return found


def require_sealed_unspent(caches: dict, lock_sha256: str, reconfirm: bool) -> dict:
    """The sealed rows of each profile are confirmed once per lock: a second confirmation under any pre-registration
    is refused (exit 2) unless the reviewer asks for it (--reconfirm), and then counted. {profile: times before}."""
    prior = prior_confirmations(caches, lock_sha256)
    if prior and not reconfirm:
        profile, listed = next(iter(prior.items()))
        first = listed[0]
        raise InputError(
            f"the sealed rows of profile {profile} under this lock were confirmed {len(listed)} time(s) before from "
            f"this cache (first: run {first.get('run_name')!r}, pre-registration "
            f"{str(first.get('preregistration_sha256'))[:12]}, started {first.get('started')}). Each confirmation "
            "of the same sealed rows is another try at the same test (ten tries at alpha 0.05 hold by chance with "
            "probability 0.40): refused. --reconfirm runs it anyway and labels it with the count.")
    return {profile: len(listed) for profile, listed in prior.items()}


def claim_tickets(caches: dict, prereg_sha256: str, run_name: str, out: Path, lock_sha256: str = "") -> None:
    """Every profile's ticket, or none: a ticket already there is refused before anything is written. The sealed
    rows' ticket of each profile gets this confirmation appended."""
    require_unclaimed(caches, prereg_sha256)
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    for profile, cache in caches.items():
        if lock_sha256:
            sealed = sealed_ticket_path(cache, lock_sha256, profile)
            sealed.parent.mkdir(exist_ok=True)
            listed = prior_confirmations({profile: cache}, lock_sha256).get(profile, [])
            entry = {"preregistration_sha256": prereg_sha256, "run_name": run_name, "out": str(out),
                     "started": started}
            atomic.write_text(sealed, json.dumps(listed + [entry], indent=2), overwrite=True)  # appended, whole
    for profile, cache in caches.items():
        path = ticket_path(cache, prereg_sha256)
        path.parent.mkdir(exist_ok=True)
        ticket = {"preregistration_sha256": prereg_sha256, "profile": profile, "run_name": run_name,
                  "out": str(out), "started": started}
        try:  # O_EXCL: two confirmations started at once cannot both claim it
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise CheckFailed(f"pre-registration {prereg_sha256[:12]}: another confirmation claimed profile "
                              f"{profile}'s ticket {path} just now.") from None
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            json.dump(ticket, handle, indent=2)


def _copy_public(source: Path, target: Path) -> None:
    """A dev run's public records, regular files only (never a link), into the confirmation folder."""
    target.mkdir(parents=True)
    for item in sorted(Path(source).iterdir()):
        if item.is_file() and not item.is_symlink():
            shutil.copyfile(item, target / item.name)


def confirmation_record(lock, prereg_sha256: str, rule, out: Path, run_name: str, power: dict | None = None,
                        before: dict | None = None) -> formats.ConfirmationRecord:
    """confirmation.json from the confirmation runs in `out`: each cited by sha256, the rule evaluated on them."""
    runs, members = {}, []
    for profile in rule.profiles:
        run_file = Path(out) / formats.CONFIRM_FOLDER / profile / records.RUN_FILE
        record = runs[profile] = records.read(run_file, records.RunRecord)
        members.append(formats.ConfirmationRun(
            profile, f"{formats.CONFIRM_FOLDER}/{profile}", sha256_file(run_file), len(record.questions),
            record.summaries["official"][rule.metric].value, record.summaries["independent"][rule.metric].value))
    result = outcome(rule, runs)
    return formats.ConfirmationRecord(run_name, prereg_sha256, lock.sha256, rule.statement(), members, result,
                                      outcome_line(rule, result, power) + reconfirmed_words(before or {}),
                                      formats.CANNOT_KNOW, prior_confirmations=dict(before or {}))


def reconfirmed_words(before: dict) -> str:
    """What a confirmation of sealed rows confirmed before says of itself (--reconfirm), after its outcome."""
    return "".join(f"; the sealed rows of {profile} were confirmed {count} time(s) before from this cache"
                   for profile, count in before.items() if count)


def card(record: formats.ConfirmationRecord) -> str:
    """CONFIRMATION.md: a pure function of confirmation.json."""
    lines = [f"# Confirmation `{markdown_cell(record.run_name)}`", "",
             f"Pre-registration sha256 `{record.preregistration_sha256}`; lock sha256 `{record.lock_sha256}`.", "",
             f"**Decision rule:** {markdown_cell(record.statement)}.", "",
             f"**Outcome on the sealed confirmation rows:** {markdown_cell(record.outcome_line)}.", "",
             "| profile | rows | run.json sha256 | value (official / independent) |", "|---|---|---|---|"]
    lines += [f"| {markdown_cell(run.profile)} | {run.rows} | {run.run_sha256[:12]} | {run.value_official!r} / "
              f"{run.value_independent!r} |" for run in record.runs]
    return "\n".join(lines + ["", f"_{record.cannot_know}._"]) + "\n"


def confirm(lock, verified, out: Path, private: Path, run_name: str,
            reconfirm: bool = False) -> formats.ConfirmationRecord:
    """verified: audit.confirmation.Verified (the pre-registration's bytes, sha256, rule, caches, dev folders)."""
    prereg_sha256, rule, caches = verified.sha256, verified.rule, verified.caches
    if Path(out).exists():
        raise InputError(f"--out {out} already exists; a confirmation's folder is never overwritten.")
    for profile in rule.profiles:
        atomic.require_writable_folder(Path(caches[profile]) / TICKETS, f"the ticket folder of profile {profile}")
    before = require_sealed_unspent(caches, lock.sha256, reconfirm)
    claim_tickets(caches, prereg_sha256, run_name, out, lock.sha256)  # before any row is scored
    Path(out).mkdir(parents=True)
    atomic.write_bytes(Path(out) / formats.PREREG_FILE, verified.data)  # the bytes whose sha256 was claimed
    for profile, folder in verified.dev_folders.items():
        _copy_public(folder, Path(out) / formats.DEV_FOLDER / profile)
    for number, profile in enumerate(rule.profiles, start=1):
        say(f"[confirmation {number}/{len(rule.profiles)}: profile {profile}, its {lock.split.confirm_rows} sealed "
            "confirmation rows]")
        options = run_job.RunOptions(lock, lock.profile(profile), caches[profile],
                                     Path(out) / formats.CONFIRM_FOLDER / profile, Path(private) / profile,
                                     f"{run_name}-{profile}", spec_for(lock, lock.profile(profile).task),
                                     confirmation=prereg_sha256)
        run_job.execute(options)
    record = confirmation_record(lock, prereg_sha256, rule, out, run_name, verified.power, before)
    atomic.write_text(Path(out) / formats.CONFIRMATION_CARD, card(record))
    formats.write(Path(out) / formats.CONFIRMATION_FILE, record)  # last: its presence means complete
    return record
