"""What the C client's close tests share (tests/c/test_c_close_*.py): the receivers they
close to and the solvers (`mt_script`, `Script`) that queued steps for them.

* A real receiver with a follow socket (`c_close_receiver`): its rendezvous directory
  gives the solver its endpoint and answers the close's receipt questions
  (test_c_close_progress.py, test_c_close_receipt_cap.py); the solver for it:
  `unbatched_script`.
* A plain PULL socket read at a pace (`slow_pull`): the close's delivery phase
  (test_c_close_cap.py, test_c_close_delivery_progress.py,
  test_c_close_unbatched_progress.py); the solver for it: `queued_script`, and its close
  while the socket reads: `close_while_read`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from helpers import running
from predict_script import Script
from slow_pull import SlowPull

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver

__all__ = [
    "C_FIELDS",
    "c_close_receiver",
    "close_while_read",
    "queued_script",
    "unbatched_script",
]

#: the field `unbatched_script` sends (``field u 1 1 4``: 4 float32 a step)
C_FIELDS = {"u": ((4,), np.float32)}


@contextmanager
def c_close_receiver(rendezvous: Path, buffer: FIFOBuffer | None = None) -> Iterator[Receiver]:
    """A started receiver for the solvers of `unbatched_script` on `buffer` (a FIFO of 2
    by default: a reader that does not take keeps the close's receipts at "not yet"), its
    follow socket published in `rendezvous` for run "run-a", taking the solver's values
    as they are (``nonfinite="accept"``); stopped on exit."""
    buffer = FIFOBuffer(2) if buffer is None else buffer
    with running(
        buffer, rendezvous_dir=rendezvous, fields=C_FIELDS, run_id="run-a", nonfinite="accept"
    ) as receiver:
        yield receiver


def unbatched_script(
    exe: Path, rendezvous: Path, sid: int, steps: int, close_timeout: float
) -> Script:
    """A solver started by hand (its endpoint from `rendezvous`) that sends `steps` steps
    of simulation `sid`, each its own DATA (``batching 0 0.02``), with `close_timeout`:
    its lines sent, not waited for; the test sends the close."""
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
    sends = [f"send {t} u 1 4 {t}" for t in range(steps)]
    script.send(f"id {sid}", "field u 1 1 4", "batching 0 0.02", f"close_timeout {close_timeout}",
                "start", *sends)  # fmt: skip
    return script


def queued_script(
    exe: Path,
    endpoint: str,
    sid: int,
    steps: int,
    count: int,
    batching: str,
    close_timeout: float,
) -> Script:
    """A solver that queued `steps` steps of `count` float64 of simulation `sid` for
    `endpoint` (a `SlowPull`'s), with ``batching`` `batching` ("BYTES SECONDS") and
    `close_timeout` (and a disconnected timeout of 600 s: only the close timeout counts),
    every line answered 0; not closed yet (killed if a line failed)."""
    script = Script(exe)
    try:
        sends = [f"send {t} u 2 {count} {t % 200}" for t in range(steps)]
        last = script.send(f"id {sid}", f"endpoints {endpoint}", f"batching {batching}",
                           f"close_timeout {close_timeout}", "disconnected_timeout 600",
                           f"field u 2 1 {count}", "start", *sends)  # fmt: skip
        assert script.wait(last)[-1].strip() == "0", script.seen[last]
    except BaseException:
        script.kill()
        raise
    return script


def close_while_read(script: Script, receiver: SlowPull) -> float:
    """Start `receiver` reading at its pace, close `script`'s client, which must return 0
    (MT_OK), then read the rest at once until its BYE and end the script. The seconds from
    just before the receiver's first read to the close's return: a lower bound set by the
    receiver's own pace (every read of it came after), deterministic under load. The
    script is killed on any failure."""
    try:
        began = time.monotonic()
        receiver.start()
        done = script.send("close")
        status = script.wait(done)[-1]
        took = time.monotonic() - began
        assert status.strip() == "0", status  # (before: 8, MT_ETIMEDOUT)
        receiver.until_byes(1)
        script.finish(60)
    finally:
        script.kill()
    return took
