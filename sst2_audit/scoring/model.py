"""Loading the verified model snapshot with the pinned settings (callers hash it first)."""

import json
import threading
from pathlib import Path

from sst2_audit.util.errors import InputError

# transformers' lazy modules import a submodule on first attribute access; two threads doing that at once
# can see a half-initialised module (seen in the audit, the rescore thread loading the model while the
# identity level loaded the tokenizer: "cannot import name 'GGUF_CONFIG_MAPPING' from
# 'transformers.integrations'"). Every load in this process goes through this lock.
_LOADING = threading.RLock()


def load_tokenizer(model_dir: Path):
    """The tokenizer class AutoTokenizer would pick (tokenizer_config.json's `tokenizer_class`, its fast
    variant first), imported directly: AutoTokenizer's module pulls in transformers' model registry and
    generation code (scikit-learn among it, about 2 s) that a tokenizer does not need. A config that
    names no class goes through AutoTokenizer."""
    with _LOADING:
        return _load_tokenizer(model_dir)


def _load_tokenizer(model_dir: Path):
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
    return klass.from_pretrained(str(model_dir), local_files_only=True)


def load(model_dir: Path, settings: dict, tokenizer=None) -> tuple:
    """(model, tokenizer): local files only, safetensors only, the lock's dtype and attention; a tokenizer
    already loaded from model_dir (the run's pre-flight) is handed on, not loaded again."""
    import torch

    with _LOADING:
        from transformers import AutoModelForCausalLM

        tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(model_dir)
        model = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=getattr(torch, settings["dtype"]), attn_implementation=settings["attention"],
            local_files_only=True, use_safetensors=True,
        ).eval()
    return model, tokenizer
