"""Loading the verified model snapshot with the pinned settings (callers hash it first)."""

import json
import math
from pathlib import Path

from sst2_audit.util.errors import InputError

# transformers' lazy modules import a submodule on first attribute access; two threads importing at once can
# meet a half-initialised module (it shipped once: "cannot import name 'GGUF_CONFIG_MAPPING' from
# 'transformers.integrations'", the rescore thread loading the model while the identity level loaded the
# tokenizer). So no lock: every import a load needs happens in the main thread first (load_tokenizer, then
# import_model_code, audit/inputs.py), and a later load() in another thread imports nothing (a test holds it).


def load_tokenizer(model_dir: Path):
    """The tokenizer class AutoTokenizer would pick (tokenizer_config.json's `tokenizer_class`, its fast
    variant first), imported directly: AutoTokenizer's module pulls in transformers' model registry and
    generation code (scikit-learn among it, about 2 s) that a tokenizer does not need. A config that
    names no class goes through AutoTokenizer."""
    return tokenizer_class(model_dir).from_pretrained(str(model_dir), local_files_only=True)


def import_tokenizer_code(model_dir: Path) -> None:
    """Import what load_tokenizer imports, and nothing of a model (a structural audit loads none)."""
    try:
        tokenizer_class(model_dir)
    except InputError:
        pass  # load_tokenizer names the problem


def no_model_in_this_process() -> None:
    """A command that loads no model (a structural audit) tells transformers, before it is imported, not to
    import torch: its tokenizers do not need it (measured: 1.05 s instead of 2.6 s to a loaded tokenizer).
    A USE_TORCH the user set is kept."""
    import os
    import sys

    if "transformers" not in sys.modules:
        os.environ.setdefault("USE_TORCH", "0")
        # its import then advises, on the console, that no framework was found: true, and meant
        os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")


def tokenizer_class(model_dir: Path):
    import transformers

    where = Path(model_dir) / "tokenizer_config.json"
    try:
        config = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    if "auto_map" in config:  # code from the model's folder: never run (no trust_remote_code anywhere)
        raise InputError(f"{where}: auto_map names tokenizer code in the model's folder; sst2-audit never runs a "
                         "model's own code. Use a tokenizer class transformers ships.")
    named = config.get("tokenizer_class")
    klass = None
    if isinstance(named, str) and named.isidentifier():
        fast = named if named.endswith("Fast") else named + "Fast"
        klass = getattr(transformers, fast, None) or getattr(transformers, named, None)
        # a tokenizer class, nothing else: a model class named here would build a model (seconds, a GB)
        if klass is not None and not (isinstance(klass, type) and
                                      issubclass(klass, transformers.PreTrainedTokenizerBase)):
            raise InputError(f"{where}: tokenizer_class {named[:80]!r} is not a tokenizer class of transformers.")
    if klass is None:
        from transformers import AutoTokenizer as klass
    return klass


def import_model_code(model_dir: Path) -> None:
    """Import what loading this model imports (AutoModelForCausalLM, the class config.json's `architectures`
    names, when transformers has it), so the load itself imports nothing and may run in another thread."""
    import transformers

    transformers.AutoModelForCausalLM  # noqa: B018 - the lazy attribute's import is the work

    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the load names the problem
    names = config.get("architectures") if isinstance(config, dict) else None
    for name in names if isinstance(names, list) else []:
        if isinstance(name, str) and name.isidentifier():
            try:
                getattr(transformers, name, None)  # the lazy module imports the class's module
            except Exception:  # noqa: BLE001 - a class that cannot be imported: the load names the problem
                pass


def load(model_dir: Path, settings: dict, tokenizer=None) -> tuple:
    """(model, tokenizer): local files only, safetensors only, the lock's dtype and attention; a tokenizer
    already loaded from model_dir (the run's pre-flight) is handed on, not loaded again."""
    import torch

    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(model_dir)
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=getattr(torch, settings["dtype"]), attn_implementation=settings["attention"],
        local_files_only=True, use_safetensors=True,
    ).eval()
    return model, tokenizer


# What a scoring process holds at its peak besides the weights, measured (docs/measurements.md, "Memory at peak"):
# the libraries (torch, transformers, lm-eval, datasets) and, for each scoring path that runs at once, a number of
# float32 copies of its longest input's logits (the logits, their log-softmax, the slice gathered, what the
# allocator keeps): fitted on the embedded SmolLM2-135M's `run --smoke` at 26-1,402 tokens, eager attention, to the
# smallest largest error (15 % of the median peak; single runs at 975 tokens vary 2.37-3.03 GB, as the two paths'
# peaks meet or not). Eager attention's (heads x tokens^2) matrices live one layer at a time, before the logits: the
# larger of the two is taken.
BESIDES_WEIGHTS = 0.626e9
LOGIT_COPIES = 3.3
ATTENTION_COPIES = 2  # the scores and the probabilities of one layer, float32
MAX_HEADER = 100 << 20  # a safetensors header: the tensors' names, dtypes and shapes


def parameters(model_dir: Path) -> int:
    """The number of parameters in the model's safetensors files, from their headers (nothing is loaded)."""
    count = 0
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with open(path, "rb") as handle:
            size = int.from_bytes(handle.read(8), "little")
            if not 0 < size <= MAX_HEADER:
                raise InputError(f"{path}: not a safetensors file (a header of {size} bytes).")
            header = json.loads(handle.read(size))
        count += sum(math.prod(int(length) for length in tensor["shape"])
                     for name, tensor in header.items() if name != "__metadata__")
    return count


def _shape(model_dir: Path) -> tuple:
    """(vocabulary size, attention heads) from config.json (verified with the model's files before this is read)."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    config = config if isinstance(config, dict) else {}
    vocab, heads = config.get("vocab_size"), config.get("num_attention_heads")
    return (vocab if type(vocab) is int and vocab > 0 else 0), (heads if type(heads) is int and heads > 0 else 0)


def activations(model_dir: Path, tokens: int, attention: str) -> tuple:
    """(bytes, words): what one scoring path adds at its peak for an input of `tokens` tokens."""
    vocab, heads = _shape(model_dir)
    logits = LOGIT_COPIES * tokens * vocab * 4
    scores = ATTENTION_COPIES * heads * tokens * tokens * 4 if attention == "eager" else 0
    if scores > logits:
        return scores, f"{ATTENTION_COPIES} x {heads} heads x {tokens}^2 tokens x 4 B (eager attention)"
    return logits, f"{LOGIT_COPIES} x {tokens} tokens x {vocab:,} x 4 B (logits)"


def memory_statement(model_dir: Path, settings: dict, available: int | None, processes: int = 1,
                     tokens: int = 0, paths: int = 1) -> str:
    """The peak memory a load in the lock's dtype will take, stated before it starts (each of `processes` on this
    machine loads its own copy) for the longest input (`tokens`: context and continuation) on `paths` scoring paths
    at once (a run: the official and the independent); a model that cannot fit the memory this machine has available
    is refused with the arithmetic (exit 2), before anything is loaded."""
    count = parameters(model_dir)
    width = {"float32": 4, "bfloat16": 2, "float16": 2}.get(settings["dtype"], 4)
    added, how = activations(model_dir, tokens, settings.get("attention", "eager")) if tokens else (0, "")
    need = (count * width + BESIDES_WEIGHTS + paths * added) * processes
    each = (f"{count / 1e6:,.1f} M parameters x {width} B ({settings['dtype']}) + {BESIDES_WEIGHTS / 1e9:.2f} GB"
            + (f" + {paths} x {how}" if tokens else ""))  # one console line: at most about 130 characters
    words = f"about {need / 1e9:.2f} GB at peak: " + (
        f"{processes} processes on this machine x ({each})" if processes > 1 else each)
    if available is not None and need > available:
        raise InputError(f"{model_dir}: the model needs {words} of libraries and activations (one copy of the weights "
                         f"per process, which both paths share), but this machine has {available / 1e9:.2f} GB "
                         "available. The independent path computes in the lock's dtype with the whole model loaded: a "
                         "bfloat16 checkpoint under a float32 lock takes 4 bytes a parameter, not 2 (no layer-by-layer "
                         "upcast). Use a machine with more memory, or fewer processes on each machine.")
    return words + (f"; {available / 1e9:.1f} GB available" if available is not None else "")
