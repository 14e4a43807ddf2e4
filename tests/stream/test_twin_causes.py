"""The twin-HELLO warning (`twin_hellos`) in the words of what happened, told apart by
the rank counts the two HELLOs said (`twin_causes`), against a real receiver and real
ZeroMQ connections.

Before, every twin blamed "an MPI solver started as singletons", also when the ranks of
one simulation disagreed on their communicator (reproduced with ``mpiexec -n 2``: rank 0
built its Client with ``comm=MPI.COMM_WORLD``, rank 1 without: "a second connection said
HELLO as client rank 0 of 1 while the first was open ...: The likely cause: an MPI
solver started as singletons"; the first had said rank 0 of 2, and no singleton says
that), and when two runs of a 2-rank solver shared an id (both rank 0 of 2).

The order is the test's: each HELLO handled before the next connection's, then the first
connection's BYE, which judges the two twins at once (no grace waited).
"""

from __future__ import annotations

import logging

import pytest
import reference_protocol as R
import zmq
from helpers import handled, running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer

pytestmark = pytest.mark.timeout(60)

U = R.Field("u", "<f4", (4,))
SID = 5


def twin_warning(caplog: pytest.LogCaptureFixture, first: int, second: int) -> str:
    """The receiver's twin warning after a HELLO as client rank 0 of `first`, then one as
    rank 0 of `second` on another connection, then the first's BYE."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.stream.receiver")
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(2)]
    try:
        with running(FIFOBuffer(100), expected_simulations=1) as rec:
            for n, (sock, count) in enumerate(zip(socks, (first, second), strict=True)):
                sock.connect(rec.endpoint)
                sock.send(R.encode_hello(SID, 0, count, R.hello_body([U], {})))
                wait_until(lambda n=n: handled(rec) > n, f"HELLO {n} handled")
            socks[0].send(R.encode_bye(SID, 0, first, 0))
            wait_until(lambda: twins(caplog), "the twin's warning")
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()
    (warning,) = twins(caplog)
    return warning


def twins(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "a second connection said" in r.getMessage()]


def test_two_connections_each_alone_are_told_as_singletons_or_ranks_without_the_comm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warning = twin_warning(caplog, 1, 1)
    assert warning.startswith(
        f"simulation {SID}: a second connection said HELLO as client rank 0 of 1 while the "
        "first was open and streaming ("
    ), warning
    assert (
        "Each says it is rank 0 of 1, alone. The likely cause: an MPI solver started as "
        "singletons" in warning
    ), warning
    assert (
        "or an MPI solver whose ranks built their clients without the communicator (Python: "
        "Client(..., comm=comm); C: mt_client_start_mpi; Fortran: mt_start_mpi)" in warning
    ), warning
    assert "disagree" not in warning


def test_ranks_of_one_simulation_built_on_and_off_the_comm_are_told_they_disagree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # (rank 0 with comm=MPI.COMM_WORLD, of 2; a rank without it says rank 0 of 1)
    warning = twin_warning(caplog, 2, 1)
    assert warning.startswith(
        f"simulation {SID}: a second connection said HELLO as client rank 0 of 1 while the "
        "first (as client rank 0 of 2) was open and streaming ("
    ), warning
    assert (
        "the ranks of this simulation disagree on their communicator: the first "
        "connection's client says it is rank 0 of 2, the second's rank 0 of 1; the one of 1 "
        "built its client without the communicator (Python: Client(..., comm=comm); C: "
        "mt_client_start_mpi; Fortran: mt_start_mpi) or was started alone, not as a rank "
        "of the others. Its HELLO is refused as differing from the first (hello_mismatch)"
    ) in warning, warning
    assert "singleton" not in warning, warning


def test_ranks_on_two_communicators_of_several_are_told_they_disagree(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warning = twin_warning(caplog, 4, 2)
    assert (
        "disagree on their communicator: the first connection's client says it is rank 0 "
        "of 4, the second's rank 0 of 2. Its HELLO is refused"
    ) in warning, warning
    assert "the one of 1" not in warning and "singleton" not in warning, warning


def test_two_runs_of_a_two_rank_solver_with_one_id_are_not_called_singletons(
    caplog: pytest.LogCaptureFixture,
) -> None:
    warning = twin_warning(caplog, 2, 2)
    assert warning.startswith(
        f"simulation {SID}: a second connection said HELLO as client rank 0 of 2 while the "
        "first was open and streaming ("
    ), warning
    assert (
        "Both say rank 0 of 2: not singletons (each of those says rank 0 of 1) but two "
        "runs of a 2-rank solver streaming as one simulation. The likely cause: the same "
        "MELISSA_TRAINER_SIMULATION_ID given to two solvers"
    ) in warning, warning
    assert "srun" not in warning, warning
