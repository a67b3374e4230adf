"""The numeric bootstrap: pin the CPU numeric mode before torch is imported, and report what torch used.

float32 scores depend on the instruction set the kernels dispatch to: ATen's vectorized
kernels (ATEN_CPU_CAPABILITY) and MKL's sgemm (MKL_CBWR) both pick a code path per CPU.
Measured (README, "Numeric platform"): with the lock's mode, ATEN_CPU_CAPABILITY=avx2,
MKL_CBWR=AVX2, an AVX-512 machine reproduces an AVX2-only machine's 128 scores bit for bit
at the same speed. oneDNN is pinned too although no op on the scoring path reaches it
(ONEDNN_VERBOSE logged no primitive), so a later torch that routes a matmul there stays pinned.

Both variables are read once, when torch first dispatches / MKL initialises, so the
mode must be in the environment before `import torch`. Every entry point calls
activate() with the lock's mode before anything imports torch.
"""

import functools
import os
import sys
from collections.abc import Mapping

from sst2_audit.util.errors import InternalError

# What each variable must make torch report (torch.backends.cpu.get_cpu_capability()).
CAPABILITY_OF = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}
MODE_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def activate(mode: dict) -> None:
    """Put the lock's numeric mode into the environment; refuse if torch already runs in another."""
    wanted = {name: str(value) for name, value in mode.items()}
    if "torch" in sys.modules:
        differing = {name: (os.environ.get(name), value) for name, value in wanted.items()
                     if os.environ.get(name) != value}
        if differing:  # too late to change: the kernels have been chosen
            raise InternalError(f"torch was imported before the numeric mode was set; differing variables "
                                f"(now, wanted): {differing}.")
        return
    os.environ.update(wanted)


def _cpuinfo() -> dict:
    """The first processor block of /proc/cpuinfo (empty where there is none)."""
    info: dict = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    if info:
                        break
                    continue
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def _config_line(config: str, marker: str) -> str | None:
    return next((line.strip(" -") for line in config.splitlines() if marker in line), None)


def _libraries(config: str) -> tuple:
    """(BLAS, oneDNN) as short names with versions, from torch.__config__.show()."""
    import re

    mkl = re.search(r"Math Kernel Library Version (\S+?)-Product Build (\d+)", config)
    blas = f"MKL {mkl.group(1)} (build {mkl.group(2)})" if mkl else _config_line(config, "BLAS_INFO")
    dnn = re.search(r"MKL-DNN v(\S+)", config)
    return blas, (f"oneDNN {dnn.group(1)}" if dnn else None)


# The probe's shapes are the embedded model's own (SmolLM2-135M: hidden 576, MLP 1536, vocabulary 49152)
# at a context length the tasks reach, so it runs the sgemm and log_softmax kernels the scores run.
# A smaller probe (37x576 @ 576x1531) gave one digest for two MKL paths that gave different scores.
PROBE_SHAPE = {"tokens": 61, "hidden": 576, "mlp": 1536, "vocabulary": 49152}
PROBE_THREADS = 1  # computed at a known thread count, whatever the process runs at


@functools.cache
def probe_digest() -> str:
    """sha256 of a fixed float32 forward shaped like the model's (MLP, LM head, log_softmax), at one
    thread: a machine that runs a numeric mode gives that mode's digest, on any CPU. Once per process: the mode is
    fixed when torch first dispatches, and the probe's random operands cost 0.2 s (many adoptions in one process)."""
    import hashlib

    import torch

    shape = PROBE_SHAPE
    generator = torch.Generator().manual_seed(94)
    hidden = torch.randn(shape["tokens"], shape["hidden"], generator=generator)
    up = torch.randn(shape["hidden"], shape["mlp"], generator=generator) / shape["hidden"] ** 0.5
    down = torch.randn(shape["mlp"], shape["hidden"], generator=generator) / shape["mlp"] ** 0.5
    head = torch.randn(shape["hidden"], shape["vocabulary"], generator=generator) / shape["hidden"] ** 0.5
    threads = torch.get_num_threads()
    torch.set_num_threads(PROBE_THREADS)
    try:
        with torch.inference_mode():
            mixed = hidden + torch.nn.functional.silu(hidden @ up) @ down
            mixed = mixed * torch.rsqrt(mixed.pow(2).mean(-1, keepdim=True) + 1e-5)  # RMSNorm, as the model's
            out = torch.log_softmax(mixed @ head, dim=-1)
    finally:
        torch.set_num_threads(threads)
    return hashlib.sha256(out.numpy().tobytes()).hexdigest()


def fingerprint(mode: dict, threads: int) -> dict:
    """The numeric platform: CPU, ISA flags, what torch dispatched to, BLAS, threads, the mode."""
    import torch

    cpu = _cpuinfo()
    blas, onednn = _libraries(torch.__config__.show())
    capability = torch.backends.cpu.get_cpu_capability()
    expected = CAPABILITY_OF.get(str(mode.get("ATEN_CPU_CAPABILITY", "")).lower())
    pinned = expected is not None and capability == expected
    native = not mode  # {}: the CPU's own mode, nothing to be in effect
    return {
        "cpu_vendor": cpu.get("vendor_id"),
        "cpu_model_name": cpu.get("model name"),
        "cpu_family": cpu.get("cpu family"),
        "cpu_model": cpu.get("model"),
        "isa_flags": _isa_flags(cpu),
        "torch": torch.__version__,
        "torch_cpu_capability": capability,
        "blas": blas,
        "onednn": onednn,
        "threads": threads,
        "mode": {name: os.environ.get(name) for name in sorted(set(MODE_VARIABLES) | set(mode))},
        "mode_in_effect": native or (pinned and all(os.environ.get(name) == str(value) for name,
                                                    value in mode.items())),
        "probe_sha256": probe_digest(),
    }


def unscored_platform(threads: int) -> dict:
    """The platform of a command that scored nothing here (a structural adoption): the CPU's facts only. torch is
    not imported for it (a tokenizer needs none: about 0.45 GB of memory and 1.6 s less), and no float32 bits were
    made here for a record to be held to."""
    cpu = _cpuinfo()
    return {"cpu_vendor": cpu.get("vendor_id"), "cpu_model_name": cpu.get("model name"),
            "cpu_family": cpu.get("cpu family"), "cpu_model": cpu.get("model"), "isa_flags": _isa_flags(cpu),
            "threads": threads, "scored": "nothing: no model was loaded here"}


_CORES = None  # --threads N: the cores a command may use, instead of all it may run on


def use_cores(count: int | None) -> None:
    """--threads N (every command): the cores the scoring paths share, for a machine that is also doing other work."""
    global _CORES
    _CORES = count


def threads_for(settings: dict, paths: int = 1) -> int:
    """torch's intra-op threads for one of `paths` concurrent scoring paths. The lock's `threads` 0 means
    the cores this process may run on (or --threads N), shared between the paths: in the strict mode scores were
    measured invariant to the thread count (README, "Numeric platform"), so the count is information, not a key."""
    if settings["threads"]:
        return settings["threads"]
    cores = _CORES
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return max(1, cores // paths)


def mode_words(mode: dict) -> str:
    return " ".join(f"{name}={value}" for name, value in sorted(mode.items())) or "native (nothing set)"


def runs_the_mode(settings: dict, here: dict) -> tuple:
    """(bits required, why in words), decided on the reviewer's side only: this process runs the lock's
    numeric mode when its own probe gives the digest the lock pins for that mode. A lock that pins no
    digest (older locks) falls back to the mode's variables and capability being in effect."""
    pinned = settings.get("numeric_probe_sha256")
    if not settings["numeric_mode"]:
        return False, "the lock pins the CPU's native mode, which differs between CPUs"
    if pinned is None:
        return here["mode_in_effect"], ("the lock pins no probe digest; the mode's variables are " +
                                        ("in effect" if here["mode_in_effect"] else "NOT in effect") + " here")
    if here["probe_sha256"] == pinned:
        return True, f"this machine runs the lock's numeric mode (its probe gives the pinned digest {pinned[:12]})"
    return False, (f"this machine's probe {here['probe_sha256'][:12]} differs from the lock's pinned digest "
                   f"{pinned[:12]}: it cannot run the lock's numeric mode")


# The fields that decide the float32 bits; CPU model and flags explain, but do not decide, them. Threads
# left the key with the strict mode (measured invariant at 1 and 2 threads; README, "Numeric platform").
NUMERIC_KEY_FIELDS = ("torch", "torch_cpu_capability", "blas", "onednn", "mode")


def numeric_key(platform: Mapping | None) -> dict | None:
    if not platform:
        return None
    return {name: platform.get(name) for name in NUMERIC_KEY_FIELDS}


def same_platform(a: Mapping | None, b: Mapping | None) -> bool:
    """Both recorded and with the same numeric key: their scores must be identical bit for bit."""
    return numeric_key(a) is not None and numeric_key(a) == numeric_key(b)


def numpy_exp(isa_flags: dict | None) -> str:
    """Which float64 exp numpy runs on a CPU with these flags: its own SIMD exp where AVX-512F is, libm's
    elsewhere. They may differ in the last bit, so a value lm-eval's hook derived with np.exp (mc2) is
    re-derived bit for bit only where both machines run the same one."""
    return "numpy's AVX-512F exp" if (isa_flags or {}).get("avx512f") else "libm's exp"


def _isa_flags(cpu: dict) -> dict:
    flags = set(cpu.get("flags", "").split())
    return {flag: flag in flags for flag in ISA_FLAGS}


def here_flags() -> dict:
    """This machine's ISA flags, as fingerprint() records them (without importing torch)."""
    return _isa_flags(_cpuinfo())


def one_line(platform: Mapping | None) -> str:
    """The fingerprint as the card and the console show it."""
    if not platform:
        return "not recorded (a run made before the numeric platform was recorded)"
    isa = ",".join(flag for flag in ISA_FLAGS if platform["isa_flags"].get(flag)) or "none"
    mode = " ".join(f"{k}={v}" for k, v in platform["mode"].items() if v is not None) or "native"
    state = "in effect" if platform["mode_in_effect"] else "NOT in effect"
    return (f"{platform['cpu_vendor']} {platform['cpu_model_name']} (family {platform['cpu_family']}, "
            f"model {platform['cpu_model']}; {isa}); torch {platform['torch']} capability "
            f"{platform['torch_cpu_capability']}; {platform['blas']}, {platform['onednn']}; "
            f"{platform['threads']} thread(s); mode {mode} ({state}); probe {platform['probe_sha256'][:12]}")
