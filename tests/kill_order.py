"""A solver that tells whether a stop signalled every job before it waited for any
(tests/launcher/test_stop_kills_together.py, tests/launcher/backends/
test_slurm_srun_kills_together.py): the oracle needs no clock.

`SOLVER` (Python source; argv: its directory, the number of solvers N; its id from
``MELISSA_TRAINER_SIMULATION_ID``) records its start as ``ID.up``; on SIGTERM it writes
``term ID`` to ``said.txt``, waits until N solvers' such lines are there, then writes
``saw-all ID`` and exits 0. Killed one after another, the first solver never sees the
others' lines (they are signalled only after its end): it is SIGKILLed at its grace,
silent. Killed together, every solver writes "saw all". (Slurm's cancel at the end of a
grace sends a second SIGTERM: a solver killed one after another then wrote its line
twice; distinct lines are counted.)"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from waiting import wait_until

__all__ = ["IDLE", "ON_TERM", "SOLVER", "expected", "launch_solvers"]

#: the set-up: its directory and N from argv, its id (the simulation's, or a worker's
#: name), the SIGTERM handler installed
ON_TERM = """
import os, signal, sys, time
from pathlib import Path

out, n = Path(sys.argv[1]), int(sys.argv[2])
sid = os.environ.get("MELISSA_TRAINER_SIMULATION_ID") or os.environ["MELISSA_TRAINER_WORKER"]

def term(*_):
    with open(out / "said.txt", "a") as f:
        f.write(f"term {sid}\\n")
    while len({line for line in (out / "said.txt").read_text().splitlines()
               if line.startswith("term ")}) < n:  # (solvers, not signals: see above)
        time.sleep(0.02)
    with open(out / "said.txt", "a") as f:
        f.write(f"saw-all {sid}\\n")
    os._exit(0)

signal.signal(signal.SIGTERM, term)
"""
#: then: its start recorded (``ID.up``), it runs until killed
IDLE = """
(out / f"{sid}.up").touch()
while True:
    time.sleep(1)
"""
SOLVER = ON_TERM + IDLE


def expected(n: int, ids: list[str] | None = None) -> list[str]:
    """The lines of ``said.txt`` when `n` solvers (`ids`, else 0 to n - 1) were
    signalled together, sorted."""
    ids = ids if ids is not None else [str(i) for i in range(n)]
    return sorted([f"term {i}" for i in ids] + [f"saw-all {i}" for i in ids])


def launch_solvers(backend: Any, here: Path, n: int) -> list[Any]:
    """`n` `SOLVER` jobs ``sim-0``... (their directory `here`) launched on `backend`;
    their handles, once every one runs (its ``ID.up``)."""
    from melissa_trainer.launcher.backends import Job

    (here / "solver.py").write_text(SOLVER)
    solver = [sys.executable, str(here / "solver.py"), str(here), str(n)]
    handles = [
        backend.launch(Job(f"sim-{i}", solver, {"MELISSA_TRAINER_SIMULATION_ID": str(i)}, here))
        for i in range(n)
    ]
    wait_until(lambda: len(list(here.glob("*.up"))) == n, f"{n} solvers to run", 60.0)
    return handles
