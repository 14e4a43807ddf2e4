"""A receiver that reads one message per tick of its own pace (`SlowPull`): a trainer
alive and taking a client's messages slowly, as a resumed trainer ingesting a replay at
its sample-to-insert pace does, for the tests of a close's delivery phase
(tests/client/test_close_delivery_progress.py, tests/c/test_c_close_delivery_progress.py).

A plain PULL socket with a receive high-water mark of 1 and a small kernel buffer, so
that what the client queued stays on its side; it records each (simulation, step) of
the DATA it reads, and the BYEs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import zmq

from melissa_trainer import wire as protocol

__all__ = ["SlowPull", "slow_pull"]


class SlowPull:
    """Reads nothing until `start`, then one message each `pace` seconds (its trainer's
    pace, not a test's wait), and everything at once from `hurry` on; `stuck`: reads
    nothing ever."""

    def __init__(self, context: zmq.Context, pace: float) -> None:
        self.sock = context.socket(zmq.PULL)
        self.sock.setsockopt(zmq.RCVHWM, 1)
        self.sock.setsockopt(zmq.RCVBUF, 1 << 16)  # (the kernel holds little: the client does)
        self.sock.setsockopt(zmq.LINGER, 0)
        port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.endpoint = f"tcp://127.0.0.1:{port}"
        self.pace = pace
        self.keys: list[tuple[int, int]] = []  # (simulation, step) of each DATA read
        self.byes: list[protocol.Bye] = []
        self.hurry, self.stop = threading.Event(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLIN)
        while not self.stop.is_set():
            if not self.hurry.is_set():
                self.hurry.wait(self.pace)  # (the trainer's pace: one message per tick)
            if not poller.poll(100):
                continue
            frames = [bytes(f.buffer) for f in self.sock.recv_multipart(copy=False)]
            first = protocol.decode(frames[0], frames[1] if len(frames) == 2 else None, 1 << 30)
            if isinstance(first, protocol.Data):
                self.keys.append((first.simulation_id, first.time_step))
            elif isinstance(first, protocol.Bye):
                self.byes.append(first)
            elif isinstance(first, protocol.Batch):  # (a frame per field: the first's steps)
                self.keys += [(first.simulation_id, int(t)) for t in first.steps]

    def until_byes(self, count: int, timeout: float = 60.0) -> None:
        """Read at once until `count` BYEs came (at most `timeout` s)."""
        self.hurry.set()
        done = threading.Event()

        def watch() -> None:
            while len(self.byes) < count and not self.stop.is_set():
                self.stop.wait(0.01)
            done.set()

        threading.Thread(target=watch, daemon=True).start()
        assert done.wait(timeout), f"{len(self.byes)} BYE(s) of {count} in {timeout} s"

    def close(self) -> None:
        self.stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self.sock.close(0)


@contextmanager
def slow_pull(pace: float) -> Iterator[SlowPull]:
    """A `SlowPull` (not started) in a context of its own, closed on exit."""
    context = zmq.Context()
    receiver = SlowPull(context, pace)
    try:
        yield receiver
    finally:
        receiver.close()
        context.term()
