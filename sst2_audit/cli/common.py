"""What the three commands share: exit codes, the parser, the lock and profile a command names.
Each command's options and steps are in its own module (cli/prepare, cli/run, cli/audit); cli/__init__.py
runs one with the exit-code contract.

0: all checks passed; 1: a check failed; 2: bad usage or unreadable input; 3: our own bug
(a short message; the traceback only with --debug).
"""

import argparse
import sys
from pathlib import Path

from sst2_audit.audit.loading import load_run
from sst2_audit.audit.runner import Policy, run_levels
from sst2_audit.audit.verdict import verdict_object
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.releases import installed_version
from sst2_audit.formats.manifest import read_manifest
from sst2_audit.protocol.numeric import activate, use_cores
from sst2_audit.task.spec import require_data_for, spec_for
from sst2_audit.util import console
from sst2_audit.util.commands import command_line, DEFAULT_LOCK, lock_words
from sst2_audit.util.errors import EXIT_LIMITED, EXIT_WORDS, InputError, InternalError
from sst2_audit.util.sanitize import terminal
from sst2_audit.util.suggest import did_you_mean



EXIT_CODES = "exit codes: " + "; ".join(f"{code} {words}" for code, words in EXIT_WORDS.items()
                                       if code != EXIT_LIMITED)  # prepare.py and run.py: no exit 4
AUDIT_EXIT_CODES = ("exit codes: " + "; ".join(f"{code} {words.removeprefix('audit.py only: ')}"
                                               for code, words in EXIT_WORDS.items())
                    + ". --compare: 0 identical, 4 within the drift bound only, 1 different.")


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):  # no prefixes: `--smok` is an error, not --smoke
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, allow_abbrev=False, **kwargs)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        threads = getattr(parsed, "threads", None)
        if threads is not None and threads < 1:
            raise InputError(f"{self.prog}: --threads: expected a number of cores >= 1, got {threads}.")
        use_cores(threads)  # before anything sizes torch's threads
        return parsed

    def error(self, message):  # bad usage: exit 2 through the same path as every input error
        self.print_usage(sys.stderr)
        if message.startswith("unrecognized arguments: "):
            message += "".join(did_you_mean(word.split("=")[0], self._option_string_actions).replace(
                " (did you mean", f" ({word}: did you mean") for word in message.split()[2:] if word.startswith("--"))
        raise InputError(f"{self.prog}: {message}")


def common(parser):
    parser.add_argument("--debug", action="store_true", help="print the traceback of an error")
    parser.add_argument("--lock", type=Path, default=DEFAULT_LOCK, help="lock file (default: resources.lock.json)")
    parser.add_argument("--cache", type=Path, default=Path("cache"), help="cache folder (default: ./cache)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="the cores the scoring may use (default: every core this process may run on; a lock "
                             "that pins threads keeps its own)")


def with_format(parser):
    """run, audit, adopt: the verdict as the console's words or as one JSON object (cli/__init__.py routes it)."""
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: print one machine-readable verdict object on stdout and everything else on "
                             "stderr (its schema: docs/formats.md, \"A verdict as JSON\")")


def show_verdict(lines: list, outcome, subject, numbers: list | None = None, **more) -> None:
    """A verdict as the console's lines, or, under --format json, as the one verdict object (`more`: extra fields)."""
    command = console.json_command()
    if command:
        console.emit_verdict({**verdict_object(command, subject, outcome, numbers), **more})
    else:
        print(terminal(lines, verdicts=(outcome.verdict(),)))


def with_profile(parser):
    """prepare and run name a profile of the lock; audit takes it from the run record."""
    common(parser)
    parser.add_argument("--profile", help="profile of the lock (default: the one the cache was prepared for; "
                                           "required for a new cache unless the lock has one profile)")


def audit_words(args, out: Path) -> list:
    """`--out OUT` and the command's own lock and cache as the user gave them, the defaults left out: the audit
    of what a command wrote, as it must be typed."""
    words = ["--out", out, *lock_words(args.lock)]
    return words + (["--cache", args.cache] if Path(args.cache).resolve() != Path("cache").resolve() else [])


def lock_and_profile(args, lock=None) -> tuple:
    """The profile named, else the one the cache's manifest names, else the lock's only profile (`lock`: the lock
    the command already read, in its numeric mode)."""
    if lock is None:
        lock = load_lock(args.lock)
        numeric_mode(lock)
    name = args.profile
    if name is None:
        manifest = read_manifest(args.cache)
        if manifest is not None:
            name = manifest.profile
        elif len(lock.profiles) == 1:
            name = next(iter(lock.profiles))
        else:
            prepare = command_line("prepare", *lock_words(args.lock), "--profile", "NAME", "--cache", args.cache)
            raise InputError(f"--profile is missing: {args.cache} is not prepared yet, so no profile can be taken "
                             f"from it. Name one of the profiles of {args.lock} ({', '.join(sorted(lock.profiles))}); "
                             f"a new cache is prepared before any run: {prepare}")
    shipped = None if name in lock.profiles else _shipped_lock_with(name, args.lock)
    if shipped is not None:
        raise InputError(f"{args.lock}: unknown profile {name!r}; this lock defines {', '.join(sorted(lock.profiles))}."
                         f" Profile {name!r} is in the shipped lock {shipped.name}: add --lock {shipped}.")
    return lock, lock.profile(name)


def _shipped_lock_with(name: str, given: Path) -> Path | None:
    """The lock shipped beside the default one that defines profile `name` (demos.lock.json for the demo
    profiles), for a message only: nothing is read from it but its profile names."""
    import json

    found = []
    for path in sorted(DEFAULT_LOCK.parent.glob("*.lock.json")):
        if path.resolve() == Path(given).resolve():
            continue
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if name in raw["profiles"]:
                found.append((raw["evaluator"]["version"] != installed_version(), path))  # this release's first
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return min(found)[1] if found else None


def numeric_mode(lock) -> None:
    """The lock's CPU numeric mode, set before anything imports torch (sst2_audit/protocol/numeric.py)."""

    activate(lock.run_settings["numeric_mode"])


def spec_for_run(lock, profile, task: str | None):
    """The profile's data is for one task; --task must name it (and say which profile would fit otherwise)."""

    if task is not None and task != profile.task:
        fitting = sorted(name for name, p in lock.profiles.items() if p.task == task)
        hint = (f"profiles with data for {task}: {', '.join(fitting)}" if fitting
                else f"no profile of {lock.path.name} has data for {task}")
        raise InputError(f"--task {task}: profile {profile.name} holds data for task {profile.task}; {hint}.")
    spec = spec_for(lock, profile.task)
    require_data_for(spec, profile)
    return spec


def auditable(out: Path, lock, cache: Path, confirmation: str | None = None) -> None:
    """A run that passed is auditable by construction (issue 29): the audit's record levels (lock, claims,
    arithmetic; nothing loaded, no model) check the records just written against the same lock. A finding
    there means the run and the audit hold different rules: our bug, exit 3, the records kept for the report."""
    outcome = run_levels(load_run(out, lock), cache, Policy(rescore=0, identity=False, confirmation=confirmation))
    if outcome.failed:
        findings = "; ".join(f"{level.name}: {problem}" for level in outcome.levels for problem in level.problems[:3])
        raise InternalError(f"the run wrote {out}, but the audit's record levels refuse it ({findings[:600]}). "
                            "The run and the audit disagree on a rule: please report this with the run folder.")
