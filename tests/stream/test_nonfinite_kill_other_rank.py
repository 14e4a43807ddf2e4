"""Under ``nonfinite="fail"`` rank 0's receiver fails a simulation that sent NaN, and rank
0's launcher kills it. Rank 0's receiver said that close in one INFO line naming the
cause; rank 1's, which had a connection of the same simulation, did not fail it and
warned of a loss with the paragraph of causes ("its connection closed before its BYE:
the process ended without it ... that data is lost"), which a user reads as a second,
unexplained failure. Rank 0 now says its failures in the rendezvous directory
(`stream.nonfinite_kills`), and rank 1 says the kill's close in one INFO line naming rank
0's failure. A later attempt that dies on its own is still warned of, the warning naming
the kill as a possible cause (rank 1 cannot tell it from the killed attempt's connection
whose HELLO it read late).

Two real receivers (rank 0 and rank 1 of 2, their sockets, monitors and rendezvous
directory), the simulation raw PUSH sockets (the reference protocol's frames: step t to
rank t % 2), the launcher played by the test: it reads rank 0's `refused`, as
`Supervisor.check_data` does, then kills (closes the sockets without a BYE).
tests/stream/test_nonfinite_kill_other_rank_study.py runs it with a real launcher and
solver."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from nonfinite_runs import two_fail_ranks
from waiting import wait_until

from melissa_trainer.stream.nonfinite_kills import (
    NONFINITE_KILLS_FILE,
    NonfiniteKills,
    clear_nonfinite_kills,
)
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.study.launch import receiver_notices

U = R.Field("u", "<f4", (4,))
SID = 5
LOGGER = "melissa_trainer.stream.receiver"
KILL_LINE = (
    "simulation 5 client rank 0: connection closed before its BYE: killed by the launcher, "
    "{who} having failed it for NaN or Inf (nonfinite='fail') (receiver of rank {rank})"
)


def step(t: int, value: float) -> bytes:
    """DATA of step `t` of simulation `SID`, every value `value`, not flagged finite
    (the receiver checks it)."""
    values = np.full(4, value, np.float32).tobytes()
    return R.part_header(R.DATA, SID, t, 0, 1, U, 0, U.size, True) + values


def attempt(ctx: zmq.Context, ranks: tuple[Receiver, Receiver], first: int = 0) -> list[zmq.Socket]:
    """An attempt of simulation `SID` connected to both ranks, its HELLO and step
    `first` (even) sent to rank 0, its HELLO and the next step to rank 1; returned once
    both steps are in (its HELLO read on each rank: the close that follows is that
    HELLO's connection's)."""
    put = [rank.telemetry()["samples_put"] for rank in ranks]
    socks = [ctx.socket(zmq.PUSH) for _ in ranks]
    for t, (sock, rank) in enumerate(zip(socks, ranks, strict=True)):
        sock.connect(str(rank.endpoint))
        sock.send(R.encode_hello(SID, 0, 1, R.hello_body([U], {})))
        sock.send(step(first + t, float(t)))
    for n, rank in enumerate(ranks):
        stepped = lambda r=rank, k=put[n] + 1: r.telemetry()["samples_put"] == k  # noqa: E731
        wait_until(stepped, f"rank {n}'s step")
    return socks


@pytest.mark.timeout(90)
def test_rank_1_says_the_kill_of_a_simulation_rank_0_failed_for_nan_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    ctx = zmq.Context()
    try:
        with two_fail_ranks(tmp_path) as ranks:
            rank0, rank1 = ranks
            socks = attempt(ctx, ranks)
            socks[0].send(step(2, float("nan")))  # rank 0's share: it fails the simulation
            wait_until(lambda: [s for s, _ in rank0.refused()] == [SID], "rank 0's failure")
            for sock in socks:  # the launcher's kill: no BYE
                sock.close(linger=0)
            for n, rank in enumerate(ranks):
                lost = lambda r=rank: r.telemetry()["connections_lost"] == 1  # noqa: E731
                wait_until(lost, f"rank {n}'s close judged")
            rank1.check()  # (its own stream is fine: the NaN never came to it)
    finally:
        ctx.term()
    said = [
        (r.levelno, r.getMessage()) for r in caplog.records if "before its BYE" in r.getMessage()
    ]
    assert sorted(said) == sorted(
        [
            (logging.INFO, KILL_LINE.format(who="this receiver", rank=0)),
            (logging.INFO, KILL_LINE.format(who="rank 0's receiver", rank=1)),
        ]
    ), said


@pytest.mark.timeout(90)
def test_a_later_attempt_dead_on_its_own_is_warned_of_naming_the_kill_as_a_possible_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Rank 1 counts rank 0's failures of the simulation at each HELLO and at its
    close: the restart's did not grow, so its close is not said to be a kill; since the
    killed attempt's HELLO may have been read late (after rank 0's failure), the
    warning names that kill as a possible cause. Rank 0, which knows, says nothing of it."""
    caplog.set_level(logging.INFO, LOGGER)
    ctx = zmq.Context()
    try:
        with two_fail_ranks(tmp_path) as ranks:
            rank1 = ranks[1]
            first = attempt(ctx, ranks)
            first[0].send(step(2, float("nan")))
            wait_until(lambda: len(ranks[0].refused()) == 1, "rank 0's failure")
            for sock in first:
                sock.close(linger=0)
            wait_until(lambda: rank1.telemetry()["connections_lost"] == 1, "the kill's close")
            restart = attempt(ctx, ranks, 2)  # (new steps: 0 and 1 would be duplicates)
            for sock in restart:  # it dies on its own, without its BYE
                sock.close(linger=0)
            for n, rank in enumerate(ranks):
                lost = lambda r=rank: r.telemetry()["connections_lost"] == 2  # noqa: E731
                wait_until(lost, f"rank {n}'s closes judged")
    finally:
        ctx.term()
    warned = [
        (r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.WARNING and "BYE" in r.getMessage()
    ]
    assert len(warned) == 2, warned
    by_rank = {m[-2]: m for m in warned}  # (each ends "(receiver of rank N)")
    maybe = "rank 0's receiver failed this simulation for NaN or Inf earlier in the run"
    assert maybe in by_rank["1"] and "this close may be that kill" in by_rank["1"], by_rank
    assert maybe not in by_rank["0"], by_rank
    assert by_rank["1"].startswith("simulation 5 client rank 0: its connection closed before")


def test_the_word_is_kept_only_where_another_rank_needs_it(tmp_path: Path) -> None:
    assert NonfiniteKills.for_receiver(tmp_path, "r", 1, "fail") is None  # one rank
    assert NonfiniteKills.for_receiver(None, "r", 2, "fail") is None  # no rendezvous
    assert NonfiniteKills.for_receiver(tmp_path, "r", 2, "refuse") is None  # fails none
    told = NonfiniteKills.for_receiver(tmp_path, "r", 2, "fail")
    heard = NonfiniteKills(tmp_path, "r")
    assert told is not None and heard.failures(3) == 0  # (no file: no failure)
    told.announce(3)
    told.announce(4)
    told.announce(3)
    assert (heard.failures(3), heard.failures(4), heard.failures(5)) == (2, 1, 0)
    assert NonfiniteKills(tmp_path, "other run").failures(3) == 0  # another run's word
    with (tmp_path / NONFINITE_KILLS_FILE).open("a") as f:
        f.write("3")  # a line being written: not counted until it ends
    assert heard.failures(3) == 2
    clear_nonfinite_kills(tmp_path)
    assert heard.failures(3) == 0


def test_an_earlier_runs_word_is_cleared_before_the_study_launches(tmp_path: Path) -> None:
    """A study outside a trainer has no run id ("-") to tell an earlier run's word from
    its own: rank 0 removes it before it launches anything (`receiver_notices`)."""
    NonfiniteKills(tmp_path, None).announce(7)
    assert NonfiniteKills(tmp_path, None).failures(7) == 1
    receiver_notices(tmp_path)
    assert NonfiniteKills(tmp_path, None).failures(7) == 0
