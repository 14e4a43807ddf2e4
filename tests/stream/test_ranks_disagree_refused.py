"""A HELLO whose rank count differs from its simulation's first is refused at once, said
on rank 0 and listed as a refusal that stops a study (`twin_causes.ranks_disagree`,
`StudyStopping`), whichever came first, before or after the simulation finished, against
a real receiver and real ZeroMQ connections. Any client: the words are the receiver's.

Before, only the connection-watch's twin judgment said it (after the first connection's
BYE, or a 10 s grace), and not at all when the rank of 1 came first and its BYE was read
before the other's HELLO (a 2-rank ``mpiexec`` run: the simulation finished on the steps
of the rank without the communicator, unwarned; tests/launcher/test_ranks_disagree.py).
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import handled, running
from waiting import wait_until

from melissa_trainer.client import Client
from melissa_trainer.stream.twin_causes import StudyStopping

pytestmark = pytest.mark.timeout(60)

U = R.Field("u", "<f4", (4,))
SID = 5


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if " refused: the ranks of " in r.getMessage()]


def test_a_rank_without_the_comm_after_one_on_it_is_refused_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.stream.receiver")
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(3)]
    try:
        with running(expected_simulations=1) as rec:
            # rank 0 on a communicator of 2; then a rank without it, twice (no BYE: the
            # first connection stays open, as a rank hung at a collective keeps it)
            for n, (sock, count) in enumerate(zip(socks, (2, 1, 1), strict=True)):
                sock.connect(rec.endpoint)
                sock.send(R.encode_hello(SID, 0, count, R.hello_body([U], {})))
                wait_until(lambda n=n: handled(rec) > n, f"HELLO {n} handled")
            refused = rec.refused()
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()
    ((sid, why),) = refused  # once per simulation
    assert sid == SID and isinstance(why, StudyStopping)
    assert why.startswith(
        "the ranks of this simulation disagree on their communicator: a HELLO says client "
        "rank 0 of 1, where its first HELLO said 2 client ranks; a rank that says it is "
        "rank 0 of 1 built its client without the communicator (Python: Client(..., "
        "comm=comm); C: mt_client_start_mpi; Fortran: mt_start_mpi)"
    ), why
    assert said(caplog) == [f"simulation {SID} refused: {why}"]


def test_a_rank_on_the_comm_after_the_simulation_finished_without_it_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.stream.receiver")
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    try:
        # 2 expected: a stream ended by this simulation would read nothing after it
        with running(expected_simulations=2) as rec:
            # the rank without the communicator: rank 0 of 1, its whole run, its BYE
            with Client({"u": ((4,), "float32")}, {}, SID, rec.endpoint) as client:
                for t in range(3):
                    client.send(t, u=np.full(4, t, np.float32))
            wait_until(lambda: SID in rec.completed(), "the simulation finished")
            before = handled(rec)
            sock.connect(rec.endpoint)  # the rank on a communicator of 2, late
            sock.send(R.encode_hello(SID, 0, 2, R.hello_body([U], {})))
            wait_until(lambda: handled(rec) > before, "the late HELLO handled")
            refused = rec.refused()
    finally:
        sock.close(linger=0)
        ctx.term()
    ((sid, why),) = refused
    assert sid == SID and isinstance(why, StudyStopping)
    assert "a HELLO says client rank 0 of 2, where its first HELLO said 1 client rank;" in why
    assert "Build every rank's client on the same communicator" in why
    assert said(caplog) == [f"simulation {SID} refused: {why}"]


def test_ranks_of_two_counts_above_one_are_refused_without_the_rank_alone_words() -> None:
    ctx = zmq.Context()
    socks = [ctx.socket(zmq.PUSH) for _ in range(2)]
    try:
        with running(expected_simulations=1) as rec:
            for n, (sock, count) in enumerate(zip(socks, (4, 2), strict=True)):
                sock.connect(rec.endpoint)
                sock.send(R.encode_hello(SID, 0, count, R.hello_body([U], {})))
                wait_until(lambda n=n: handled(rec) > n, f"HELLO {n} handled")
            ((_, why),) = rec.refused()
    finally:
        for sock in socks:
            sock.close(linger=0)
        ctx.term()
    assert "a HELLO says client rank 0 of 2, where its first HELLO said 4 client ranks." in why
    assert "rank 0 of 1" not in why
