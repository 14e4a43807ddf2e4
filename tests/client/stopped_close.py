"""A close whose trainer stops while the close waits for its receipt: the set-up of the
trainer-gone tests of the close receipt (tests/client/test_close_receipt.py,
tests/client/test_never_connected_receipt.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["close_failure", "stop_during_close"]


def stop_during_close(
    rendezvous: Path, simulation_id: int, tuning: ClientTuning
) -> tuple[threading.Thread, list[BaseException]]:
    """A receiver of run ``run-a`` in `rendezvous` (a buffer of 1: it stops reading, the
    BYE unread); a client of `simulation_id` streams 4 steps of ``u`` (4 float64) to it
    and closes in a thread; once the receiver's follow socket holds the close's receipt
    query, the receiver stops. Returns, the receiver stopped, the closing thread (the
    caller joins it: `close_failure`) and the list the close's exception goes to."""
    failed: list[BaseException] = []
    config = ReceiverConfig(rendezvous_dir=rendezvous, run_id="run-a")
    first = Receiver(FIFOBuffer(1), 0, 1, config)
    first.start()
    try:
        client = Client(
            simulation_id=simulation_id, fields={"u": ((4,), np.float64)}, tuning=tuning
        )
        for t in range(4):
            client.send(t, u=np.full(4, t, np.float64))

        def close() -> None:
            try:
                client.close()
            except BaseException as exc:  # noqa: BLE001 - the test's oracle
                failed.append(exc)

        closing = threading.Thread(target=close, daemon=True)
        closing.start()
        follow = first._follow
        assert follow is not None
        wait_until(lambda: bool(follow._held), "the client's receipt query held")
    finally:
        first.stop()
    return closing, failed


def close_failure(closing: threading.Thread, failed: list[BaseException]) -> BaseException:
    """The one exception the close of `stop_during_close` raised, once it ended (60 s)."""
    closing.join(60)
    assert not closing.is_alive()
    (error,) = failed
    return error
