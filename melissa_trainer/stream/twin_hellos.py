"""Two live connections that say HELLO as the same simulation and client rank.

Each client rank of a simulation opens one connection to each receiver and says HELLO on
it once. A second HELLO for the same (simulation, client rank) is normal in three cases,
none of which has two such connections open at once:

* a restarted attempt (the launcher's restart, a resumed run's): the earlier process
  ended, so did its connection (the receiver's `ConnectionWatch` has read its close: a
  kernel closes a dead process's sockets at once, long before the launcher has seen the
  exit and started the next attempt);
* a worker (Python client, worker mode) that runs the simulation again after a failure:
  the same process, possibly the same connection (same descriptor: not a twin);
* a client that followed a restarted trainer: it says HELLO to the new trainer's
  receivers, which never saw the first connection.

Two connections open at once, each having said HELLO as the same simulation and rank, are
two processes streaming as one: every step arrives twice (counted as duplicates, silently)
and, for a solver that splits its domain by the communicator's size, each copy computed
another problem. The usual cause is an MPI solver whose ranks did not find each other:
each one is MPI_COMM_WORLD of size 1 ("singletons"), rank 0 of 1, and says so. Under Slurm,
``srun`` without the MPI plugin the solver's MPI needs (``--mpi=pmi2`` or ``--mpi=pmix``:
``SlurmBackend(srun_args=["--mpi=pmi2"])``), or, anywhere, an ``mpiexec`` of another MPI
than the one the solver was built with. Less often, two solvers started by hand with the
same ``MELISSA_TRAINER_SIMULATION_ID``.

`TwinHellos` is told each HELLO and the descriptor of its connection (ZeroMQ's ``SRCFD``);
whether the first connection is still open is the watch's word (`ConnectionWatch.owner_of`:
open, its HELLO read, no BYE read yet). The first twin is a WARNING on the receiver of rank
0 (every client rank connects to every receiver: rank 0 hears them all; the other ranks
log it at DEBUG), naming the cause and the fix; the others are only counted, and listed in
one line at the end of the stream (`summary`). Nothing on the data path: HELLOs only.

A connection whose close the watch has not read yet counts as open: a restarted attempt
saying HELLO before its predecessor's close is read would be taken for a twin (a WARNING,
never a change to the data); it needs the launcher to see the exit, start a process that
connects and says HELLO, all within the watch's reading of one event.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from melissa_trainer.wire import Hello

__all__ = ["TwinHellos"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

Owner = tuple[int, int]  # (simulation id, client rank)
_SWEEP_MIN = 4096  # entries before the first sweep of closed connections (memory bound)

#: the likely cause and the fix, said once per study
CAUSE = (
    "two processes stream as the same simulation rank: every step is received twice "
    "(counted as duplicates) and each process may compute another problem. The likely "
    "cause: an MPI solver started as singletons (each rank MPI_COMM_WORLD of size 1, "
    "rank 0 of 1): under Slurm, srun without the solver's MPI plugin (--mpi=pmi2 or "
    '--mpi=pmix: SlurmBackend(srun_args=["--mpi=pmi2"])); anywhere, an mpiexec from '
    "another MPI than the one the solver was built with (use the mpiexec of the solver's "
    "MPI: MpiexecBackend's command). Less often: two solvers started by hand with the "
    "same MELISSA_TRAINER_SIMULATION_ID"
)


class TwinHellos:
    """Finds HELLOs of a (simulation, client rank) already open on another connection
    (module docstring). Called by the receiver's ingester only."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        #: (simulation, client rank) -> the descriptor of the first connection that said
        #: HELLO as it (closed ones swept when the map doubles: `_sweep`)
        self._first: dict[Owner, int] = {}
        self._sweep_at = _SWEEP_MIN
        #: simulation id -> (client rank, client count) of its first twin, in order
        self.simulations: dict[int, tuple[int, int]] = {}

    def hello(self, fd: int, msg: Hello, owner_of: Callable[[int], Owner | None]) -> bool:
        """A HELLO came on connection `fd`; `owner_of(fd)` is whose open connection `fd`
        is (`ConnectionWatch.owner_of`). True if it is a twin (then counted, and the
        first of the study warned of)."""
        owner = (msg.simulation_id, msg.client_rank)
        first = self._first.get(owner)
        if first is not None and first != fd and owner_of(first) == owner:
            self._twin(msg)
            return True  # (the first stays the one compared with: it is still open)
        self._first[owner] = fd
        if len(self._first) >= self._sweep_at:
            self._sweep(owner_of)
        return False

    def summary(self) -> str | None:
        """One line naming every simulation that had a twin, or None if none did."""
        if not self.simulations:
            return None
        ids = list(self.simulations)
        shown = ", ".join(map(str, ids[:12])) + (", ..." if len(ids) > 12 else "")
        n = len(ids)
        return (
            f"receiver of rank {self._rank}: {n} simulation{'' if n == 1 else 's'} ({shown}) "
            f"had two open connections saying HELLO as the same client rank (see the "
            f"warning above: an MPI solver started as singletons?)"
        )

    def _twin(self, msg: Hello) -> None:
        sid = msg.simulation_id
        if sid in self.simulations:
            return
        first = not self.simulations
        self.simulations[sid] = (msg.client_rank, msg.client_count)
        level = logging.WARNING if first and self._rank == 0 else logging.DEBUG
        logger.log(
            level,
            "simulation %d: a second connection said HELLO as client rank %d of %d while "
            "the first is still open: %s. Said once; the other simulations alike are "
            "listed at the end of the stream",
            sid,
            msg.client_rank,
            msg.client_count,
            CAUSE,
        )

    def _sweep(self, owner_of: Callable[[int], Owner | None]) -> None:
        """Forget the connections closed since (memory: the open ones, not every
        simulation of the study)."""
        self._first = {o: fd for o, fd in self._first.items() if owner_of(fd) == o}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._first))
