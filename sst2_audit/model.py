"""Loading the verified model snapshot with the pinned settings (callers hash it first)."""

from pathlib import Path


def load(model_dir: Path, settings: dict) -> tuple:
    """(model, tokenizer): local files only, safetensors only, the lock's dtype and attention."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(
        str(model_dir), dtype=getattr(torch, settings["dtype"]), attn_implementation=settings["attention"],
        local_files_only=True, use_safetensors=True,
    ).eval()
    return model, tokenizer
