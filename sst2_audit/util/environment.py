"""Facts about the process: versions, threads, peak memory, and public-safe paths."""

import functools
import platform
import re
import resource
import sys
from importlib import metadata
from pathlib import Path

PACKAGES = ("torch", "transformers", "lm_eval", "datasets", "tokenizers", "pyarrow", "huggingface_hub", "numpy",
            "psutil", "gguf")


def versions() -> dict:
    return dict(_versions())


@functools.cache  # a process's installed packages do not change while it runs; each lookup parses their metadata
def _versions() -> dict:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name.replace("_", "-"))
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def peak_rss_bytes() -> int:
    """The kernel's high-water mark of this process's resident set (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def available_memory_bytes() -> int | None:
    """What the kernel says a new allocation may take (MemAvailable), or None where it does not say."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def snapshot() -> dict:
    """The run's environment for reviewers: versions, machine, every installed package."""
    import psutil

    # a set: run from a checkout, the editable install's egg-info in the checkout (on sys.path as the script's
    # folder) and its dist-info in the venv are one package found twice
    packages = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]})
    return {
        "versions": versions(),
        "machine": {"platform": platform.platform(), "processor": platform.machine(),
                    "logical_cpus": psutil.cpu_count(), "memory_total_bytes": psutil.virtual_memory().total},
        "installed_packages": packages,
    }


def scrub_paths(value, replacements: dict):
    """Replace machine-specific folders in every string (public records carry no local paths)."""
    if isinstance(value, str):
        # Longest first, so a cache inside the working folder keeps its own label; "/" alone is never replaced.
        for folder, label in sorted(replacements.items(), key=lambda item: -len(item[0])):
            if len(folder) > 1:
                value = value.replace(folder, label)
        return value
    if isinstance(value, dict):
        return {scrub_paths(k, replacements): scrub_paths(v, replacements) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_paths(v, replacements) for v in value]
    return value


# an absolute path where a field or an `a=b,c=d` argument starts: /..., ~/..., C:\... (a hub id such as
# org/model is not one)
_ABSOLUTE = re.compile(r"(?:(?<=^)|(?<=[=\s,'\"(\[]))(?:/|~/|[A-Za-z]:\\)[^\s,'\"()\]]*")


def scrub_absolute_paths(value):
    """Someone else's machine paths (an adopted lm-eval run's model and data folders) become `<path>`. A hook's
    source as lm-eval logs it in a task's config (a function's code) is kept: its string literals are not paths
    (wikitext's detokenizer holds `"/' [0-9]/"`), and the claims level compares it with the pinned hook's."""
    if isinstance(value, str):
        return value if value.startswith("def ") and "\n" in value else _ABSOLUTE.sub("<path>", value)
    if isinstance(value, dict):
        return {scrub_absolute_paths(k): scrub_absolute_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_absolute_paths(v) for v in value]
    return value
