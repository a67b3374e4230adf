"""The Open LLM Leaderboard's normalised scores of adopted tasks (protocol/leaderboard.py's rule), printed under
the verdict beside the reviewer's numbers and in `--format json`'s numbers: each leaderboard multiple_choice task's,
and in a run of many tasks each benchmark's over the subtasks adopted. Theirs from the reported numbers, yours from
your rescore."""

from sst2_audit.protocol.leaderboard import benchmark_of, benchmark_score, normalised

NORMALISED = "normalised (Open LLM Leaderboard)"  # a number's metric words in --format json


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


def _number(name: str, metric: str, theirs: float, ours: float | None, rows: int) -> dict:
    return {"task": name, "metric": f"{metric} {NORMALISED}", "reported": theirs, "rescored": ours,
            "rows": rows if ours is not None else 0, "whose": "yours"}


def _task(adoption, pairs: list) -> list:
    """[(number, choices)] of a leaderboard task (reviewer_pairs' pairs), else []."""
    found = _member(adoption, pairs)
    if found is None:
        return []
    benchmark, choices, theirs, ours, rows = found
    return [(_number(adoption.spec.name, benchmark.metric, normalised(theirs, choices),
                     None if ours is None else normalised(ours, choices), rows), choices)]


def _run(adoptions: dict) -> list:
    """[(number, subtasks)] of each leaderboard benchmark of a run of many tasks, over its adopted subtasks (BBH and
    MuSR: 2 or more; GPQA: its group's number from 1 or more): theirs, and yours where every one was rescored.
    adoptions: task -> (adoption, its reviewer_pairs' pairs)."""
    members: dict = {}
    for adoption, pairs in adoptions.values():
        found = _member(adoption, pairs)
        if found is not None:
            members.setdefault(found[0], []).append(found)
    numbers = []
    for benchmark, found in members.items():
        if not benchmark.by_group and len(found) < 2:
            continue  # one task: its own number says it
        theirs = benchmark_score(benchmark, [(reported, choices, rows) for _, choices, reported, _, rows in found])
        mine = [(ours, choices, rows) for _, choices, _, ours, rows in found]
        ours = benchmark_score(benchmark, mine) if all(value is not None for value, _, _ in mine) else None
        numbers.append((_number(benchmark.name, benchmark.metric, theirs, ours, sum(r for *_, r in found)),
                        len(found)))
    return numbers


def _yours(value: float | None) -> str:
    return f"rescored {value:.2f} (yours)" if value is not None else "not rescored here"


def _metric(number: dict) -> str:
    return number["metric"].removesuffix(" " + NORMALISED)


def task_numbers(adoption, pairs: list) -> tuple[list, list]:
    """(console lines, --format json numbers) of a leaderboard task's normalised score, theirs and yours."""
    found = _task(adoption, pairs)
    return ([f"{n['task']} {_metric(n)}, normalised as the Open LLM Leaderboard does (baseline 1/{choices}): "
             f"reported {n['reported']:.2f} (their scores) / {_yours(n['rescored'])}" for n, choices in found],
            [n for n, _ in found])


def run_numbers(adoptions: dict) -> tuple[list, list]:
    """(console lines, --format json numbers) of each leaderboard benchmark of a run of many tasks; adoptions: task ->
    (adoption, its reviewer_pairs' pairs, computed once by the caller)."""
    found = _run(adoptions)
    return ([f"{n['task']} {_metric(n)}, the Open LLM Leaderboard's normalised score over the {subtasks} subtask(s) "
             f"adopted: reported {n['reported']:.2f} (their scores) / {_yours(n['rescored'])}"
             for n, subtasks in found], [n for n, _ in found])
