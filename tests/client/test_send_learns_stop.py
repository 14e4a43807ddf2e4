"""A send whose queue is NOT full learns that its trainer stopped for good (its stop
record says "end", "error": no trainer comes back there) and fails as a blocked send
does (`send_wait.StoppedForGood`, the close's sentence), within `LOOK_EVERY` seconds of
the record being visible (`SendWait.look`, read while a receiver is disconnected).

Before, only a send that found ZeroMQ's queue full read the record: a user trial's solver
started by hand, 10 ms a step, computed 2,400 steps (27 s) into the queue after its
trainer ended; at 1 s a step, 40 minutes. The oracle: the sends made after the end are
bounded by the solver's pace, whatever the queue's size (`sndhwm` 1000, far more than
the bound): before the change, none of the sends here failed.

Controls: a trainer preempted (record "preempted": a resumed trainer is followed) and a
live trainer: sends spanning several looks go on.

Real sockets on 127.0.0.1; the receiver is in-process and real, and writes its stop
record as a trainer's receiver does (`stopped_receiver.sent_then_stopped`)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from stopped_receiver import sent_then_stopped
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.send_errors import StoppedForGood
from melissa_trainer.client.send_wait import LOOK_EVERY
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

FIELDS = {"u": ((16,), "float32")}  # (small: batched, the queue never fills)
#: a queue far larger than the bound, and no other bound a send could give up on
TUNING = ClientTuning(
    sndhwm=1000, disconnected_timeout=600.0, follow_timeout=600.0, failed_close_timeout=1.0
)
#: the solver's seconds per step: below `batch_delay` (0.02 s: the fast path) and above it
#: (the general path), each path looks
PACES = [0.01, 0.05]


def paced(pace: float) -> None:
    """The solver's step of computation (`pace` seconds at least: never shorter)."""
    threading.Event().wait(pace)


@pytest.mark.parametrize("pace", PACES)
@pytest.mark.parametrize("code", ["end", "error"])
def test_a_send_with_room_in_its_queue_fails_once_the_trainer_stopped_for_good(
    external: Path, pace: float, code: str
) -> None:
    """The record is visible and the receiver down when `sent_then_stopped` returns: the
    sends after it (each `pace` s apart at least) fail within `LOOK_EVERY` s, so after
    at most LOOK_EVERY / pace + 2 of them; a queue of 1000 would take them all."""
    reason = StopReason(code, "max_steps 200 reached")
    client, _ = sent_then_stopped(FIELDS, 5, TUNING, rendezvous=external, reason=reason)
    bound = math.ceil(LOOK_EVERY / pace) + 2
    made = 0
    u = np.ones(16, np.float32)
    try:
        with pytest.raises(StoppedForGood) as caught:
            for t in range(1, 2 * bound + 50):
                paced(pace)
                made += 1
                client.send(t, u=u)
    finally:
        client.close(bye=False)
    assert made <= bound, (made, bound)
    said = str(caught.value)
    assert said.startswith("simulation 5 rank 0: "), said
    assert f"({code}: max_steps 200 reached; its stop record in " in said, said
    assert said.endswith("(the send gave up before it blocked: no trainer comes back there)"), said


def sends_across_looks(client: Client, first: int, pace: float) -> int:
    """Send from step `first`, `pace` s apart, until 3 * `LOOK_EVERY` s have passed (so
    that several sends looked); how many were sent. Any error fails the test."""
    u = np.ones(16, np.float32)
    end = time.monotonic() + 3 * LOOK_EVERY
    t = first
    while time.monotonic() < end:
        paced(pace)
        client.send(t, u=u)
        t += 1
    return t - first


@pytest.mark.parametrize("pace", PACES)
def test_a_preempted_trainer_does_not_fail_a_send_with_room(external: Path, pace: float) -> None:
    """A resumed trainer is followed: the record "preempted" fails no send."""
    reason = StopReason("preempted", "SIGTERM: checkpoint saved")
    client, _ = sent_then_stopped(FIELDS, 5, TUNING, rendezvous=external, reason=reason)
    try:
        assert sends_across_looks(client, 1, pace) > 0
    finally:
        client.close(bye=False)


def test_a_live_trainer_takes_every_send(external: Path) -> None:
    """A receiver running (no stop record): the sends across several looks all arrive."""
    room = FIFOBuffer(1000)
    with running(room, rendezvous_dir=external, run_id="run-a"):
        client = Client(FIELDS, simulation_id=5, tuning=TUNING)
        try:
            sent = sends_across_looks(client, 0, 0.01)
            client.flush()
            wait_until(lambda: room.stats().put == sent, "every step taken")
        finally:
            client.close(bye=False)


def test_a_flush_learns_the_trainer_stopped_for_good(external: Path) -> None:
    """`Client.flush` looks at the stop records as a send does (`Transport.flush`; the C
    client's mt_flush): a solver whose last calls are flushes, nothing queued, fails in
    the send's words, "any messages still queued at this flush" for the step. Before,
    each flush returned after the
    trainer ended ("end": no trainer comes back there). The record is visible and the
    receiver down when `sent_then_stopped` returns: the first flush fails."""
    reason = StopReason("end", "max_steps 200 reached")
    client, _ = sent_then_stopped(FIELDS, 5, TUNING, rendezvous=external, reason=reason)
    try:
        with pytest.raises(StoppedForGood) as caught:
            client.flush()
    finally:
        client.close(bye=False)
    said = str(caught.value)
    assert said.startswith("simulation 5 rank 0: "), said
    # (not "a message and those queued before it": a flush sends no message, and this
    # one found nothing queued)
    assert "before it read any messages still queued at this flush, which were" in said, said
    assert "(end: max_steps 200 reached; its stop record in " in said, said
    assert said.endswith("(the send gave up before it blocked: no trainer comes back there)"), said
