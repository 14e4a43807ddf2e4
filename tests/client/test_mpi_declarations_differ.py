"""Ranks of one MPI simulation that declare different fields are refused at the first
send, on every rank (`send_arrays.place_parts`).

Seen in a user trial (2026-12-06, hmpi): rank 1 of 2 declared ``u`` float64 where rank
0 declared float32, each sending parts of the right size. The parts added up, so
both ranks streamed; the receiver took the first HELLO and dropped the other rank's
(``hello_mismatch``) and its data (``bad_field``), and the launcher said "it exited 0
but its data did not all arrive ...; a solver must send every step and close its
client": wrong advice, for a solver that did both. (When the other rank's HELLO came
first, the study's schema refused it: which rank's declaration won was a race.) The
oracle: each rank's own report of the exception its first send raised.

Found in review (2026-12-06): a rank declaring one field more aborted the job in
MPI_Exscan ("Message truncated": each rank's reduction had one entry per its own
field), no rank raising; and the hash compared was 20 bits of crc32, which a name
found by a few hundred thousand tries matches ("collide").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

#: argv[1]: what rank 1 declares differently ("dtype", "shape", "name", "extra", "collide",
#: "none")
SOLVER = """
import sys
import numpy as np
from mpi4py import MPI
from melissa_trainer.client import Client, ClientTuning

comm = MPI.COMM_WORLD
fields = {"u": ((4, 2), "float32"), "p": ((), "float64")}
other = sys.argv[1] if comm.rank == 1 else "none"
if other == "dtype":
    fields["u"] = ((4, 2), "float64")
elif other == "shape":
    fields["u"] = ((2, 4), "float32")
elif other == "name":
    fields = {"v": fields["u"], "p": fields["p"]}
elif other == "collide":
    fields = {"u670969": fields["u"], "p": fields["p"]}
elif other == "extra":
    fields["w"] = ((3,), "float32")
name = next(iter(fields))
arrays = {name: np.zeros(4, fields[name][1]), "p": np.zeros(1 - comm.rank)}  # (p: on rank 0)
if "w" in fields:
    arrays["w"] = np.zeros(3, np.float32)
try:
    with Client(fields, {}, simulation_id=0, endpoints="tcp://127.0.0.1:9", comm=comm,
                tuning=ClientTuning(failed_close_timeout=1)) as client:
        client.send(0, **arrays)
        raise SystemExit(f"rank {comm.rank} sent")  # (no receiver: stop here)
except (ValueError, TypeError) as exc:
    print(f"rank {comm.rank} raised {type(exc).__name__}: {exc}", flush=True)
"""


def _run(tmp_path: Path, other: str) -> str:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    (tmp_path / "solver.py").write_text(SOLVER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, str(tmp_path / "solver.py"), other],
        capture_output=True, text=True, env=env, timeout=90,
    )  # fmt: skip
    return done.stdout + done.stderr


@pytest.mark.parametrize(
    ("other", "rank_1_says"),
    [
        ("dtype", "'u' float64 (4, 2), 'p' float64 ()"),
        ("shape", "'u' float32 (2, 4), 'p' float64 ()"),
        ("name", "'v' float32 (4, 2), 'p' float64 ()"),
        # as many fields on every rank, or the ranks' reductions differ in length: MPI
        # aborted the job ("Message truncated") before any rank could raise
        ("extra", "'u' float32 (4, 2), 'p' float64 (), 'w' float32 (3,)"),
        # the crc32 of these words agrees with rank 0's in its low 20 bits, all that the
        # check compared before: both ranks sent (it compares 60 bits of BLAKE2b now)
        ("collide", "'u670969' float32 (4, 2), 'p' float64 ()"),
    ],
)
def test_ranks_declaring_other_fields_are_refused_on_every_rank(
    tmp_path: Path, other: str, rank_1_says: str
) -> None:
    said = _run(tmp_path, other)
    for rank in (0, 1):
        assert f"rank {rank} raised ValueError: the ranks of the communicator declare " in said
    assert f"this rank (1 of 2) declares {rank_1_says}" in said, said
    assert "this rank (0 of 2) declares 'u' float32 (4, 2), 'p' float64 ()" in said, said
    assert " sent" not in said, said


def test_ranks_declaring_the_same_fields_send(tmp_path: Path) -> None:
    said = _run(tmp_path, "none")
    assert "rank 0 sent" in said and "rank 1 sent" in said, said
