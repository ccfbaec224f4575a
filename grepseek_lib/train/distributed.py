"""What `accelerate launch` (several processes, GPUs or nodes) changes for our trainers, in one place.

The trl trainers already split each batch across ranks and average gradients; what is ours is every file we
write besides the trainer's checkpoints. Rank 0 writes final files (model folder, summary); every rank calls
the collective steps (gathering a sharded model's weights) so that none waits forever; and a choice made
once (GRPO's probed question pool) is made by rank 0 and read by the others, so all ranks train alike.
A plain `grepseek train ...` is one process: every helper then does the single-process thing.
"""

from __future__ import annotations

import os
from typing import Any


def world_size() -> int:
    """Processes in the run (WORLD_SIZE, set by accelerate launch / torchrun), 1 for a plain run."""
    return max(1, int(os.environ.get("WORLD_SIZE", "1") or 1))


def rank() -> int:
    """This process's global rank (RANK), 0 for a plain run."""
    return int(os.environ.get("RANK", "0") or 0)


def shared_state() -> Any:
    """accelerate's process state (joins the process group under a launcher; the trainer reuses it)."""
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available())


def full_state_dict(trainer: Any) -> dict | None:
    """The whole model's weights on rank 0, gathered when FSDP / DeepSpeed ZeRO-3 shard them. Every rank must
    call it (a collective); None means "the unwrapped model already holds them" (one process, DDP)."""
    accelerator = trainer.accelerator
    if accelerator.num_processes == 1 or accelerator.distributed_type.name in ("MULTI_GPU", "MULTI_CPU"):
        return None
    return accelerator.get_state_dict(trainer.model_wrapped)
