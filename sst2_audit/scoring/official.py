"""The official path: lm_eval.simple_evaluate on the task's official config.

Only the data-loading fields of the installed, hash-verified YAML (includes merged by
lm-eval's own loader, see task/spec.py) are changed, so that the task reads the verified
cached parquet; the task keeps its name, prompt, choices, target, metrics and aggregation.
"""

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats.releases import installed_version, release_of
from sst2_audit.protocol.corpus import BOOTSTRAP_ITERS
from sst2_audit.task.config import data_config, differences
from sst2_audit.task.evaluator_pin import installed_root
from sst2_audit.task.hooks import rendered, stable


@dataclass
class OfficialOutput:
    results: dict  # lm-eval's results dict without "samples"
    samples: list  # lm-eval's logged samples, in the order it logged them
    effective_config: dict
    config_differences: dict
    lm: object  # the HFLM, whose _encode_pair the identity check uses


task_config = data_config  # the config the official path hands lm-eval (task/config.py)


def config_differences(spec, effective: dict, num_fewshot: int) -> dict:
    """The differences from the official YAML, with TaskConfig's defaults as lm-eval itself declares them
    (the audit rebuilds the same from the pinned source file without importing lm-eval)."""
    from lm_eval.api.task import TaskConfig

    defaults = {f.name: f.default for f in dataclasses.fields(TaskConfig) if f.default is not dataclasses.MISSING}
    # the installed release: verified equal to the lock's before anything ran (evaluator_pin.verify_pinned)
    return differences(spec, effective, num_fewshot, defaults, release_of(installed_version()))


def task_index(spec):
    """The TaskManager simple_evaluate gets: an index of the run's one task, built without reading a YAML.

    Given none, simple_evaluate builds TaskManager(), which reads every task YAML of the package (step 34): under
    0.4.9.2 with lm-eval's own loader, which looks a relative include up in the working directory first and builds
    Python objects from tags, so a file planted there ran code (H8); and it took 6.5 of simple_evaluate's 7.6 s
    on a smoke run. The run hands lm-eval a task object, so the index serves only the line that logs the task's
    YAML path (step 40), which 0.4.9.2 looks up by the task's name (H5): the index holds that one entry, the
    verified YAML, as lm-eval's own indexer records it.
    """
    from lm_eval.tasks import TaskManager

    path = installed_root() / spec.yaml_path

    class RunTaskIndex(TaskManager):
        def initialize_tasks(self, include_path=None, include_defaults=True):  # where 0.4.9.2 builds its index
            return {spec.name: {"type": "task", "yaml_path": str(path)}}

    manager = RunTaskIndex(include_defaults=False)  # 0.4.13 builds its index in __init__, from no folder here
    if spec.name not in manager.task_index:  # 0.4.13: the entry its TaskIndex.process_cfg records for a task
        from lm_eval.tasks._index import Entry, Kind

        manager.task_index[spec.name] = Entry(name=spec.name, kind=Kind.TASK, yaml_path=path)
    return manager


def run_official(model, tokenizer, settings: dict, spec, data_files: dict, dev_ids, *,
                 sort_ids: bool = True, shards=None) -> OfficialOutput | None:
    """Score dev_ids through simple_evaluate.

    lm-eval 0.4.9.2 pairs the k-th document (in dataset order) with the k-th
    entry of `samples`, so unsorted ids log wrong doc_ids (upstream #4084);
    we pass them sorted. sort_ids=False reproduces the bug on purpose.
    Under a launcher (shards.world > 1) lm-eval's own data-parallel path shares the documents (SOURCE_MAP step
    85): None in a process other than rank 0, where lm-eval gathers the samples and the metrics.
    """
    import lm_eval
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.huggingface import HFLM

    ids = sorted(dev_ids) if sort_ids else list(dev_ids)
    # A ConfigurableTask object with the task's own name, not include_path: 0.4.9.2's
    # pretty-printer crashes on task YAMLs outside the package.
    task = ConfigurableTask(config=task_config(spec, data_files, random_seed=settings["seed"]))
    lm = HFLM(
        pretrained=model, tokenizer=tokenizer, backend="causal", batch_size=settings["batch_size"],
        max_length=settings["max_length"], device=settings["device"],
        add_bos_token=settings["add_bos_token"],
    )
    if shards is not None and shards.world > 1:
        data_parallel(lm, shards)
    output = lm_eval.simple_evaluate(
        model=lm, tasks=[task], task_manager=task_index(spec), num_fewshot=settings["num_fewshot"],
        samples={task.config.task: ids}, log_samples=True, cache_requests=False, use_cache=None,
        # the profile's chat settings (task/chat.py; the protocol's plain prompts otherwise): lm-eval renders the
        # tokenizer's template, the pinned file the independent path rendered in its sandbox before this
        apply_chat_template=settings["apply_chat_template"], system_instruction=settings["system_instruction"],
        fewshot_as_multiturn=settings.get("fewshot_as_multiturn", False), random_seed=settings["seed"],
        numpy_random_seed=settings["seed"], torch_random_seed=settings["seed"], fewshot_random_seed=settings["seed"],
        bootstrap_iters=settings.get("bootstrap_iters", BOOTSTRAP_ITERS),  # f1 / mcc stderr; the default otherwise
    )
    if output is None:  # another process's share: rank 0 holds the gathered output
        return None
    samples = output.pop("samples")[task.config.task]
    if spec.hooks:  # a partial's logged str() holds a memory address (hooks.stable); a hook inherited by
        # 0.4.13's fewshot_config stays a function in the logged config: rendered as lm-eval's writer does
        output["configs"] = stable(rendered(output["configs"]))
    effective = output["configs"][task.config.task]
    differences = config_differences(spec, effective, settings["num_fewshot"])
    return OfficialOutput(output, samples, effective, differences, lm)


def data_parallel(lm, shards) -> None:
    """lm-eval's data-parallel evaluation on the processes a launcher started, for an HFLM given a loaded model
    (HFLM.__init__ then assumes one process, "or custom distributed integration"): the rank, the world and the
    Accelerator its evaluate() gathers with (evaluator.py: the requests' padding, the samples and the metrics at
    rank 0). HFLM's own launcher path sets the same three from accelerate, and only with a GPU per process
    (gpus > 1); the lock's device is the CPU, and accelerate sees the gloo processes with cpu=True. The global
    rank, not HFLM's local process index (which would repeat documents across machines)."""
    from accelerate import Accelerator

    lm._rank, lm._world_size = shards.rank, shards.world
    lm.accelerator = Accelerator(cpu=True)


def official_encode_pair(lm, context: str, continuation: str) -> tuple:
    """lm-eval's own context/continuation encoding, for the boundary check."""
    context_tokens, continuation_tokens = lm._encode_pair(context, continuation)
    return tuple(context_tokens), tuple(continuation_tokens)


def data_files_of(cache: Path, manifest, spec) -> dict:
    return {split: str(Path(cache) / manifest.file(split).path) for split in spec.splits}
