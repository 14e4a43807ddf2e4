"""Whether a multi-process launch runs on CPU (gloo): `cpu_only_launch`, asked before the
trainer's `Accelerator` is made, so that its process group is formed where the ranks can
share the stop flag.
"""

from __future__ import annotations

import os

import torch
from accelerate.utils import parse_flag_from_env


def cpu_only_launch() -> bool:
    """True for a multi-process launch on a machine without (visible) GPUs.

    `accelerate launch --multi_gpu` there starts the processes, but Accelerate only
    forms a (gloo) process group when told to run on CPU; otherwise every rank would
    train alone and the stop flag would not be shared. ``CUDA_VISIBLE_DEVICES=''``
    makes a GPU machine one of these (as does ACCELERATE_USE_CPU).

    Raises RuntimeError, before the trainer's Accelerator is made, when this node runs
    more processes (LOCAL_WORLD_SIZE, as torchrun sets it; 1 when unset) than it has
    visible GPUs: Accelerate would put two ranks on one GPU, which NCCL refuses at the
    first collective ("Duplicate GPU detected"). No silent fallback to CPU there (nor
    in Accelerate): a run that asked for GPUs would train on CPU unnoticed.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return False
    if not torch.cuda.is_available() or parse_flag_from_env("ACCELERATE_USE_CPU"):
        return True  # the latter: Accelerate runs on CPU whatever it is told
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count()
    if local > gpus:
        raise RuntimeError(
            f"{local} processes on this node but {gpus} visible GPU(s), and NCCL cannot "
            f"share a GPU between ranks: launch at most {gpus} per node (--num_processes "
            f"{gpus} on one machine), or train on CPU (gloo) with CUDA_VISIBLE_DEVICES=''"
        )
    return False
