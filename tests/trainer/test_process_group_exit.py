"""A trainer's process destroys its gloo process group at exit (`core.accelerated.
destroy_gloo_group_at_exit`), before the interpreter's teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # a fresh interpreter: atexit runs at its exit

PROBE = """
import atexit, sys
import torch.distributed as dist
from melissa_trainer.core.accelerated import destroy_gloo_group_at_exit

store = dist.FileStore(sys.argv[1], 1)
dist.init_process_group("gloo", store=store, rank=0, world_size=1)
# atexit runs its handlers last registered first: this one runs after the trainer's
atexit.register(lambda: print("initialized at exit:", dist.is_initialized(), flush=True))
destroy_gloo_group_at_exit()
destroy_gloo_group_at_exit()  # once per process
print("initialized before exit:", dist.is_initialized(), flush=True)
"""


@pytest.mark.timeout(120)
def test_the_gloo_group_is_destroyed_at_exit(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "store")],
                          capture_output=True, text=True, timeout=100)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "initialized before exit: True",
        "initialized at exit: False",
    ], done.stdout + done.stderr
