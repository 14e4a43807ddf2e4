"""The exit's teardown of the gloo group (`core.process_group.teardown`) runs a full
garbage collection only when the group outlives its release, not at every exit.

The bug: the teardown ran ``gc.collect()`` first, unconditionally, at every
multi-process run's exit, to free trainers dropped in reference cycles. A full
collection walks every object torch and the script made: 1.2 to 1.3 s per rank of the
exit (measured in the teardown, a 2-rank heat example on this project's 2-core machine at
load average 15 to 19), for a group nothing but the teardown held. The test failed before
the fix: one collection where none was needed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

# A fresh interpreter: a gloo group of one (its worker threads are real), torn down twice:
# held by nothing but the default-group registry, then also by a reference cycle.
SCRIPT = r"""
import gc, json, sys
from pathlib import Path
import torch
import torch.distributed as dist
from melissa_trainer.core import process_group

def workers():  # the threads torch names gloo's workers, read here, not by the library
    count = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            count += (task / "comm").read_text().strip() == "pt_gloo_runloop"
        except OSError:
            continue
    return count

collects = []
collect = gc.collect
def counted(*args, **kwargs):
    collects.append(1)
    return collect(*args, **kwargs)
gc.collect = counted

class Holder:
    pass

out = {}
for case in ("free", "cycle"):
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}/{case}", rank=0,
                            world_size=1)
    dist.all_reduce(torch.zeros(1))  # run on a worker: one has named itself by then
    gc.disable()  # no automatic collection frees the cycle before the teardown
    if case == "cycle":
        held = Holder()
        held.me, held.group = held, dist.group.WORLD
        del held  # unreachable, freed only by a collection
    during = workers()
    collects.clear()
    process_group.teardown()
    gc.enable()
    out[case] = {"during": during, "after": workers(), "collects": len(collects)}
print(json.dumps(out))
"""


def test_a_collection_runs_only_when_the_group_outlives_its_release(tmp_path: Path) -> None:
    """Held by nothing else, the group is destroyed with no collection; held by a
    reference cycle, a collection frees it. Either way no gloo worker outlives it."""
    root = str(Path(__file__).parents[2])
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=100,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    for case in ("free", "cycle"):
        assert record[case]["during"] >= 1, record  # the oracle sees gloo's workers
        assert record[case]["after"] == 0, record
    assert record["free"]["collects"] == 0, record
    assert record["cycle"]["collects"] == 1, record
