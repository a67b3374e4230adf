"""The lm-eval releases sst2-audit knows, each by the wheel the package registry publishes (its sha256 as the
registry's index states it, the hash pip checks). A lock pins exactly one release; a lock naming another
release, or this release with another wheel, is refused before anything is read from the evaluator.

Supported means: SOURCE_MAP.md anchors every step of the official computation in that release and the
independent path re-derives it there. A known release that is not supported is refused with the reason.
"""

from dataclasses import dataclass

from sst2_audit.util.errors import InputError


@dataclass(frozen=True)
class Release:
    version: str
    wheel: str  # the file name the registry publishes
    sha256: str  # the registry's published hash of that file
    supported: bool
    why_not: str = ""  # a known release the audit does not support: why, in words


RELEASES = {
    "0.4.9.2": Release("0.4.9.2", "lm_eval-0.4.9.2-py3-none-any.whl",
                       "b8d12410ab9c6321c9e26a9fb7e13a4e1b920ed4907905804dc2e231b7482a6e", True),
    "0.4.13": Release("0.4.13", "lm_eval-0.4.13-py3-none-any.whl",
                      "5daaa1973bf874005f64f28d3834b875f6886f0d6475878e6a6c821994a5286a", False,
                      "its evaluator, few-shot sampler and task code differ from 0.4.9.2's in about 3,000 lines that "
                      "SOURCE_MAP.md does not anchor yet, so the independent path does not re-derive them (issue 32)"),
}
SUPPORTED = tuple(version for version, release in RELEASES.items() if release.supported)


def supported_words() -> str:
    return ", ".join(f"lm-eval {version}" for version in SUPPORTED)


def release_for(evaluator: dict, where: str) -> Release:
    """The release a lock's evaluator pins, refused unless it is supported and pinned by its published wheel."""
    version = evaluator.get("version")
    release = RELEASES.get(version)
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


def installed_version() -> str | None:
    """The installed lm-eval's version from its metadata (nothing imported); None when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version("lm-eval")
    except metadata.PackageNotFoundError:
        return None


def require_installed(version: str, what: str) -> None:
    """The installed lm-eval must be the release `what` (a lock, a record) names: else a refusal naming both,
    exit 2, before any pinned file is hashed (a FAIL would say the evaluator was tampered with)."""
    here = installed_version()
    if here is not None and here != version:
        raise InputError(f"{what} names lm-eval {version}, but this environment holds lm-eval {here}; audit and run "
                         f"with the release the lock pins (pip install lm-eval=={version}; sst2-audit supports "
                         f"{supported_words()}).")
