"""A trainer that ingests at the pace of a client's close (`drain_slowly`): what the close
tests of the Python and C clients share (tests/client/test_close_progress.py,
tests/c/test_c_close_progress.py)."""

from __future__ import annotations

import contextlib
import threading
import time

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

__all__ = ["drain_slowly"]


def drain_slowly(
    receiver: Receiver,
    buffer: FIFOBuffer,
    taken: list[tuple[int, int]],
    closed: threading.Event,
    steps: int,
    every: int = 2,
) -> threading.Thread:
    """A started daemon thread that takes one sample from `buffer` each time the
    receiver's follow socket has answered `every` more receipt questions (the trainer's
    pace, tied to the close's questions), and at once once `closed` is set, until
    `steps` were taken (150 s at the most); what it took, as (simulation id, time step),
    goes to `taken`. The receiver must have a follow socket (a rendezvous directory)."""
    follow = receiver._follow
    assert follow is not None

    def run() -> None:
        mark, until = follow.answered, time.monotonic() + 150
        while len(taken) < steps and time.monotonic() < until:
            if follow.answered < mark + every and not closed.is_set():
                time.sleep(0.005)
                continue
            mark = follow.answered
            with contextlib.suppress(TimeoutError):
                for sample in buffer.get_batch(1, timeout=0.05):
                    taken.append((int(sample["simulation_id"]), int(sample["time_step"])))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread
