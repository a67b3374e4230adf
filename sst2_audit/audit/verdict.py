"""The one verdict type: what an audit of a run, a group or a bundle verified, its exit code and its
VERDICT line, computed here only (exit codes: util/errors.py)."""

import re
from dataclasses import dataclass, field

from sst2_audit.audit.findings import LevelResult
from sst2_audit.protocol.drift import DIFFERENT, DRIFT, IDENTICAL
from sst2_audit.util.errors import EXIT_FAIL, EXIT_LIMITED, EXIT_PASS

VERDICT_KIND, VERDICT_SCHEMA = "sst2-audit/verdict", 1  # `--format json` (docs/formats.md, "A verdict as JSON")
_HEAD = re.compile(r"^VERDICT: ([A-Z][A-Z ,]*[A-Z])")


def compare_exit_code(verdict: str | None) -> int:
    """`audit.py --compare`: identical 0, platform drift within the bound 4, anything else (different) 1."""
    return {IDENTICAL: EXIT_PASS, DRIFT: EXIT_LIMITED}.get(verdict or DIFFERENT, EXIT_FAIL)


@dataclass
class Outcome:
    levels: list
    limits: list = field(default_factory=list)  # what this audit did not verify, in words
    scores_unverified: list = field(default_factory=list)  # rows not rescored (none, a sample)
    drift_only: bool = False  # rescored, equal within the drift bound but not bit for bit
    shared: list = field(default_factory=list)  # steps both paths ran as the task's pinned code, in words
    named: list = field(default_factory=list)  # what a PASS must say it accepted (another numeric mode)
    rescored_as: str = "rescored bit for bit"  # a generate_until task's rows are re-decoded token for token
    rows: list = field(default_factory=list)  # an adopted run's row set that matches no rule, in words (row_set.py)

    @property
    def failed(self) -> list:
        return [level.name for level in self.levels if level.skipped is None and not level.passed]

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_FAIL
        return EXIT_LIMITED if (self.limits or self.scores_unverified or self.drift_only or self.rows) else EXIT_PASS

    def verdict(self) -> str:
        if self.failed:
            return f"VERDICT: FAIL ({', '.join(self.failed)}); exit 1"
        # a task's hooks ran on both paths as the same pinned code: verified as pinned, not re-derived
        shared = [f"shared pinned code, not re-derived: {', '.join(self.shared)}"] if self.shared else []
        if self.exit_code == EXIT_PASS:
            return (f"VERDICT: PASS: every level passed and every scored row was {self.rescored_as}; "
                    + "".join(f"{note}; " for note in self.named + shared) + "exit 0")
        head = ("ROWS CHOSEN BY THE RUN, NOT RECOGNISED" if self.rows else
                "SCORES NOT VERIFIED" if self.scores_unverified else
                "SCORES WITHIN DRIFT, NOT BIT FOR BIT" if self.drift_only else "PASS WITH LIMITS")
        said = self.rows + self.scores_unverified + self.limits + self.named + shared
        return f"VERDICT: {head}: {'; '.join(said)}; exit 4"

    def as_json(self) -> dict:
        line = self.verdict()
        return {"verdict": head_of(line), "line": line, "exit_code": self.exit_code,
                "levels": [level.as_json() for level in self.levels], "limits": list(self.limits),
                "rows_not_rescored": list(self.scores_unverified), "drift_only": self.drift_only,
                "rows_chosen_by_the_run": list(self.rows), "accepted": list(self.named)}


@dataclass
class GroupOutcome:
    """A group's audit, or a confirmation's: every member run's Outcome (a subtask's; a profile's confirmation
    run), the record's own level (the group level; the confirmation chain), whether every member was audited."""
    members: dict  # member -> Outcome, in the record's order
    group: LevelResult
    expected: int  # the record's number of members
    rederived: bool  # the group's numbers were re-derived (a group with an official aggregate)
    kind: str = "group"  # or "confirmation", "study" (MEMBER_WORDS)
    cannot_know: str = ""  # a confirmation: what no audit can know, said in its verdict
    limits: list = field(default_factory=list)  # an adopted run: tasks no profile pins, groups not re-derived

    @property
    def failed(self) -> list:
        failed = [task for task, outcome in self.members.items() if outcome.exit_code not in (EXIT_PASS, EXIT_LIMITED)]
        if not self.group.passed or len(self.members) < self.expected:
            failed.append(self.group.name)  # the record's own level: "group", "confirmation chain", "study"
        return failed

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_FAIL
        limited = self.limits or any(o.exit_code == EXIT_LIMITED for o in self.members.values())
        return EXIT_LIMITED if limited else EXIT_PASS

    def verdict(self) -> str:
        code = self.exit_code
        if code == EXIT_FAIL:
            return f"VERDICT: FAIL ({', '.join(self.failed)}); exit 1"
        member, checked = MEMBER_WORDS[self.kind]
        done = ("passed with every scored row rescored bit for bit" if code == EXIT_PASS else
                f"found no problem but not everything was verified (see each {member})")
        if self.kind == "group":
            checked += ", its numbers re-derived" if self.rederived else ""
        if self.kind == "run":
            checked = " and the run's groups were re-aggregated from them" if self.rederived else ""
        return (f"VERDICT: {'PASS' if code == EXIT_PASS else 'SCORES NOT VERIFIED'}: every {member}'s audit {done}"
                f"{checked}" + "".join(f"; {limit}" for limit in self.limits)
                + (f"; {self.cannot_know}" if self.cannot_know else "") + f"; exit {code}")


    def as_json(self) -> dict:
        line = self.verdict()
        return {"verdict": head_of(line), "line": line, "exit_code": self.exit_code, "levels": [self.group.as_json()],
                "limits": list(self.limits), "members": {str(name): outcome.as_json()
                                                         for name, outcome in self.members.items()}}


def run_outcome(record) -> Outcome:
    """A finished run's verdict (a run that failed raised CheckFailed instead): both paths' scores and the logged
    identities, as the run checked them, in the one verdict type."""
    candidates = sum(len(question.scores["official"]) for question in record.questions)
    agreement = LevelResult("agreement (both paths' candidate scores, bit for bit)", checks=candidates)
    identity = LevelResult("identity (every logged sample against its row)", checks=record.identity_checks_passed)
    return Outcome([agreement, identity], rescored_as="scored on both paths bit for bit")


def run_numbers(record) -> list:
    """A run's numbers for its JSON verdict: per metric, lm-eval's path's and the independent path's."""
    return [{"task": record.task, "metric": metric, "reported": record.summaries["official"][metric].value,
             "rescored": record.summaries["independent"][metric].value,
             "rows": record.summaries["independent"][metric].rows, "whose": "the independent path"}
            for metric in record.metrics]


def head_of(line: str) -> str:
    """PASS, FAIL, SCORES NOT VERIFIED, ...: the words a VERDICT line leads with."""
    found = _HEAD.match(line)
    return found.group(1) if found else "ERROR"


def verdict_object(command: str, subject, outcome=None, numbers: list | None = None, error: str | None = None,
                   exit_code: int | None = None) -> dict:
    """The one machine-readable verdict a `--format json` command prints (its schema: docs/formats.md): an audit's
    Outcome or GroupOutcome, or the error that ended the command (exit 1, 2, 3, 130 or 143) with no levels."""
    body = outcome.as_json() if outcome is not None else {
        "verdict": "FAIL" if exit_code == EXIT_FAIL else "ERROR", "line": f"error: {error}", "exit_code": exit_code,
        "levels": [], "limits": []}
    return {"kind": VERDICT_KIND, "schema_version": VERDICT_SCHEMA, "command": command,
            "subject": None if subject is None else str(subject), **body, "numbers": list(numbers or []),
            "error": error}


# kind -> (what a member is, what was checked of the record itself), in the verdict's words
MEMBER_WORDS = {
    "group": ("subtask", " and the group record was checked"),
    "confirmation": ("confirmation run", ", the chain (confirmation, pre-registration, dev records, your lock) was "
                                         "checked and the decision rule re-evaluated"),
    "run": ("task", ""),
    "study": ("variant", ", the study record was checked and its numbers re-derived from the variants' records"),
}
