"""Explain the difference between two runs: settings, resources, and changed predictions."""

from ..drift import judge
from ..numeric import one_line, same_platform
from ..protocol import predict


def _differences(label: str, a: dict, b: dict) -> list:
    return [f"{label} {key}: {a.get(key)!r} -> {b.get(key)!r}" for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def _name(run, choice: int) -> str:
    """A choice by its text when the task fixes the choices, else by its number."""
    spec = run.task_spec()
    names = spec.choice_names(choice + 1) if spec is not None else ()
    return names[choice] if 0 <= choice < len(names) else f"choice {choice}"


def compare(a, b) -> list:
    ra, rb = a.record, b.record
    if ra is None or rb is None:
        missing = a if ra is None else b
        return [f"{missing.path}: no run record (the run stopped on its {missing.failure.check} check); nothing to compare"]
    lines = [f"A: {ra.run_name} (task {ra.task}, profile {ra.profile}, {ra.mode}); "
             f"B: {rb.run_name} (task {rb.task}, profile {rb.profile}, {rb.mode})"]
    if ra.task != rb.task:
        lines.append(f"task: {ra.task} -> {rb.task}: different questions; nothing else to compare")
        return lines
    lines += _differences("setting", ra.settings, rb.settings)
    lines += _differences("evaluator", ra.evaluator, rb.evaluator)
    lines += _differences("resource", {r["path"]: r["sha256"] for r in ra.resources},
                          {r["path"]: r["sha256"] for r in rb.resources})
    if ra.lock_sha256 != rb.lock_sha256:
        lines.append(f"lock sha256: {ra.lock_sha256} -> {rb.lock_sha256}")
    same = same_platform(ra.platform, rb.platform)
    if not same:
        lines.append(f"numeric platform A: {one_line(ra.platform)}")
        lines.append(f"numeric platform B: {one_line(rb.platform)}")
    qa = {q.idx: q for q in ra.questions}
    qb = {q.idx: q for q in rb.questions}
    changed = [idx for idx in qa if idx in qb and qa[idx].official_prediction != qb[idx].official_prediction]
    for idx in changed:
        lines.append(f"question idx {idx}: prediction {_name(a, qa[idx].official_prediction)} -> "
                     f"{_name(b, qb[idx].official_prediction)} (label {_name(a, qa[idx].label)})")
    moved = sum(1 for idx in qa if idx in qb and qa[idx].official_scores != qb[idx].official_scores)
    verdict = judge({idx: (qa[idx].official_scores, qb[idx].official_scores) for idx in qa if idx in qb},
                    same, predict)
    only_a, only_b = sorted(set(qa) - set(qb)), sorted(set(qb) - set(qa))
    if only_a or only_b:
        lines.append(f"questions only in A: {only_a}; only in B: {only_b}")
    lines.append(f"accuracy: {ra.official.accuracy:.4f} -> {rb.official.accuracy:.4f}; "
                 f"{len(changed)} prediction(s) changed, {moved} question(s) with different scores")
    lines.append(verdict.line())
    return lines
