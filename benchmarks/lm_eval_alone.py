"""Baseline (a): lm-eval simple_evaluate alone on the same 64 dev rows, task, model and settings.

No hashing, no identity checks, no independent path: what scoring with lm-eval costs by itself.
Usage: python benchmarks/lm_eval_alone.py CACHE PROFILE [THREADS] [LOCK] [ROWS]
(default: the lock's threads, our lock, every dev row; ROWS: the first ROWS dev rows in hash order, as run.py --rows)
The lock's numeric mode is set before torch is imported, as run.py does.
"""

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_DATASETS_CACHE=tempfile.mkdtemp())

from sst2_audit.formats.lock import load_lock  # noqa: E402
from sst2_audit.protocol.numeric import activate, threads_for  # noqa: E402

lock = load_lock(sys.argv[4] if len(sys.argv) > 4 else Path(__file__).resolve().parent.parent / "resources.lock.json")
activate(lock.run_settings["numeric_mode"])

import lm_eval  # noqa: E402
import torch  # noqa: E402
from lm_eval.api.task import ConfigurableTask  # noqa: E402
from lm_eval.models.huggingface import HFLM  # noqa: E402

from sst2_audit.task.dataset import read_parquet  # noqa: E402
from sst2_audit.formats.fields import columns_of  # noqa: E402
from sst2_audit.scoring.official import task_config  # noqa: E402
from sst2_audit.task.split import make_split  # noqa: E402
from sst2_audit.task.spec import spec_for  # noqa: E402

cache, profile = Path(sys.argv[1]).resolve(), sys.argv[2]
spec = spec_for(lock, lock.profile(profile).task)
settings = lock.settings_for(profile, spec)  # the profile's shots, max_length and attention, as run.py uses
torch.set_num_threads(int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] != "-" else threads_for(settings, paths=2))
parquet = cache / "data" / f"{spec.eval_split}.parquet"
rows = spec.processed(read_parquet(parquet, columns=columns_of(lock.profile(profile).data)), parquet)
dev_ids = make_split([r.idx for r in rows], lock.split.salt, lock.split.dev_rows, lock.split.confirm_rows).scored(
    int(sys.argv[5]) if len(sys.argv) > 5 else None)
data_files = {s: str(cache / "data" / f"{s}.parquet") for s in spec.splits}
lm = HFLM(pretrained=str(cache / "model"), dtype=settings["dtype"], attn_implementation=settings["attention"],
          batch_size=settings["batch_size"], max_length=settings["max_length"], device=settings["device"],
          add_bos_token=settings["add_bos_token"])
out = lm_eval.simple_evaluate(model=lm, tasks=[ConfigurableTask(config=task_config(spec, data_files))],
                              num_fewshot=settings["num_fewshot"], samples={spec.name: sorted(dev_ids)}, log_samples=True,
                              random_seed=settings["seed"], numpy_random_seed=settings["seed"],
                              torch_random_seed=settings["seed"], fewshot_random_seed=settings["seed"],
                              # a chat profile's settings, as run.py hands them (the template: the model's own file)
                              apply_chat_template=settings.get("apply_chat_template", False),
                              system_instruction=settings.get("system_instruction"),
                              fewshot_as_multiturn=settings.get("fewshot_as_multiturn", False))
print("acc", out["results"][spec.name]["acc,none"])
