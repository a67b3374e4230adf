"""GGUF -> float32 safetensors snapshot with a tokenizer that behaves like SmolLM2's own.

transformers de-quantizes the Q4_1 GGUF to a float32 LlamaForCausalLM. Its
converted tokenizer is a LlamaTokenizerFast that prepends <|im_start|> to every
encode and calls it eos; lm-eval would silently score BOS+prompt with it. The
original SmolLM2 tokenizer is a byte-level BPE (GPT2TokenizerFast) that adds
nothing and ends turns with <|im_end|>, so that is what we write.
"""

import json
from pathlib import Path

from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.progress import phase

TOKENIZER_CONFIG = {
    "tokenizer_class": "GPT2TokenizerFast",
    "add_bos_token": False,
    "add_prefix_space": False,
    "bos_token": "<|im_start|>",
    "eos_token": "<|im_end|>",
    "unk_token": "<|endoftext|>",
    "pad_token": "<|im_end|>",
    "model_max_length": 8192,
    "clean_up_tokenization_spaces": False,
}
CHAT_TEMPLATE_FILE = "chat_template.jinja"  # the GGUF's tokenizer.chat_template; kept where a profile pins it
SNAPSHOT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                  "tokenizer_config.json", CHAT_TEMPLATE_FILE)
SNAPSHOT_VERSION = 2  # 2: the snapshot keeps the GGUF's chat template (a snapshot in the store is made again)


def _write_tokenizer(gguf: Path, out: Path) -> None:
    from tokenizers import decoders, processors
    from transformers import AutoTokenizer

    converted = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    backend = converted.backend_tokenizer
    backend.post_processor = processors.ByteLevel(trim_offsets=False)  # adds no special token
    backend.decoder = decoders.ByteLevel()
    backend.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2, sort_keys=True) + "\n")
    if isinstance(converted.chat_template, str):  # the model's own template, byte for byte as the GGUF holds it
        (out / CHAT_TEMPLATE_FILE).write_bytes(converted.chat_template.encode("utf-8"))


def check_tokenizer(folder: Path) -> None:
    """The converted tokenizer must behave like the original SmolLM2 tokenizer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    problems = []  # the converted files' bytes are then checked against the lock's sha256 pins
    if tokenizer.eos_token != "<|im_end|>":
        problems.append(f"eos expected '<|im_end|>', got {tokenizer.eos_token!r}")
    if tokenizer.encode("a") != tokenizer.encode("a", add_special_tokens=False):
        problems.append("encode() adds special tokens")
    if problems:
        raise CheckFailed(f"{folder}: converted tokenizer differs from SmolLM2's: " + "; ".join(problems) + ".")


def convert_gguf(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM


    out.mkdir(parents=True, exist_ok=True)
    with phase("convert GGUF to float32 snapshot (about 25 s)", announce=True):
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        try:
            model.save_pretrained(str(out), safe_serialization=True)
        except ValueError as error:  # transformers 5 keeps a GGUF model quantized and will not save it
            import transformers

            raise InputError(f"transformers {transformers.__version__} cannot write the float32 snapshot of "
                             f"{gguf.name} ({str(error)[:120]}); the tool pins transformers 4.57.6, which converts it "
                             "(docs/measurements.md, \"transformers 5\"). Nothing was written to the cache.") from None
        _write_tokenizer(gguf, out)
    for extra in out.iterdir():
        if extra.name not in SNAPSHOT_FILES:  # files the converter adds that no profile pins
            extra.unlink()
    check_tokenizer(out)
