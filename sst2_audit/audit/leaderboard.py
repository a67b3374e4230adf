"""The Open LLM Leaderboard's normalised scores of adopted tasks (protocol/leaderboard.py's rule), printed under
the verdict beside the reviewer's numbers: each leaderboard multiple_choice task's, and in a run of many tasks each
benchmark's over the subtasks adopted. Theirs from the reported numbers, yours from your rescore."""

from sst2_audit.protocol.leaderboard import benchmark_of, benchmark_score, normalised


def _choices(adoption) -> int | None:
    """The task's choice count, where every row has the same (the leaderboard's baseline is per task)."""
    counts = {len(question.choice_lengths) for question in adoption.questions.values()}
    return counts.pop() if len(counts) == 1 else None


def _member(adoption, pairs: list) -> tuple | None:
    """(benchmark, choices, reported, rescored or None, rows) of a leaderboard multiple_choice task, else None."""
    benchmark = benchmark_of(adoption.spec.name)
    found = [(theirs, ours) for metric, theirs, ours, _ in pairs if benchmark and metric == benchmark.metric]
    choices = _choices(adoption) if found else None
    if benchmark is None or choices is None or choices < 2 or type(found[0][0]) is not float:
        return None
    return benchmark, choices, found[0][0], found[0][1], len(adoption.questions)


def _yours(value: float | None) -> str:
    return f"rescored {value:.2f} (yours)" if value is not None else "not rescored here"


def task_lines(adoption, pairs: list) -> list:
    """A leaderboard task's normalised score, theirs and yours (reviewer_pairs' pairs)."""
    found = _member(adoption, pairs)
    if found is None:
        return []
    benchmark, choices, theirs, ours, _ = found
    return [f"{adoption.spec.name} {benchmark.metric}, normalised as the Open LLM Leaderboard does (baseline "
            f"1/{choices}): reported {normalised(theirs, choices):.2f} (their scores) / "
            + _yours(None if ours is None else normalised(ours, choices))]


def run_lines(adoptions: dict) -> list:
    """Each leaderboard benchmark of a run of many tasks, over its adopted subtasks (BBH and MuSR: 2 or more; GPQA:
    its group's number from 1 or more): theirs, and yours where every one of them was rescored."""
    members: dict = {}
    for adoption in adoptions.values():
        found = _member(adoption, adoption.shape.reviewer_pairs(adoption)[1])
        if found is not None:
            members.setdefault(found[0], []).append(found)
    lines = []
    for benchmark, found in members.items():
        if not benchmark.by_group and len(found) < 2:
            continue  # one task: its own line says it
        theirs = benchmark_score(benchmark, [(reported, choices, rows) for _, choices, reported, _, rows in found])
        mine = [(ours, choices, rows) for _, choices, _, ours, rows in found]
        ours = benchmark_score(benchmark, mine) if all(value is not None for value, _, _ in mine) else None
        lines.append(f"{benchmark.name} {benchmark.metric}, the Open LLM Leaderboard's normalised score over the "
                     f"{len(found)} subtask(s) adopted: reported {theirs:.2f} (their scores) / " + _yours(ours))
    return lines
