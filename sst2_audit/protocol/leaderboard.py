"""The Open LLM Leaderboard v2's normalised score (issue 62), by the rule its documentation states
(huggingface.co/docs/leaderboards/open_llm_leaderboard/normalization): a multiple_choice task's number less its
random baseline (1 / its choices), over 1 less that baseline, times 100, and 0 below the baseline. BBH and MuSR
average their subtasks' normalised scores; GPQA normalises its group's number (lm-eval's leaderboard_gpqa group: the
subtasks' acc_norm weighted by size); MMLU-Pro its one task's. The leaderboard's benchmarks that decode (IFEval, MATH
Lvl 5) are not normalised here. The results files hold no normalised score: this is the number the leaderboard's
table shows, derived from the submitter's numbers and from the reviewer's."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    name: str
    prefix: str  # its tasks' names start so (MMLU-Pro: the one task's name)
    metric: str  # the number the leaderboard shows
    by_group: bool  # GPQA: its group's number normalised; else each subtask normalised, then averaged


BENCHMARKS = (Benchmark("BBH", "leaderboard_bbh_", "acc_norm", False),
              Benchmark("MuSR", "leaderboard_musr_", "acc_norm", False),
              Benchmark("GPQA", "leaderboard_gpqa_", "acc_norm", True),
              Benchmark("MMLU-Pro", "leaderboard_mmlu_pro", "acc", False))


def benchmark_of(task: str) -> Benchmark | None:
    return next((b for b in BENCHMARKS if task == b.prefix or b.prefix.endswith("_") and task.startswith(b.prefix)),
                None)


def normalised(value: float, choices: int) -> float:
    """The leaderboard's normalised score of one number: 0 below the random baseline 1 / choices, else the share of
    the way from it to 1, in percent."""
    baseline = 1 / choices
    return 0.0 if value < baseline else (value - baseline) / (1 - baseline) * 100


def benchmark_score(benchmark: Benchmark, members: list) -> float:
    """A benchmark's normalised score from its subtasks' (value, choices, rows): the group's size-weighted number
    normalised (GPQA: every subtask has 4 choices), or the mean of each subtask's normalised score."""
    if benchmark.by_group:
        value = sum(v * rows for v, _, rows in members) / sum(rows for _, _, rows in members)
        return normalised(value, members[0][1])
    return sum(normalised(v, choices) for v, choices, _ in members) / len(members)
