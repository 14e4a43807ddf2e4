"""Run as `mpiexec -n 2 python tests/scripts/mpi_client.py ENDPOINT [mistakes]` by
tests/client/test_client_mpi.py.

An MPI simulation (id 42) of two ranks: each rank sends its part of two fields for
STEPS time steps, then BYE. `u` (6, 5) float64 is cut in halves; `mask` (7,) int32 is
cut unevenly (3 + 4 elements), and rank 0 holds its parts as 2-d arrays, to show that
only a part's size matters. `global_fields` is what the test reassembles, bit for bit.

With `mistakes`, rank 1 first gets its first send wrong twice (a wrong dtype, then a
part of the wrong size): both ranks must raise each time, then send step 0 correctly.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

STEPS = 4
SIMULATION_ID = 42
PARAMETERS = {"alpha": 0.5, "beta": -2.0}
FIELDS = {"u": ((6, 5), "float64"), "mask": ((7,), "int32")}
SPLITS = {"u": (15, 15), "mask": (3, 4)}


def global_fields(step: int) -> dict[str, np.ndarray]:
    """The full fields of a time step: random bits, incl. NaN payloads and -0.0."""
    rng = np.random.default_rng(step)
    u = rng.integers(0, 2**64, size=(6, 5), dtype=np.uint64).view(np.float64)
    u[0, 0] = -0.0
    mask = rng.integers(-(2**31), 2**31, size=7, dtype=np.int64).astype(np.int32)
    return {"u": u, "mask": mask}


def main() -> None:
    from mpi4py import MPI

    from melissa_trainer.client import Client, ClientTuning

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    assert comm.Get_size() == 2, "run with mpiexec -n 2"
    mistakes = sys.argv[2:] == ["mistakes"]
    with Client(
        FIELDS,
        PARAMETERS,
        simulation_id=SIMULATION_ID,
        endpoints=sys.argv[1],
        comm=comm,
        send_timeout=30,
        tuning=ClientTuning(close_timeout=30),
    ) as client:
        if mistakes:
            make_mistakes(client, rank)
        for step in range(1 if mistakes else STEPS):
            client.send(step, **parts_of(global_fields(step), rank))
    comm.Barrier()


def parts_of(fields: dict[str, np.ndarray], rank: int) -> dict[str, np.ndarray]:
    """This rank's parts; rank 0 holds its parts as 2-d arrays (only the size matters)."""
    parts = {}
    for name, full in fields.items():
        start = sum(SPLITS[name][:rank])
        part = full.reshape(-1)[start : start + SPLITS[name][rank]]
        parts[name] = part.reshape(1, -1) if rank == 0 else part
    return parts


def make_mistakes(client: Any, rank: int) -> None:
    """Bad first sends, on one rank only: every rank must raise, none may hang."""
    good = parts_of(global_fields(0), rank)
    wrong_dtype = {**good, "u": good["u"].astype(np.float32)} if rank == 1 else good
    wrong_size = {**good, "mask": good["mask"][:-1]} if rank == 1 else good
    for attempt in (wrong_dtype, wrong_size):
        try:
            client.send(0, **attempt)
        except (TypeError, ValueError) as exc:
            print(f"rank {rank} raised {type(exc).__name__}: {exc}", flush=True)
        else:
            raise SystemExit(f"rank {rank}: a bad first send did not raise")


if __name__ == "__main__":
    main()
