"""What the buffer tests share (test_buffer_*.py, test_make_buffer.py): samples
numbered by their id (`smp`, `ids`, `fill`, `drain`), a call run in a thread (`start`),
and a wait until calls are blocked in a buffer (`wait_blocked`)."""

from __future__ import annotations

import threading
import time

import numpy as np

from melissa_trainer.buffers import Buffer

KINDS = ["fifo", "firo", "reservoir"]
SHORT = 0.05  # seconds: timeouts that are expected to expire


def smp(i: int) -> dict[str, np.ndarray]:
    return {"id": np.array(i, dtype=np.int64), "x": np.full(3, i, dtype=np.float32)}


def ids(batch: list[dict[str, np.ndarray]]) -> list[int]:
    return [int(s["id"]) for s in batch]


def fill(buf: Buffer, start: int, stop: int) -> None:
    for i in range(start, stop):
        buf.put(smp(i), timeout=1)


def drain(buf: Buffer, n: int = 1) -> list[int]:
    out: list[int] = []
    while batch := buf.get_batch(n, timeout=1):
        out += ids(batch)
    return out


def start(target, *args) -> tuple[threading.Thread, dict]:
    """Run target in a daemon thread; the dict receives 'result' or 'error'."""
    box: dict = {}

    def run() -> None:
        try:
            box["result"] = target(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def wait_blocked(buf, puts: int = 0, reads: int = 0, timeout: float = 5.0) -> None:
    """Until `puts` puts and `reads` reads are blocked in `buf` (`Buffer.waiting`: the
    calls registered as waiters under the lock before sleeping), or fail."""
    deadline = time.monotonic() + timeout
    while buf.waiting() != (puts, reads):
        assert time.monotonic() < deadline, f"waiting {buf.waiting()}, expected {(puts, reads)}"
        time.sleep(0.001)  # polls the condition; not a guess at how long blocking takes
