"""A blocked `send` that gives up on a trainer whose stop record says it stopped for good
raises a `StoppedForGood` that is also the error a close raises for that kind of stop
(`StopSaid.error`), so that what catches a close's error catches a send's too:

* a spare solver (the run reached ``expected_simulations`` without it) that keeps
  streaming: `SimulationNotNeeded`, which its message says to catch to exit 0
  (docs/how-to/own-solver.md). Before, a plain `StoppedForGood`: the ``except
  SimulationNotNeeded`` missed it and the solver exited 1;
* its non-finite sample stopped the trainer: `SimulationRefused` (a ValueError), not
  only a TimeoutError;
* the trainer ended or failed otherwise: `TrainerStopped`.

Real sockets on 127.0.0.1; the receivers are in-process and real (rendezvous file, stop
record written as a trainer's receiver writes it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import running
from stopped_receiver import sent_then_stopped
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning, SimulationNotNeeded
from melissa_trainer.client.admission import SimulationRefused
from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.send_errors import StoppedForGood
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(60)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}
#: only the stop record ends a blocked send: every other bound is far beyond the tests'
#: timeout (60 s), so that a send that waited for one fails by the timeout marker
LONG = 600.0
TUNING = ClientTuning(
    disconnected_timeout=LONG, follow_timeout=LONG, sndhwm=1, failed_close_timeout=1.0
)


def send_until_it_gives_up(client: Client, first: int) -> BaseException:
    """Send from time step `first` on until a send raises; what it raised."""
    u = np.ones(COUNT, np.float32)
    with pytest.raises(TimeoutError) as caught:
        for t in range(first, first + 1000):
            client.send(t, u=u)
    return caught.value


def stopped_send_error(rendezvous: Path, reason: StopReason) -> BaseException:
    """Simulation 5 (external mode), its step 0 taken by a receiver that then stopped
    with `reason` in its stop record; what its next sends raised (`send_until_it_gives_up`
    from step 1), the client closed without a BYE."""
    client, _ = sent_then_stopped(
        FIELDS, 5, TUNING, rendezvous=rendezvous, reason=reason, send_timeout=LONG
    )
    try:
        return send_until_it_gives_up(client, 1)
    finally:
        client.close(bye=False)


def test_a_spare_solver_s_blocked_send_raises_simulation_not_needed(external: Path) -> None:
    """Simulation 7 streams, simulations 0 and 1 finish (the trainer was given 2), the
    stream ends and the receiver stops: 7's next sends fill its queue and give up."""
    buffer = FIFOBuffer(100)
    zeros = np.zeros(COUNT, np.float32)
    with running(
        buffer=buffer, rendezvous_dir=external, run_id="run-a", expected_simulations=2
    ) as receiver:
        spare = Client(FIELDS, simulation_id=7, tuning=TUNING, send_timeout=LONG)
        spare.send(0, u=zeros)
        spare.flush()
        wait_until(lambda: receiver.ingest.samples_put == 1, "the spare's step 0 ingested")
        for sid in (0, 1):
            with Client(FIELDS, simulation_id=sid, tuning=TUNING) as finishing:
                finishing.send(0, u=zeros)
        wait_until(lambda: receiver.ended, "the stream did not end")
        receiver.note_stop(StopReason("end", "end of stream"))
        receiver.stop()
    try:
        error = send_until_it_gives_up(spare, 1)  # (a wait for LONG: past the timeout)
    finally:
        spare.close(bye=False)
    # (what the docs tell a spare solver to catch: before, a plain StoppedForGood)
    assert isinstance(error, SimulationNotNeeded), repr(error)
    assert isinstance(error, StoppedForGood) and isinstance(error, TimeoutError), repr(error)
    assert error.said.kind == "not_needed"
    said = str(error)
    assert "the study ended without needing this simulation" in said, said
    assert "catch SimulationNotNeeded to exit 0" in said, said


def test_a_send_refused_by_its_non_finite_sample_raises_simulation_refused(
    external: Path,
) -> None:
    error = stopped_send_error(
        external, StopReason("nonfinite", "time step 3 of simulation 5 holds NaN", 5, 3)
    )
    assert isinstance(error, SimulationRefused) and isinstance(error, ValueError), repr(error)
    assert isinstance(error, StoppedForGood) and error.said.kind == "refused"
    assert "the trainer stopped on its time step 3" in str(error), str(error)


def test_a_send_whose_trainer_ended_raises_trainer_stopped(external: Path) -> None:
    error = stopped_send_error(external, StopReason("end", "max_steps 7 reached"))
    assert isinstance(error, TrainerStopped) and isinstance(error, StoppedForGood), repr(error)
    assert not isinstance(error, SimulationNotNeeded)
    assert error.said.kind == "ended"


def test_each_kind_s_error_is_one_class_made_once() -> None:
    """The class raised is chosen, not made per raise: the same for the same kind."""
    from melissa_trainer.client.gave_up import StopSaid

    said = StopSaid("tcp://x:1", "not_needed", "r", "d", SimulationNotNeeded)
    kind = StoppedForGood.of(said)
    assert kind is StoppedForGood.of(said) and issubclass(kind, SimulationNotNeeded)
    other = StopSaid("tcp://x:1", "ended", "r", "d", KeyError)  # (no such kind: the base)
    assert StoppedForGood.of(other) is StoppedForGood
    ended = StopSaid("tcp://x:1", "ended", "r", "d", TrainerStopped)
    assert not issubclass(StoppedForGood.of(ended), SimulationNotNeeded)
