"""The one reading of lm-eval's task YAMLs: confined to the installed package, verified before parsed, safe.

lm-eval's own loader (lm_eval.utils.load_yaml_config) parses with PyYAML's full loader, which builds
Python objects from tags (`!!python/object/apply:os.system`), and resolves a relative `include:` in
the working directory before the including file's folder. A lock can come from someone else and a
working directory can hold planted files, so no YAML reaches that loader: every task and group YAML
is read here (the official path gets the merged config, official.task_config, and an index of its one task read
from no YAML, official.task_index), with

- paths confined: a lock's evaluator path is relative, POSIX, under `lm_eval/`, with no `..`, `.`,
  empty, absolute, drive, backslash or URL part (`safe_relative`), and no symlink on the way from the
  package's folder to the file (`confined`);
- bytes verified before parsing: with the lock's pins, each file's bytes are hashed and compared with
  its pin, then parsed from those same bytes (an unpinned include is refused before it is parsed);
- a safe loader: PyYAML's SafeLoader (libyaml's when present) with `!function` kept as the YAML node,
  as lm-eval's "simple" mode keeps it; any other tag is refused;
- includes resolved beside the including file only, merged as lm-eval merges them (the last include
  first, the including file's own keys last).
"""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import yaml

from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.formats.fields import safe_relative

MAX_YAML_BYTES = 1 << 20  # the largest installed task YAML is far smaller
MAX_INCLUDE_DEPTH = 16


def confined(root: Path, relative: str, where: str) -> Path:
    """root/relative after checking that no component from root down is a symlink (a link could point
    anywhere: the file read must be the package's own)."""
    safe_relative(relative, where)
    path = Path(root)
    for part in PurePosixPath(relative).parts:
        path = path / part
        if path.is_symlink():
            raise InputError(f"{where}: {relative}: {path} is a symbolic link; the evaluator's files must be the "
                             "installed package's own.")
    return path


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]  # libyaml's when built
    """PyYAML's safe loader with `!function` kept as its node (a class of our own: the global loaders
    lm-eval registers its constructors on are never touched)."""

_Loader.add_constructor("!function", lambda loader, node: node)


def parse(data: bytes, where: str):
    try:
        return yaml.load(data, Loader=_Loader)
    except yaml.YAMLError as error:
        first_line = str(error).splitlines()[0][:160]
        raise InputError(f"{where}: not a YAML task config this tool reads ({first_line}).") from None


@dataclass
class Reading:
    """What one task or group YAML read gave: lm-eval's merged config and every file read, in order."""
    config: dict
    files: list = field(default_factory=list)  # paths relative to the package root: the YAML first, then includes
    data: dict = field(default_factory=dict)  # relative path -> the bytes parsed (verified when pins were given)
    widest_include: int = 0  # the most files one `include:` names (lm-eval 0.4.13 merges several in reverse order)


def read(root: Path, relative: str, pins: dict | None = None, where: str = "task YAML") -> Reading:
    """The merged config of the YAML at root/relative. With pins ({relative path: sha256}, the lock's
    evaluator.files), every file must be pinned and its bytes equal to the pin before it is parsed."""
    reading = Reading({})
    reading.config = _read(Path(root), relative, pins, where, reading, 0)
    return reading


def _bytes(root: Path, relative: str, pins: dict | None, where: str) -> bytes:
    path = confined(root, relative, where)
    if pins is not None and relative not in pins:
        raise InputError(f"{where} reads {relative}, which evaluator.files does not pin.")
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_YAML_BYTES + 1)
    except OSError as error:
        raise InputError(f"{where}: {relative} is not installed under {root} ({error.strerror}).") from None
    if len(data) > MAX_YAML_BYTES:
        raise InputError(f"{where}: {relative} is larger than {MAX_YAML_BYTES} bytes; not a task YAML.")
    if pins is not None and hashlib.sha256(data).hexdigest() != pins[relative]:
        raise CheckFailed(f"the installed lm-eval under {root} is not the pinned one: {relative}: expected sha256 "
                          f"{pins[relative]}, got {hashlib.sha256(data).hexdigest()}.")
    return data


def _read(root: Path, relative: str, pins, where: str, reading: Reading, depth: int) -> dict:
    if depth > MAX_INCLUDE_DEPTH:
        raise InputError(f"{where}: includes nest deeper than {MAX_INCLUDE_DEPTH} files (at {relative}).")
    data = _bytes(root, relative, pins, where)
    reading.files.append(relative)
    reading.data[relative] = data
    config = parse(data, f"{where}: {relative}")
    if not isinstance(config, dict) or "include" not in config:
        return config
    includes = config.pop("include")
    includes = [includes] if isinstance(includes, str) else includes
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise InputError(f"{where}: {relative}: include must be a file name or a list of them.")
    paths = [_beside(relative, include, where) for include in includes]
    reading.widest_include = max(reading.widest_include, len(paths))
    merged = {}
    # lm-eval's order: the includes read depth first in the order written; merged from the last one
    # first, so an earlier include wins over a later one, and the file's own keys over both
    loaded = [_read(root, path, pins, where, reading, depth + 1) for path in paths]
    for included in reversed(loaded):
        if isinstance(included, dict):
            merged.update(included)
    merged.update(config)
    return merged


def _beside(relative: str, include: str, where: str) -> str:
    """The include's path relative to the package root: beside the including file, never the working
    directory, and still inside the package."""
    if include.startswith("/") or "\\" in include or ":" in include:
        raise InputError(f"{where}: {relative}: include {include[:120]!r} is not a file name beside it.")
    parts = list(PurePosixPath(relative).parent.parts)
    for part in include.split("/"):
        if part == "..":
            if len(parts) <= 1:
                raise InputError(f"{where}: {relative}: include {include[:120]!r} leaves the lm_eval package.")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return safe_relative("/".join(parts), f"{where}: {relative}: include")
