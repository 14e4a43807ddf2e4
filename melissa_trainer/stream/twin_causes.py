"""What a twin (`twin_hellos`: two open connections that said HELLO as the same
simulation and client rank) most likely is, told apart by the rank counts the two HELLOs
said (their ``client_count``: the size of the communicator each client was built on).

* both "of 1": each process says it is alone. An MPI solver whose ranks did not find
  each other (singletons: ``srun`` without the solver's MPI plugin, an ``mpiexec`` of
  another MPI), or whose ranks built their clients without the communicator (every one
  then says rank 0 of 1); less often two solvers started with one simulation id.
* two counts: the ranks of one simulation disagree on their communicator: one rank built
  its client on it, another without it (rank 0 of 1) or on another one. Its HELLO is
  refused as differing from the first (``hello_mismatch``), and the ranks built on the
  communicator wait on the others in the client's collectives (reproduced with
  ``mpiexec -n 2``: rank 0, of 2, never ended; rank 1, without ``comm=``, streamed).
  The receiver does not wait for a twin to say so: any HELLO whose rank count differs
  from its simulation's first is refused at once as `ranks_disagree` words it, a
  `StudyStopping` reason (below).
* both "of n", n > 1: no singletons (each would say 0 of 1): two runs of an n-rank
  solver stream as one simulation: one id given to two (by hand, a launcher of one's
  own), or an attempt whose ranks outlived it beside its restart.
"""

from __future__ import annotations

from melissa_trainer.common.words import plural

__all__ = ["StudyStopping", "ranks_disagree", "twin_cause"]

_TWICE = (
    "two processes stream as the same simulation rank: every step is received twice "
    "(counted as duplicates) and each process may compute another problem"
)
#: where each client names its communicator (the fix of a rank built without it)
_COMM = "Python: Client(..., comm=comm); C: mt_client_start_mpi; Fortran: mt_start_mpi"

#: both said "of 1"
ALONE = (
    f"{_TWICE}. Each says it is rank 0 of 1, alone. The likely cause: an MPI solver started "
    "as singletons (each rank MPI_COMM_WORLD of size 1, rank 0 of 1): under Slurm, srun "
    "without the solver's MPI plugin (--mpi=pmi2 or --mpi=pmix: SlurmBackend(srun_args=[\""
    '--mpi=pmi2"])); anywhere, an mpiexec from another MPI than the one the solver was '
    "built with (use the mpiexec of the solver's MPI: MpiexecBackend's command); or an MPI "
    f"solver whose ranks built their clients without the communicator ({_COMM}). Less "
    "often: two solvers started by hand with the same MELISSA_TRAINER_SIMULATION_ID"
)


def twin_cause(rank: int, first_count: int, second_count: int) -> str:
    """The likely cause of a twin of client rank `rank` whose first HELLO said
    `first_count` client ranks and whose second said `second_count`, with its fix (module
    docstring)."""
    if first_count == second_count == 1:
        return ALONE
    if first_count != second_count:
        alone = (
            f"; the one of 1 built its client without the communicator ({_COMM}) or was "
            "started alone, not as a rank of the others"
            if 1 in (first_count, second_count)
            else ""
        )
        return (
            "the ranks of this simulation disagree on their communicator: the first "
            f"connection's client says it is rank {rank} of {first_count}, the second's "
            f"rank {rank} of {second_count}{alone}. Its HELLO is refused as differing "
            "from the first (hello_mismatch), and the ranks built on the communicator "
            "may wait for the others at its collectives. Build every rank's client on "
            f"the same communicator ({_COMM}, on every rank)"
        )
    return (
        f"{_TWICE}. Both say rank {rank} of {first_count}: not singletons (each of "
        f"those says rank 0 of 1) but two runs of a {first_count}-rank solver "
        "streaming as one simulation. The likely cause: the same "
        "MELISSA_TRAINER_SIMULATION_ID given to two solvers (started by hand, or by a "
        "launcher of your own), or ranks of an attempt that outlived it, streaming "
        "beside its restart"
    )


class StudyStopping(str):
    """The reason of a refusal (`Ingest.refused`) that no attempt of the simulation can
    fix, nor any other simulation of its solver avoid: a study's launcher stops the
    study with it at once instead of restarting the attempt (`Supervisor.check_data`).
    A `str`: every other reader of the refusals takes it as any reason."""

    __slots__ = ()


def ranks_disagree(rank: int, first_count: int, count: int) -> StudyStopping:
    """Why a HELLO as client rank `rank` of `count` is refused where its simulation's
    first HELLO said `first_count` client ranks, with the fix; no order of the two
    HELLOs is assumed (the race of the ranks' start decides it)."""
    alone = (
        f"; a rank that says it is rank 0 of 1 built its client without the "
        f"communicator ({_COMM}) or was started alone, not as a rank of the others"
        if 1 in (first_count, count)
        else ""
    )
    return StudyStopping(
        f"the ranks of this simulation disagree on their communicator: a HELLO says client "
        f"rank {rank} of {count}, where its first HELLO said {plural(first_count, 'client rank')}"
        f"{alone}. The ranks built on the communicator wait at its collectives for "
        f"ranks that never join them (a hang, not an error), and the others' data cannot "
        f"make whole fields. Build every rank's client on the same communicator ({_COMM}, "
        f"on every rank). (If instead an attempt of the simulation ran on another number "
        f"of ranks than its first, a resumed study's included: run every attempt on as "
        f"many ranks.)"
    )
