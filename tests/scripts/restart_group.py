"""By hand (docs/how-to/preemption.md, the rendezvous backend of a restart): a restart's
process group formed again, under ``accelerate launch --multi_gpu --num_processes 2
--num_machines 1 --max_restarts 1 [--rdzv_backend c10d]`` on one machine, gloo on CPU
(``CUDA_VISIBLE_DEVICES=`` ``OMP_NUM_THREADS=1``, this checkout on PYTHONPATH)::

    python -m accelerate.commands.launch --multi_gpu --num_processes 2 \\
        --num_machines 1 --mixed_precision no --dynamo_backend no \\
        --main_process_port PORT --max_restarts 1 --rdzv_backend c10d \\
        tests/scripts/restart_group.py OUTPUT_DIR

Each rank forms the group as the trainer does (`trainer.setup.make_accelerator`, which
clears the failed attempt's keys first: `trainer.restart_keys`); on the first attempt
rank 1 fails after the group formed (with ``EARLY=1``: before it forms it); the restart
forms it again and every rank prints "attempt 1 rank R: done". The launch then exits 0.
"""

from __future__ import annotations

import os
import sys

import torch.distributed as dist

from melissa_trainer import TrainingArguments
from melissa_trainer.trainer.setup import make_accelerator

ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
RANK = int(os.environ.get("RANK", "0"))


def main(output_dir: str) -> None:
    first_fails = ATTEMPT == 0 and RANK == 1
    if first_fails and os.environ.get("EARLY"):
        raise ValueError("rank 1 fails before the group on the first attempt")
    args = TrainingArguments(output_dir=output_dir, report_to="none", disable_progress_bar=True)
    make_accelerator(args)
    dist.barrier()
    store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE")
    print(
        f"attempt {ATTEMPT} rank {RANK}: group formed ({dist.get_backend()}, agent store {store})"
    )
    if first_fails:
        raise ValueError("rank 1 fails on the first attempt")
    dist.barrier()
    print(f"attempt {ATTEMPT} rank {RANK}: done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
