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

__all__ = ["SOLVER", "expected"]

SOLVER = """
import os, signal, sys, time
from pathlib import Path

out, n = Path(sys.argv[1]), int(sys.argv[2])
sid = os.environ["MELISSA_TRAINER_SIMULATION_ID"]

def term(*_):
    with open(out / "said.txt", "a") as f:
        f.write(f"term {sid}\\n")
    while len({line for line in (out / "said.txt").read_text().splitlines()
               if line.startswith("term ")}) < n:  # (solvers, not signals: see below)
        time.sleep(0.02)
    with open(out / "said.txt", "a") as f:
        f.write(f"saw-all {sid}\\n")
    os._exit(0)

signal.signal(signal.SIGTERM, term)
(out / f"{sid}.up").touch()
while True:
    time.sleep(1)
"""


def expected(n: int) -> list[str]:
    """The lines of ``said.txt`` when `n` solvers were signalled together, sorted."""
    return sorted([f"term {i}" for i in range(n)] + [f"saw-all {i}" for i in range(n)])
