"""Placing a field over a communicator does not import mpi4py.MPI itself.

Importing it initialises MPI (mpi4py's ``rc.initialize``): in a process whose
communicator is a stand-in or another binding's, that started an MPI the process never
asked for, and MPICH's ``/dev/shm/mpich_shm_<pid>_0`` segment outlived it (the test
suite's workers left one per run through such a stand-in). A real mpi4py communicator
has loaded the module already, and the reductions then name its SUM as before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    from melissa_trainer.client.field_part import FieldPart
    from melissa_trainer.client.send_arrays import place_parts
    from melissa_trainer.wire import FieldSpec

    class StandIn:  # rank 1 of 2; rank 0 declared alike and holds the first 2 elements
        def __init__(self):
            self.ops = []
        def Exscan(self, local, out, **kw):
            self.ops.append(kw)
            out[:] = 2
        def Allreduce(self, local, out, **kw):
            self.ops.append(kw)
            if len(self.ops) == 1:  # the declarations compared (rank 0's did not fail)
                out[:-1], out[-1] = 2 * local[:-1], local[-1]
            else:
                out[:] = local + 2

    if sys.argv[1] == "loaded":
        from mpi4py import MPI  # what a real communicator's import did
    comm = StandIn()
    fields = {"u": FieldPart(FieldSpec("u", np.dtype("<f4"), (4,)))}
    place_parts(fields, {"u": np.ones(2, np.float32)}, 0, comm, 7, 1, 2)
    print("loaded" if "mpi4py.MPI" in sys.modules else "not loaded", len(comm.ops),
          sorted({str(k) for kw in comm.ops for k in kw.values()}))
    """
)


def run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_stand_in_communicator_does_not_start_mpi() -> None:
    assert run("none") == "not loaded 3 []"


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_loaded_mpi4py_gives_its_sum() -> None:
    pytest.importorskip("mpi4py")
    out = run("loaded")
    assert out.startswith("loaded 3 ['<mpi4py.MPI.Op"), out
