"""How the examples' end-to-end tests launch an example on two ranks: ``accelerate
launch`` of two processes on one machine (the tests add ``CUDA_VISIBLE_DEVICES=""``:
gloo on CPU on any machine, one GPU cannot hold two ranks)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from held_ports import held_port

__all__ = ["two_ranks"]


def two_ranks() -> list[str]:
    """The command line before the example's script: ``accelerate launch`` (the one beside
    this interpreter, else on PATH) of two processes, no mixed precision nor dynamo, the
    main process on a port held for it (held_ports.held_port)."""
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    return [accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
            "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_port", str(held_port())]  # fmt: skip
