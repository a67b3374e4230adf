"""The floor of a command: the least any tool must do to give its answer, as one process.

    python benchmarks/floor.py WHAT CACHE [PROFILE]
      structural  Python, transformers' tokenizer class (imported directly, without torch), the cached data and
                  the model's files but its weights hashed (what a structural answer reads)
      passes N    Python, the imports the forward passes need (torch, transformers), the model loaded, and
                  one forward pass per candidate of the first N dev rows (the independent path's work)
      smoke       what a 2-row run through lm-eval must do at least: `passes 2` done twice (two paths)
                  plus importing lm_eval

No checks, no records, no lm-eval: what is left when every audit step is free. The lock's numeric
mode is set before torch is imported, as the commands do. `passes` runs at the threads the audit's
rescore takes (numeric.threads_for), or at FLOOR_THREADS when set (bench_verdict's 1-thread column).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sst2_audit.formats.lock import load_lock  # noqa: E402
from sst2_audit.protocol.numeric import activate, threads_for  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
what, cache = sys.argv[1], Path(sys.argv[2 if sys.argv[1] != "passes" else 3]).resolve()
rows_wanted, rounds = (int(sys.argv[2]), 1) if what == "passes" else (2, 2)
profile_name = sys.argv[4] if what == "passes" and len(sys.argv) > 4 else "embedded"
lock = load_lock(REPO / "resources.lock.json")
activate(lock.run_settings["numeric_mode"])

from sst2_audit.util.hashing import sha256_file  # noqa: E402
from sst2_audit.formats.manifest import read_manifest  # noqa: E402

manifest = read_manifest(cache)
if what == "structural":
    from sst2_audit.formats.manifest import is_weights
    from sst2_audit.scoring.model import load_tokenizer, no_model_in_this_process

    no_model_in_this_process()  # a structural answer loads no model: transformers without torch
    load_tokenizer(cache / "model")
    for entry in manifest.files:
        if entry.role != "download" and not is_weights(entry):  # weights no structural answer reads
            sha256_file(cache / entry.path)
elif what in ("passes", "smoke"):
    import torch

    if what == "smoke":
        import lm_eval  # noqa: F401 - what a run through lm-eval must import

    from sst2_audit.scoring.independent import IndependentScorer, encode_question
    from sst2_audit.scoring.model import load
    from sst2_audit.task.rows import verified_rows
    from sst2_audit.task.spec import spec_for

    profile = lock.profile(profile_name)
    spec = spec_for(lock, profile.task)
    settings = lock.settings_for(profile_name, spec)
    torch.set_num_threads(int(os.environ.get("FLOOR_THREADS") or threads_for(settings)))
    data = verified_rows(lock, profile, spec, cache, roles=(), manifest=manifest)
    model, tokenizer = load(cache / "model", settings)
    scorer = IndependentScorer(model, settings["max_length"])
    for idx in [i for i in data.split.dev_ids[:rows_wanted] for _ in range(rounds)]:
        doc = data.by_idx[idx].as_doc()
        scorer.score(idx, encode_question(tokenizer, spec.requests(doc, spec.prefix(doc)), idx,
                                          settings["max_length"], settings["add_bos_token"]))
else:
    sys.exit(f"unknown floor {what!r}")
