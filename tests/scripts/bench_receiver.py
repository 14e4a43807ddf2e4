"""Receive cost of the stream receiver against a raw pyzmq PULL loop, in one run.

    python tests/scripts/bench_receiver.py [--small N] [--large N] [--repeat R]

One sender process pushes pre-encoded messages as fast as it can (the same bytes for
both receivers); the clock runs from the sender's go to the last message received.

* 1 KB INLINE DATA (one frame): msgs/s into a FIFO of 4096 drained by a consumer
  thread in batches of 512, versus ``recv()`` and discard.
* 1 MB DATA in two frames: GB/s into a FIFO of 64 drained by a consumer thread in
  batches of 16, versus ``recv(); recv(copy=False)`` and discard.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import threading
import time

import numpy as np
import zmq

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


def _messages(nbytes: int, n: int, inline: bool) -> list[list[bytes]]:
    elems = nbytes // 4
    spec = P.FieldSpec("u", np.dtype("<f4"), (elems,))
    payload = np.arange(elems, dtype="<f4").tobytes()
    out = [[P.encode_hello(1, 0, 1, [spec])]]
    for t in range(n):
        head = P.encode_data_header(1, t, 0, 1, b"u", 1, (elems,), 0, elems, inline)
        out.append([head + payload] if inline else [head, payload])
    out.append([P.encode_bye(1, 0, 1, n)])
    return out


def _sender(endpoint: str, nbytes: int, n: int, inline: bool, go: mp.Event) -> None:
    msgs = _messages(nbytes, n, inline)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(endpoint)
    go.wait()
    for frames in msgs:
        if len(frames) == 1:
            sock.send(frames[0])
        else:
            sock.send(frames[0], zmq.SNDMORE)
            sock.send(frames[1], copy=False)
    sock.close(linger=-1)
    ctx.term()


def _start_sender(endpoint: str, nbytes: int, n: int, inline: bool) -> tuple[mp.Process, float]:
    mpc = mp.get_context("spawn")
    go = mpc.Event()
    proc = mpc.Process(target=_sender, args=(endpoint, nbytes, n, inline, go))
    proc.start()
    time.sleep(1.0)  # connected and messages encoded
    t0 = time.perf_counter()
    go.set()
    return proc, t0


def raw(nbytes: int, n: int, inline: bool) -> float:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.RCVHWM, 1000)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    proc, t0 = _start_sender(f"tcp://127.0.0.1:{port}", nbytes, n, inline)
    recv = sock.recv
    for _ in range(n + 2):
        recv()
        if sock.getsockopt(zmq.RCVMORE):
            recv(copy=False)
    dt = time.perf_counter() - t0
    proc.join()
    sock.close()
    ctx.term()
    return dt


def receiver(nbytes: int, n: int, inline: bool, capacity: int, batch: int) -> float:
    buf = FIFOBuffer(capacity)
    rec = Receiver(buf, config=ReceiverConfig(expected_simulations=1))
    rec.start()
    assert rec.endpoint is not None

    def drain() -> None:
        while buf.get_batch(batch):
            pass

    consumer = threading.Thread(target=drain, daemon=True)
    consumer.start()
    proc, t0 = _start_sender(rec.endpoint, nbytes, n, inline)
    while not buf.closed:
        time.sleep(0.002)
    dt = time.perf_counter() - t0
    proc.join()
    consumer.join()
    assert rec.telemetry()["samples_put"] == n, rec.telemetry()
    rec.stop()
    return dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=200_000, help="1 KB messages")
    parser.add_argument("--large", type=int, default=2000, help="1 MB messages")
    parser.add_argument("--repeat", type=int, default=3)
    a = parser.parse_args()
    print(f"{'case':<34}{'raw':>14}{'receiver':>14}{'ratio':>8}")
    for _ in range(a.repeat):
        r, m = raw(1024, a.small, True), receiver(1024, a.small, True, 4096, 512)
        print(
            f"{'1 KB INLINE (msgs/s)':<34}{a.small / r:>14,.0f}{a.small / m:>14,.0f}{r / m:>8.2f}"
        )
    gb = a.large * (1 << 20) / 1e9
    for _ in range(a.repeat):
        r, m = raw(1 << 20, a.large, False), receiver(1 << 20, a.large, False, 64, 16)
        print(f"{'1 MB two frames (GB/s)':<34}{gb / r:>14.2f}{gb / m:>14.2f}{r / m:>8.2f}")


if __name__ == "__main__":
    main()
