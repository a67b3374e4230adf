"""The lm-eval releases sst2-audit knows, each by the wheel the package registry publishes (its sha256 as the
registry's index states it, the hash pip checks). A lock pins exactly one release; a lock naming another
release, or this release with another wheel, is refused before anything is read from the evaluator.

Supported means: that release's SOURCE_MAP anchors every step of the official computation it audits and the
independent path re-derives it there; a release's `scope` names the task features it is supported for (the rest
is refused, exit 2). A known release that is not supported is refused with the reason.
"""

from dataclasses import dataclass

from sst2_audit.util.errors import InputError, InternalError


@dataclass(frozen=True)
class Release:
    version: str
    wheel: str  # the file name the registry publishes
    sha256: str  # the registry's published hash of that file
    supported: bool
    why_not: str = ""  # a known release the audit does not support: why, in words
    # where the release computes differently, as data the re-derivations read (SOURCE_MAP.md names the lines)
    task_config_module: str = "lm_eval/api/task.py"  # the file that declares TaskConfig's fields and defaults
    fills_fewshot_config: bool = False  # TaskConfig.__post_init__ fills fewshot_config from the task's fields
    # lm-eval's results of a samples= run: n-samples' "effective" counts the whole split (0.4.9.2) or the scored
    # documents (0.4.13); group_subtasks names a plain task with no subtasks (0.4.9.2) or leaves it out (0.4.13)
    n_samples_effective_is_scored: bool = False
    group_subtasks_names_plain_tasks: bool = True
    # what the audit re-derives under this release, in words, when it is less than every supported task feature
    # (task/spec.py::require_release_scope refuses the rest, exit 2); "" = everything docs/tasks.md lists
    scope: str = ""
    # the few-shot sampler (lm_eval/api/samplers.py): 0.4.9.2 drops a draw equal to the evaluated doc and may leave
    # a question one shot short; 0.4.13 drops it only when fewshot_split == test_split, resamples a short draw
    # from the pool without the doc (one more call on the shared generator), and first_n skips the doc too
    fewshot_resamples: bool = False
    source_map: str = "SOURCE_MAP.md"  # the release's map of the official computation (task/source_map.py)
    extra: str = "lm-eval-0492"  # pyproject.toml's optional dependency that installs this release
    # a group's aggregate_metric_list entry (lm_eval/api/group.py AggMetricConfig): weight_by_size when the YAML
    # leaves it out (False in 0.4.9.2, True in 0.4.13), and the stderr of an unweighted mean: pooled_sample_stderr
    # (0.4.9.2) or unweighted_mean_stderr, sqrt(sum of squares) / k (0.4.13's Group.aggregate)
    group_weight_by_size_default: bool = False
    group_unweighted_stderr: str = "pooled"  # "pooled" | "unweighted-mean"
    # what a plain CLI run's logged config lacks or gains through 0.4.13's task factory (tasks/_factory.py):
    # _build_task pops the structural keys before the task is built, _load_full_config adds metadata.config_source
    # (the YAML's path or "inline"); adopt takes the official value for an absent structural key and labels the
    # added metadata key a claim (SOURCE_MAP-0.4.13.md step 71)
    factory_structural_keys: tuple = ()
    typed_model_args: bool = False  # handle_arg_string also reads quotes, None and signed integers (0.4.13)
    factory_metadata_keys: tuple = ()
    # a chat prompt's system message: the system instruction and the task's description joined by the few-shot
    # delimiter always (0.4.9.2's fewshot_context), or only when neither has whitespace at the join (0.4.13's
    # maybe_delimit); a multi-turn shot with an empty answer logs an empty assistant turn (0.4.9.2) or none (0.4.13)
    builds_qa_turns: bool = False
    cli_multiturn_by_default: bool = False  # the lm_eval CLI's fewshot_as_multiturn with --apply_chat_template


RELEASES = {
    "0.4.9.2": Release("0.4.9.2", "lm_eval-0.4.9.2-py3-none-any.whl",
                       "b8d12410ab9c6321c9e26a9fb7e13a4e1b920ed4907905804dc2e231b7482a6e", True),
    "0.4.13": Release("0.4.13", "lm_eval-0.4.13-py3-none-any.whl",
                      "5daaa1973bf874005f64f28d3834b875f6886f0d6475878e6a6c821994a5286a", True,
                      scope="tasks and groups (hooks as pinned shared code; every supported metric) without "
                            "fewshot_config keys other than its sampler and literal samples, or YAMLs that include "
                            "several files at once: its few-shot overrides and include order are not re-derived yet "
                            "(SOURCE_MAP-0.4.13.md)",
                      group_weight_by_size_default=True, group_unweighted_stderr="unweighted-mean",
                      fewshot_resamples=True, source_map="SOURCE_MAP-0.4.13.md", extra="lm-eval-0413",
                      task_config_module="lm_eval/config/task.py", fills_fewshot_config=True,
                      n_samples_effective_is_scored=True, group_subtasks_names_plain_tasks=False,
                      factory_structural_keys=("tag", "group", "task_list"),
                      factory_metadata_keys=("config_source",), typed_model_args=True,
                      builds_qa_turns=True, cli_multiturn_by_default=True),
}
SUPPORTED = tuple(version for version, release in RELEASES.items() if release.supported)


def supported_words() -> str:
    return ", ".join(f"lm-eval {version}" for version in SUPPORTED)


def extras_words() -> str:
    """The tool's extras that install each supported release (pyproject.toml)."""
    return " or ".join(RELEASES[version].extra for version in SUPPORTED)


def release_for(evaluator: dict, where: str) -> Release:
    """The release a lock's evaluator pins, refused unless it is supported and pinned by its published wheel."""
    version = evaluator.get("version")
    release = RELEASES.get(version) if isinstance(version, str) else None
    if release is None:
        raise InputError(f"{where}: evaluator.version {str(version)[:40]!r} is not an lm-eval release sst2-audit "
                         f"knows; it supports {supported_words()}.")
    if not release.supported:
        raise InputError(f"{where}: evaluator.version {version}: sst2-audit does not support this lm-eval release yet: "
                         f"{release.why_not}. It supports {supported_words()}.")
    wheel = evaluator.get("wheel")
    if wheel is not None and (not isinstance(wheel, dict) or wheel.get("name") != release.wheel
                              or wheel.get("sha256") != release.sha256):
        shown = {k: str(v)[:80] for k, v in wheel.items()} if isinstance(wheel, dict) else str(wheel)[:80]
        raise InputError(f"{where}: evaluator.wheel: expected lm-eval {version}'s published wheel {release.wheel} "
                         f"(sha256 {release.sha256}), got {shown!r}.")
    return release


def scope_reason(version: str, *, fewshot_keys=(), includes: int = 0) -> str | None:
    """The task features the release is not supported for, in words, or None (a release without a scope: None)."""
    if not release_of(version).scope:
        return None
    other = set(fewshot_keys) - {"sampler", "samples"}  # a literal list of shots (BBH's) is within every scope
    beyond = ([f"fewshot_config {', '.join(sorted(other))}"] if other else []) + \
        ([f"a YAML including {includes} files at once (merged in another order)"] if includes > 1 else [])
    return "; ".join(beyond) or None


def require_release_scope(version: str, where: str, *, task: str, fewshot_keys=(), includes: int = 0) -> None:
    """A task feature the release is not supported for is refused naming it and the release's scope (exit 2)."""
    beyond = scope_reason(version, fewshot_keys=fewshot_keys, includes=includes)
    if beyond:
        raise InputError(f"{where}: {task} has {beyond}; under lm-eval {version} sst2-audit audits "
                         f"{release_of(version).scope}. Use a lock of lm-eval "
                         f"{', '.join(v for v in SUPPORTED if v != version)} for it.")


def release_of(version: str | None) -> Release:
    """The known release `version` (a lock's, already refused by release_for when unknown; the installed one,
    verified equal to the lock's before it is asked for)."""
    if version not in RELEASES:
        raise InternalError(f"lm-eval {version!r} is not a release this tool knows; it was not refused before")
    return RELEASES[version]


def installed_version() -> str | None:
    """The installed lm-eval's version from its metadata (nothing imported); None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


def install_words(version: str) -> str:
    """How to install the release `version` into this environment."""
    release = RELEASES.get(version)
    return (f"pip install 'sst2-audit[{release.extra}]', or from a clone pip install -e '.[{release.extra}]'"
            if release else f"pip install lm-eval=={version}")


def require_installed(version: str, what: str) -> None:
    """The installed lm-eval must be the release `what` (a lock, a record) names: else a refusal naming both,
    exit 2, before any pinned file is hashed (a FAIL would say the evaluator was tampered with)."""
    here = installed_version()
    if here is None:
        raise InputError(f"{what} names lm-eval {version}, but this environment holds no lm-eval: the evaluator "
                         f"is the lock's choice, installed beside sst2-audit ({install_words(version)}; sst2-audit "
                         f"supports {supported_words()}).")
    if here != version:
        raise InputError(f"{what} names lm-eval {version}, but this environment holds lm-eval {here}; audit and run "
                         f"with the release the lock pins ({install_words(version)}; sst2-audit supports "
                         f"{supported_words()}).")
