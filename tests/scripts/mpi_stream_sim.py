"""An MPI simulation using `melissa_trainer.client.Client`, for tests/stream/test_stream_source.py.

    mpiexec -n 2 python tests/scripts/mpi_stream_sim.py ENDPOINT

Simulation `SIMULATION_ID` of two ranks sends `STEPS` time steps of two fields, each
rank its contiguous part of the C-ordered global field: `f` (6, 5) float64 cut in
3 + 27 elements, `g` (10,) int32 held entirely by rank 0 (rank 1's part is empty, so
it sends no DATA for it). Values are `stream_client.field_value`, so that the test
checks the reassembled fields bit for bit.
"""

from __future__ import annotations

import sys

from mpi4py import MPI
from stream_client import field_value, parse_field

from melissa_trainer.client import Client

SIMULATION_ID = 77
STEPS = 5
FIELDS = ["f:<f8:6,5", "g:<i4:10"]
SPLITS = {"f": (3, 27), "g": (10, 0)}
PARAMETERS = {"alpha": 0.25, "beta": -1.0}


def main() -> None:
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    specs = [parse_field(f) for f in FIELDS]
    fields = {s.name: (s.shape, s.dtype) for s in specs}
    with Client(
        fields, PARAMETERS, SIMULATION_ID, sys.argv[1], comm=comm, send_timeout=30
    ) as client:
        for step in range(STEPS):
            parts = {}
            for index, spec in enumerate(specs):
                start = sum(SPLITS[spec.name][:rank])
                flat = field_value(SIMULATION_ID, step, index, spec).reshape(-1)
                parts[spec.name] = flat[start : start + SPLITS[spec.name][rank]].copy()
            client.send(step, **parts)
    comm.Barrier()


if __name__ == "__main__":
    main()
