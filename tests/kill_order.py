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

__all__ = ["IDLE", "ON_TERM", "SOLVER", "expected"]

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
