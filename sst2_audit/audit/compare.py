"""Explain the difference between two runs on the same rows: what differs in how they were made
(settings, pins, platform), which questions flipped each way, whether one is significantly better
(exact McNemar, Bonett-Price interval of the paired accuracy difference), and how far the scores moved."""

from dataclasses import dataclass, field

from sst2_audit.audit.loading import MAX_CANDIDATES
from sst2_audit.audit.verdict import compare_exit_code
from sst2_audit.pages.render import render
from sst2_audit.protocol.drift import DIFFERENT, DRIFT, IDENTICAL, judge
from sst2_audit.protocol.metrics import METRICS
from sst2_audit.protocol.numeric import one_line, same_platform
from sst2_audit.protocol.rules import predict
from sst2_audit.protocol.stats import paired_difference, PairedComparison
from sst2_audit.util.errors import InputError


@dataclass
class Comparison:
    header: str
    sources: tuple = ()  # (A, B): the bundle files or run folders as the reviewer named them
    differences: list = field(default_factory=list)  # (what, A, B)
    flips_to_wrong: list = field(default_factory=list)  # idx right in A, wrong in B
    flips_to_right: list = field(default_factory=list)  # idx wrong in A, right in B
    changed: list = field(default_factory=list)  # (idx, prediction A, prediction B, gold)
    paired: PairedComparison | None = None
    summary: list = field(default_factory=list)  # further lines
    verdict: str | None = None  # drift.IDENTICAL, DRIFT or DIFFERENT: the exit code follows it
    verdict_line: str = ""  # the verdict with its basis: first and last on the page and the console
    notices: list = field(default_factory=list)  # each demo run's notice, shown first on the page
    probes: tuple = ()  # (A, B): each run's numeric probe digest, which decides bits or drift

    @property
    def style(self) -> str:
        """The page's box for the verdict: pass (identical), amber (drift within the bound), fail (different)."""
        return {IDENTICAL: "pass", DRIFT: "demo"}.get(self.verdict or DIFFERENT, "fail")

    def as_json(self) -> dict:
        """`audit --compare --format json` (docs/formats.md): the verdict in its words, each changed prediction."""
        paired = None if self.paired is None else {
            "rows": self.paired.rows, "a_only": self.paired.a_only, "b_only": self.paired.b_only,
            "difference": self.paired.difference, "mcnemar_p": self.paired.p_value}
        return {"verdict": (self.verdict or DIFFERENT).upper(), "line": f"comparison {self.verdict_line}",
                "exit_code": compare_exit_code(self.verdict), "levels": [], "limits": [],
                "sources": [str(source) for source in self.sources],
                "differences": [{"what": what, "a": str(a), "b": str(b)} for what, a, b in self.differences],
                "changed": [{"row": idx, "a": a, "b": b, "label": gold} for idx, a, b, gold in self.changed],
                "flips_to_wrong": list(self.flips_to_wrong), "flips_to_right": list(self.flips_to_right),
                "paired": paired}

    def lines(self) -> list:
        verdict = [f"comparison {self.verdict_line}"] if self.verdict_line else []  # first and last
        out = verdict + [f"{side}: {source}" for side, source in zip("AB", self.sources)] + [self.header]
        out += [f"{what}: {a} -> {b}" for what, a, b in self.differences]
        out += [f"question idx {idx}: prediction {a} -> {b} (label {gold})" for idx, a, b, gold in self.changed]
        if self.paired is not None:
            out.append(f"flips: right in A, wrong in B: {len(self.flips_to_wrong)} {self.flips_to_wrong}; "
                       f"wrong in A, right in B: {len(self.flips_to_right)} {self.flips_to_right}")
            out.append(self.paired.line())
        return out + self.summary + verdict


def _differences(label: str, a: dict, b: dict) -> list:
    return [(f"{label} {key}", repr(a.get(key)), repr(b.get(key)))
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]


def _name(run, choice: int) -> str:
    """A choice by its text when the task fixes the choices, else by its number."""

    spec = run.task_spec()
    if not 0 <= choice < MAX_CANDIDATES:  # a claimed prediction never sizes a list
        return f"choice {choice}"
    names = spec.choice_names(choice + 1) if spec is not None else ()
    return names[choice] if 0 <= choice < len(names) else f"choice {choice}"


def compare(a, b) -> Comparison:
    ra, rb = a.record, b.record
    if ra is None or rb is None:
        missing = a if ra is None else b
        return Comparison(f"{missing.path}: no run record (the run stopped on its {missing.failure.check} check); "
                          "nothing to compare")
    result = Comparison(f"A: {ra.run_name} (task {ra.task}, profile {ra.profile}, {ra.mode}); "
                        f"B: {rb.run_name} (task {rb.task}, profile {rb.profile}, {rb.mode})",
                        sources=(str(a.shown_as or a.path), str(b.shown_as or b.path)))
    if ra.task != rb.task:  # a paired comparison needs the same questions
        raise InputError(f"--compare: A is a run of task {ra.task}, B of task {rb.task}; a paired comparison needs "
                         "the same questions (runs of one task, over the same rows).")
    same = _setting_differences(ra, rb, result)
    qa, qb = {q.idx: q for q in ra.questions}, {q.idx: q for q in rb.questions}
    common = _paired(qa, qb, result)
    if ra.metrics != rb.metrics:
        raise InputError(f"--compare: A reports metrics {ra.metrics}, B {rb.metrics}; the same task reports the same.")
    metric = ra.metrics[0]  # the headline metric
    if not METRICS[metric].argmax:
        raise InputError(f"--compare: the task's headline metric {metric} gives each question a value, not a "
                         "prediction; --compare pairs predictions (acc, acc_norm) only.")
    pa, pb = ({idx: q.predictions["official"][metric] for idx, q in side.items()} for side in (qa, qb))
    for idx in common:
        if pa[idx] != pb[idx]:
            result.changed.append((idx, _name(a, pa[idx]), _name(b, pb[idx]), _name(a, qa[idx].label)))
    right_a = [pa[idx] == qa[idx].label for idx in common]
    right_b = [pb[idx] == qb[idx].label for idx in common]
    result.flips_to_wrong = [idx for idx, x, y in zip(common, right_a, right_b) if x and not y]
    result.flips_to_right = [idx for idx, x, y in zip(common, right_a, right_b) if y and not x]
    labels_differ = [idx for idx in common if qa[idx].label != qb[idx].label]
    if labels_differ:
        result.summary.append(f"gold labels differ on {len(labels_differ)} common question(s) {labels_differ[:10]}: "
                              "not the same data")
    if common:
        result.paired = paired_difference(right_a, right_b)
    only_a, only_b = sorted(set(qa) - set(qb)), sorted(set(qb) - set(qa))
    if only_a or only_b:
        result.summary.append(f"questions only in A: {only_a}; only in B: {only_b}")
    moved = sum(1 for idx in common if qa[idx].scores["official"] != qb[idx].scores["official"])
    paired_words = (f"over the {len(common)} paired questions {sum(right_a) / len(common):.4f} -> "
                    f"{sum(right_b) / len(common):.4f}" if common else "no paired questions")
    full = [side.summaries["official"][metric].value for side in (ra, rb)]
    result.summary.append(f"{metric}: {paired_words} (full runs, as recorded: {full[0]:.4f} over {len(qa)} -> "
                          f"{full[1]:.4f} over {len(qb)}); {len(result.changed)} prediction(s) changed, {moved} "
                          "question(s) with different scores")
    verdict = judge({idx: (qa[idx].scores["official"], qb[idx].scores["official"]) for idx in common}, same, predict)
    result.summary.append(verdict.line())
    result.verdict, result.verdict_line = verdict.verdict, verdict.words()
    result.notices = sorted({r.notice for r in (ra, rb) if r.demo and r.notice})
    result.probes = tuple((r.platform or {}).get("probe_sha256") or "not recorded" for r in (ra, rb))
    return result


def render_html(result: Comparison) -> str:
    """The comparison as a page (templates/compare.html.j2)."""

    return render("compare.html.j2", result=result)


def _setting_differences(ra, rb, result) -> bool:
    """Every setting, pin, version, lock and platform field that differs into result; whether the numeric platform
    is the same (bits required)."""
    result.differences += _differences("setting", ra.settings, rb.settings)
    result.differences += _differences("evaluator", ra.evaluator, rb.evaluator)
    result.differences += _differences("resource", {r.path: r.sha256 for r in ra.resources},
                                       {r.path: r.sha256 for r in rb.resources})
    result.differences += _differences("version", ra.versions, rb.versions)
    if ra.lock_sha256 != rb.lock_sha256:
        result.differences.append(("lock sha256", ra.lock_sha256, rb.lock_sha256))
    same = same_platform(ra.platform, rb.platform)
    if not same:
        result.differences.append(("numeric platform", one_line(ra.platform), one_line(rb.platform)))
    cpus = [(r.platform or {}).get("cpu_model_name") for r in (ra, rb)]
    if same and cpus[0] != cpus[1]:  # the same numeric key on another CPU: worth knowing, not a numeric difference
        result.differences.append(("CPU (same numeric platform key)", str(cpus[0]), str(cpus[1])))
    return same


def _paired(qa: dict, qb: dict, result) -> list:
    """The ids both runs scored with the same doc: paired by (idx, doc hash), since the same position holding another
    doc is not the same question (said in the summary)."""
    other_doc = [idx for idx in qa if idx in qb and qa[idx].doc_hash != qb[idx].doc_hash]
    if other_doc:
        result.summary.append(f"{len(other_doc)} question(s) hold another doc under the same idx {other_doc[:10]}: "
                              "not paired")
    return [idx for idx in qa if idx in qb and qa[idx].doc_hash == qb[idx].doc_hash]
