"""The processes a command runs in, as torch.distributed sees them: one, or the N a launcher started.

A launcher users already know starts the processes and says so in the environment (`torchrun --nproc-per-node N`,
`accelerate launch`: WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT); without one the command is one process
and nothing is initialised. The rows to score are shared by position in their (hash) order, rank r taking every
N-th from the r-th, and rank 0 gathers what every rank scored and alone prints and writes. A row's float32 score on
the independent path does not depend on which process scored it (batch size 1, the lock's numeric mode), so the
records equal the one-process records apart from timings and the process count. The backend is gloo on CPU and
nccl where a GPU is present (the same calls; only gloo was run here).
"""

import os
import secrets
from dataclasses import dataclass

from sst2_audit.protocol.numeric import threads_for


@dataclass
class Shards:
    rank: int = 0
    world: int = 1
    backend: str | None = None  # None: one process, nothing initialised
    local: int = 1  # the processes on this machine (LOCAL_WORLD_SIZE): each loads its own copy of the model

    @property
    def lead(self) -> bool:
        return self.rank == 0

    def threads(self, settings: dict, paths: int = 1) -> int:
        """torch's threads for each of `paths` concurrent paths in each process: the lock's threads, the cores
        shared by the processes and their paths."""
        return threads_for(settings, paths=paths * self.world)

    def seed(self, given: int | None) -> int:
        """The rescore draw's seed: the one given, else one drawn fresh at rank 0, the same on every rank."""
        return given if given is not None else self.broadcast(secrets.randbelow(2 ** 32))

    def mine(self, ids: list) -> list:
        """This process's share of `ids`, by position."""
        return list(ids)[self.rank::self.world]

    def gather(self, part: dict) -> dict | None:
        """Every rank's `part` merged at rank 0 (None elsewhere)."""
        if self.world == 1:
            return dict(part)
        import torch.distributed as dist

        parts: list | None = [None] * self.world if self.lead else None
        dist.gather_object(part, parts, dst=0)
        return {key: value for each in parts for key, value in each.items()} if parts is not None else None

    def broadcast(self, value):
        """Rank 0's `value` on every rank (a drawn seed, the exit code)."""
        if self.world == 1:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if self.backend is not None:
            import torch.distributed as dist

            dist.destroy_process_group()


def launched() -> int:
    """How many processes a launcher started for this command (1 without one)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def from_launcher(backend: str | None = None) -> Shards:
    """The processes the launcher started (call after the numeric mode is set: this imports torch), or one.
    backend: gloo for tensors on the CPU (run: lm-eval's own collectives gather tensors on the lock's device, the
    CPU); else nccl where a GPU is present."""
    world = launched()
    if world <= 1:
        return Shards()
    import torch
    import torch.distributed as dist

    backend = backend or ("nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    return Shards(dist.get_rank(), dist.get_world_size(), backend, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
