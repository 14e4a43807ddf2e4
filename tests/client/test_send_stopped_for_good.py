"""A blocked `send` whose trainer's stop record says it stopped for good (the run ended,
or failed) gives up at once, as a close does (`send_wait.StoppedForGood`), in the
close's words, the stop reason first:

* in external mode a client follows restarted trainers (`following`): it treated the
  send's `ReceiverGone` as "follow" even then, and waited `follow_timeout` (here 600 s)
  for a trainer that no one restarts; now it raises at once (this test timed out
  before the change);
* a send blocked on a full queue waited its whole `send_timeout` (or
  `disconnected_timeout`; here 600 s each) although the record said why; now it reads
  the record once a slice (`patience.SLICE`) while a receiver is disconnected, as a
  close does, and gives up (this test timed out before the change).

A trainer merely preempted (its record says ``preempted``: a resumed one will come) is
still waited for: the send is ended by `send_timeout`, not by its record. Following a
restarted trainer: tests/client/test_follow.py, test_rerun_follow_sends.py.

Real sockets on 127.0.0.1; the receiver writes its stop record as a trainer's does."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from stopped_receiver import sent_then_stopped

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.send_errors import ReceiverGone, StoppedForGood
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(30)  # (far below the 600 s a wait before the change took)

COUNT = 1 << 18  # 1 MiB of float32: sent without a copy, held until ZeroMQ lets go
FIELDS = {"u": ((COUNT,), "float32")}
#: the waits a send must not sit out: far beyond the tests' timeout (30 s), so that a
#: send that waited for them fails the test by its timeout marker, whatever the load;
#: the error's type and words say which path ended the wait
LONG = 600.0


def stopped(
    rendezvous: Path, reason: StopReason, tuning: ClientTuning, send_timeout: float | None
) -> Client:
    """A client (simulation 5, external mode: endpoints and run id from `rendezvous`)
    whose receiver took its step 0 and then stopped with `reason` in its stop record;
    once the client saw the disconnection."""
    client, _ = sent_then_stopped(
        FIELDS, 5, tuning, rendezvous=rendezvous, reason=reason, send_timeout=send_timeout
    )
    return client


def send_until_it_gives_up(client: Client) -> TimeoutError:
    """Send until a send raises; the error."""
    u = np.ones(COUNT, np.float32)
    with pytest.raises(TimeoutError) as caught:
        for t in range(1, 1000):
            client.send(t, u=u)
    return caught.value


END = StopReason("end", "max_steps 7 reached")


def says_the_stop_first(said: str) -> None:
    assert said.startswith("simulation 5 rank 0: the trainer stopped before it read time step "), (
        said
    )
    assert "(end: max_steps 7 reached; its stop record in " in said, said
    assert ENDED in said, said  # (the run ended: nothing to run again, htrial19 Xa)
    assert "died" not in said and "follow_timeout" not in said, said


def test_a_following_client_does_not_wait_for_a_trainer_that_stopped_for_good(
    external: Path,
) -> None:
    """The default in external mode: a replay window, so the client follows restarted
    trainers; `disconnected_timeout` short, `follow_timeout` 600 s."""
    tuning = ClientTuning(
        disconnected_timeout=0.5, follow_timeout=LONG, sndhwm=1, failed_close_timeout=1.0
    )
    client = stopped(external, END, tuning, send_timeout=None)
    try:
        assert client._following is not None  # (it follows: the case of the finding)
        error = send_until_it_gives_up(client)
    finally:
        client.close(bye=False)
    assert isinstance(error, StoppedForGood), repr(error)
    assert error.said.kind == "ended"
    says_the_stop_first(str(error))


def test_a_blocked_send_gives_up_as_soon_as_the_stop_record_says_for_good(
    external: Path,
) -> None:
    """`send_timeout` and `disconnected_timeout` 600 s: only the record ends the wait."""
    tuning = ClientTuning(
        disconnected_timeout=LONG, follow_timeout=LONG, sndhwm=1, failed_close_timeout=1.0
    )
    client = stopped(external, END, tuning, send_timeout=LONG)
    try:
        error = send_until_it_gives_up(client)
    finally:
        client.close(bye=False)
    assert isinstance(error, StoppedForGood), repr(error)
    said = str(error)
    says_the_stop_first(said)
    # (blocked, or at a look before it blocked once the disconnection was seen:
    # `SendWait.look`; either at once, on the record)
    assert re.search(r"(s|before it) blocked: no trainer comes back there\)$", said), said


def test_a_preempted_trainer_is_still_waited_for(external: Path) -> None:
    """A ``preempted`` record is not for good (a resumed trainer comes): the blocked send
    waits on, and `send_timeout` (1.5 s; no replay window, so no following) ends it."""
    tuning = ClientTuning(
        disconnected_timeout=None, sndhwm=1, failed_close_timeout=1.0, replay_bytes=0
    )
    reason = StopReason("preempted", "SIGTERM: checkpoint saved")
    client = stopped(external, reason, tuning, send_timeout=1.5)
    try:
        error = send_until_it_gives_up(client)
    finally:
        client.close(bye=False)
    assert not isinstance(error, ReceiverGone), repr(error)
    said = str(error)
    assert "within send_timeout=1.5 s" in said and "stopped before it read" not in said, said
    # (why the receiver went, as the send that disconnected_timeout ends says it)
    assert "(the trainer was preempted (SIGTERM: checkpoint saved; its stop record" in said, said
