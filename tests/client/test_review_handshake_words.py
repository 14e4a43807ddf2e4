"""What the handshake monitors (`client.handshake.Handshakes`) conclude from handshakes
that fail without a detail, and the words for a silent peer:

* a client without a CURVE key whose receiver completed a handshake, then failed two
  without detail (its trainer dying: libzmq ends the handshakes of the reconnections it
  accepts while it closes) was called "not a melissa-trainer receiver ... check the
  endpoint" (`NOT_RECEIVER_DROPS`) although it is one: no refusal now, its disconnection
  decides (`patience.PeerWatch`). Failed before the change;
* a peer that never completed one still is `NOT_RECEIVER_DROPS`, and a keyed client's
  failures without detail still are a refusal (a trainer restarted there with another
  key: the key advice);
* `NOT_RECEIVER` (silent: TCP accepted, no handshake) no longer says "not a receiver"
  as certain: a trainer whose process is stopped is silent too.

The monitor's events are fed from a socket standing in for libzmq's monitor, so that
the order of events is the test's, not a race's."""

from __future__ import annotations

import zmq
from fed_monitor import ENDPOINT, fed

from melissa_trainer.client.handshake_words import (
    NOT_RECEIVER,
    NOT_RECEIVER_DROPS,
    UNDETAILED_PLAIN,
)

FAILED = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL


def after(context: zmq.Context, keyed: bool, *events: int) -> str | None:
    """What `Handshakes.refused` says of a socket (`keyed`: with a CURVE server key)
    whose monitor reported `events`, in order."""
    return fed(context, keyed, [(event, 0) for event in events]).refused([ENDPOINT])


def test_a_keyless_receiver_that_completed_a_handshake_is_not_called_not_a_receiver(
    context: zmq.Context,
) -> None:
    events = (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED)
    said = after(context, False, *events, zmq.EVENT_CONNECTED, FAILED, FAILED)
    assert said is None, said  # (before: "to E: not a melissa-trainer receiver ...")


def test_a_keyless_peer_that_never_completed_one_is_not_a_receiver(
    context: zmq.Context,
) -> None:
    said = after(context, False, zmq.EVENT_CONNECTED, FAILED, FAILED)
    assert said == f"to {ENDPOINT}: {NOT_RECEIVER_DROPS}", said


def test_a_keyed_client_s_failures_without_detail_stay_a_refusal(context: zmq.Context) -> None:
    events = (zmq.EVENT_CONNECTED, zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED)
    said = after(context, True, *events, zmq.EVENT_CONNECTED, FAILED, FAILED)
    assert said is not None and "the server key does not match" in said, said
    # (without a detail it may be a plain receiver's lost mismatch: its advice too)
    assert said.endswith(f"; or {UNDETAILED_PLAIN}"), said


def test_a_silent_peer_may_be_a_stopped_trainer() -> None:
    assert NOT_RECEIVER.startswith("not a melissa-trainer receiver (it accepted a TCP")
    assert "unless it is a trainer whose process is stopped (SIGSTOP, a suspended job)" in (
        NOT_RECEIVER
    )
