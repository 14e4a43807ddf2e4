"""A hand-off of a restart's failure, read by rank 0 before that restart's HELLO.

Rank 0 failed attempt 1 of a simulation (its NaN); the launcher restarted it; attempt 2
sent NaN to rank 1 only, whose receiver handed the failure to rank 0
(`stream.nonfinite_handoff`) before rank 0 had read attempt 2's HELLO (rank 0 behind on
its socket). Rank 0, still on the failed attempt 1, took it for a late echo of attempt
1 and dropped it: attempt 2 was never failed, its NaN step never marked on rank 1, and
it ended as a simulation whose data did not all arrive (work lost). The hand-off now
carries the attempt as rank 1 counts them (`NonFiniteGuard.attempt`: HELLOs read), and
rank 0 holds it until it has read that attempt's HELLO, then fails it.

The other order of the same files is kept apart: rank 1, kept busy, reads attempt 1's
HELLO only after rank 0 failed it, and hands its failure then (rank 1 read the same
count of rank 0's failures as for a restart): that is attempt 1's echo, dropped, and
the restart is not failed for it.

Two real receivers (rank 0 and rank 1 of 2, their sockets and rendezvous directory),
raw PUSH sockets for the simulation (the reference protocol's frames: step t to rank
t % 2), the launcher played by the test (it reads rank 0's `refused`). The orders are
forced by sending each rank its messages only once the other's effect is seen."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from nonfinite_runs import two_fail_ranks
from waiting import wait_until

from melissa_trainer.stream.log_summary import LogSummary
from melissa_trainer.stream.nonfinite import NonFiniteGuard
from melissa_trainer.stream.nonfinite_handoff import HANDOFF_FILE
from melissa_trainer.stream.nonfinite_kills import fresh_lines
from melissa_trainer.stream.receiver import Receiver

U = R.Field("u", "<f4", (4,))
BAD = 5  # the simulation that sends NaN
OTHERS = iter(range(100, 200))  # simulations whose HELLO makes rank 0 read the hand-offs


def step(t: int, value: float) -> bytes:
    """DATA of step `t` of `BAD`, every value `value`, not flagged finite."""
    values = np.full(4, value, np.float32).tobytes()
    return R.part_header(R.DATA, BAD, t, 0, 1, U, 0, U.size, True) + values


def hello(ctx: zmq.Context, rank: Receiver, sid: int = BAD) -> zmq.Socket:
    """A connection of `sid` to `rank`, its HELLO sent."""
    sock = ctx.socket(zmq.PUSH)
    sock.connect(str(rank.endpoint))
    sock.send(R.encode_hello(sid, 0, 1, R.hello_body([U], {})))
    return sock


def hear(ctx: zmq.Context, rank0: Receiver) -> None:
    """Return once rank 0 has read every hand-off written so far: it reads them before
    each HELLO (`IngestLoop._hear_handoffs`), here that of a new simulation."""
    sid = next(OTHERS)
    hello(ctx, rank0, sid)
    wait_until(lambda: sid in rank0.ingest.sims, f"rank 0's HELLO of {sid}")


def handed(directory: Path) -> int:
    """Failures rank 1 has handed so far (lines of its file, less the run id's)."""
    path = directory / f"{HANDOFF_FILE}.1"
    return len(path.read_text().splitlines()) - 1 if path.exists() else 0


def put(rank: Receiver) -> float:
    return rank.telemetry()["samples_put"]


def failed(rank0: Receiver) -> list[int]:
    return [sid for sid, _ in rank0.refused()]


@pytest.mark.timeout(90)
def test_a_restarts_failure_handed_before_rank_0_read_its_hello_fails_the_restart(
    tmp_path: Path,
) -> None:
    ctx = zmq.Context()
    try:
        with two_fail_ranks(tmp_path) as (rank0, rank1):
            first = [hello(ctx, rank0), hello(ctx, rank1)]  # attempt 1
            wait_until(lambda: BAD in rank1.ingest.sims, "rank 1's HELLO of attempt 1")
            first[0].send(step(0, float("nan")))
            wait_until(lambda: failed(rank0) == [BAD], "rank 0's failure of attempt 1")
            # attempt 2 (the launcher's restart): rank 1 only yet, its NaN handed
            restart1 = hello(ctx, rank1)
            restart1.send(step(1, float("nan")))
            wait_until(lambda: handed(tmp_path) == 1, "rank 1's hand-off of attempt 2")
            hear(ctx, rank0)  # read while rank 0 is still on attempt 1 (failed)
            assert failed(rank0) == [BAD]  # (not attempt 2's yet: its HELLO not read)
            # rank 0 catches up: attempt 2's HELLO, then a step of it
            restart0 = hello(ctx, rank0)
            restart0.send(step(2, 2.0))
            wait_until(lambda: put(rank0) == 1, "attempt 2's step on rank 0")
            hear(ctx, rank0)
            assert failed(rank0) == [BAD, BAD]  # (it was [5]: attempt 2's failure dropped)
            # attempt 2's own later NaN on rank 0: the same attempt, not failed again
            restart0.send(step(4, float("nan")))
            wait_until(lambda: rank0.telemetry()["nonfinite_refused"] == 2, "rank 0's NaN")
            hear(ctx, rank0)
            assert failed(rank0) == [BAD, BAD]
            rank0.check()
            rank1.check()
    finally:
        ctx.destroy(linger=0)  # (its sockets closed, a test failed or not)


@pytest.mark.timeout(90)
def test_a_failed_attempts_echo_read_late_by_rank_1_does_not_fail_the_restart(
    tmp_path: Path,
) -> None:
    """Rank 1 reads attempt 1's HELLO only after rank 0 failed it (the count it hands is
    then that of a restart's): its hand-off is attempt 1's, dropped before and after
    rank 0 reads the restart's HELLO."""
    ctx = zmq.Context()
    try:
        with two_fail_ranks(tmp_path) as (rank0, rank1):
            first0 = hello(ctx, rank0)  # attempt 1, to rank 0 only yet
            first0.send(step(0, float("nan")))
            wait_until(lambda: failed(rank0) == [BAD], "rank 0's failure of attempt 1")
            first1 = hello(ctx, rank1)  # its HELLO read late by rank 1
            first1.send(step(1, float("nan")))
            wait_until(lambda: handed(tmp_path) == 1, "rank 1's hand-off of attempt 1")
            hear(ctx, rank0)
            assert failed(rank0) == [BAD]
            restart = [hello(ctx, rank0), hello(ctx, rank1)]  # attempt 2, no NaN
            restart[0].send(step(2, 2.0))
            restart[1].send(step(3, 3.0))
            wait_until(lambda: (put(rank0), put(rank1)) == (1, 1), "attempt 2's steps")
            hear(ctx, rank0)
            assert failed(rank0) == [BAD]  # (attempt 2 not failed for attempt 1's echo)
            rank0.check()
            rank1.check()
    finally:
        ctx.destroy(linger=0)  # (its sockets closed, a test failed or not)


@pytest.mark.timeout(30)
def test_attempts_are_counted_by_the_hellos_of_one_client_rank() -> None:
    """A simulation of two client ranks: each attempt's two HELLOs are one attempt, and
    client rank 1's HELLO read after the attempt failed leaves it failed (it cleared the
    failure: a second failure of the same attempt listed for the launcher)."""
    refused: list[tuple[int, str]] = []
    guard = NonFiniteGuard("fail", LogSummary(logging.getLogger("t"), "r", 30.0), refused)
    guard.launcher = True
    assert (guard.attempt(BAD), guard.helloed(BAD)) == (0, False)
    guard.hello(BAD, 0)
    assert (guard.attempt(BAD), guard.helloed(BAD), guard.helloed(BAD, 2)) == (1, True, False)
    assert guard.failed_elsewhere(None, BAD, 1, "why", 0)  # attempt 1 failed
    guard.hello(BAD, 1)  # its other client rank's HELLO, read late
    assert guard.attempt(BAD) == 1
    assert not guard.failed_elsewhere(None, BAD, 3, "why", 1)  # (still attempt 1's)
    guard.hello(BAD, 1)  # attempt 2: client rank 1 first
    guard.hello(BAD, 0)
    assert (guard.attempt(BAD), guard.helloed(BAD, 2)) == (2, True)
    assert guard.failed_elsewhere(None, BAD, 5, "why", 1)
    assert [sid for sid, _ in refused] == [BAD, BAD]


@pytest.mark.timeout(30)
def test_fresh_lines(tmp_path: Path) -> None:
    """The complete lines of a file through a fresh open, unread while unchanged."""
    path = tmp_path / "f"
    assert fresh_lines(path, None) == (None, None)  # (missing)
    path.write_text("a\nb")
    key, lines = fresh_lines(path, None)
    assert key is not None and lines == ["a"]  # (an unfinished last line left out)
    assert fresh_lines(path, key) == (key, None)  # (unchanged: not read)
    with path.open("a") as f:
        f.write("\nc\n")
    key2, lines = fresh_lines(path, key)
    assert key2 != key and lines == ["a", "b", "c"]
