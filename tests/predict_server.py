"""The trainer's side of the serving tests (tests/stream/test_serving_*.py, and the C and
Fortran `mt_predict` tests: tests/c/test_c_predict*.py, test_c_serve_key.py): a real
`PredictServer` of `INPUTS` whose requests a thread answers with ``y = 2 u + VERSION``
(the model stand-in: an oracle a test computes itself), started and stopped in one place.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from melissa_trainer.stream.serving import PredictServer

#: the inputs the server publishes, and the version of every answer
INPUTS = {"u": ((4,), "float32")}
VERSION = 17


def drain(server: PredictServer, stop: threading.Event) -> threading.Thread:
    """A started thread that answers every queued request of `server` with
    ``y = 2 u + VERSION`` until `stop` is set (the caller joins it)."""

    def run() -> None:
        while not stop.is_set():
            if server.wait_pending(0.05):
                for pending in server.take(8):
                    u = pending.request.arrays["u"]
                    server.answer(pending, {"y": (2 * u + VERSION).astype(np.float32)}, VERSION)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@contextmanager
def answering_server(
    rendezvous_dir: Path, *, curve: bool = False, **options: Any
) -> Iterator[tuple[PredictServer, str | None]]:
    """A `PredictServer` of `INPUTS` publishing its serve file in `rendezvous_dir`,
    serving, its requests answered by a thread; with `curve`, CURVE keys of its own.

    Yields the server and its public key (Z85, None without `curve`); `options` go to
    `PredictServer`. On exit the answering thread is joined, then the server stopped,
    whatever happened inside. Skips the test where pyzmq's libzmq has no CURVE.
    """
    keys = None
    if curve:
        if not zmq.has("curve"):
            pytest.skip("pyzmq's libzmq was built without CURVE")
        public, secret = zmq.curve_keypair()
        keys = (secret, public)
    server = PredictServer(INPUTS, rendezvous_dir=rendezvous_dir, curve=keys, **options)
    server.start()
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        server.serving = True
        thread = drain(server, stop)
        yield server, None if keys is None else keys[1].decode("ascii")
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        server.stop()


@contextmanager
def serving_u(rendezvous_dir: Path, dtype: str, **options: Any) -> Iterator[PredictServer]:
    """A serving `PredictServer` of one input ``u`` (4 of `dtype`: a trainer whose inputs
    differ from `INPUTS`' by their dtype, the tests of inputs checked against a serve
    file) publishing in `rendezvous_dir`, answered by `drain`; `options` go to
    `PredictServer` (``bind``). Stopped on exit (its serve file removed)."""
    server = PredictServer({"u": ((4,), dtype)}, rendezvous_dir=rendezvous_dir, **options)
    server.start()
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    try:
        yield server
    finally:
        stop.set()
        thread.join()
        server.stop()
