"""Run as a script by test_serving_collector.py: a `PredictServer` answering large
predictions (64 KiB, pyzmq's zero-copy size) from another thread while pyzmq's
garbage-collector thread is stalled (its `refs.pop` waits on an event), as one starved
of Python's lock would be. Prints "ANSWERED n" once `COUNT` answers came back to a
client in this process, then releases the collector; exit 0.

Why a script: with answers handed to the I/O thread without a copy, each lets go of
its buffer through the collector's queue (1,000 deep at each end: a blocking send once
full), and the thread that lets go may be the server's I/O thread, holding Python's
lock: the whole process then hangs (the collector waits for that lock), and only a
parent process can tell."""

from __future__ import annotations

import sys
import threading

import numpy as np
import zmq
import zmq.utils.garbage

from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.wire import predict as wire

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
WINDOW = 64  # requests in flight


class StalledRefs(dict):  # type: ignore[type-arg]
    """The collector's table of buffers: its `pop` (the collector's thread's, once a
    buffer is let go of) waits until `release` is set."""

    release = threading.Event()

    def pop(self, *args: object) -> object:
        self.release.wait()
        return super().pop(*args)


def main() -> int:
    collector = zmq.utils.garbage.gc
    if not collector.is_alive():
        collector.start()  # (a start replaces the table: started first)
    collector.refs = StalledRefs(collector.refs)
    server = PredictServer({"u": ((16,), "float32")})
    server.start()
    server.serving = True
    out = np.ones(16384, dtype="<f4")  # 64 KiB: sent without a copy by pyzmq
    done = threading.Event()

    def answering() -> None:
        while not done.is_set():
            if server.wait_pending(0.05):
                for pending in server.take(WINDOW):
                    server.answer(pending, {"y": out}, 1)

    threading.Thread(target=answering, daemon=True).start()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(str(server.endpoint))
    u = {"u": np.zeros(16, dtype="<f4")}
    sent = answered = 0
    while answered < COUNT:
        while sent < COUNT and sent - answered < WINDOW:
            dealer.send_multipart(wire.encode_predict(0, sent, 60_000, None, u))
            sent += 1
        dealer.recv_multipart(copy=False)
        answered += 1
    print("ANSWERED", answered, flush=True)
    StalledRefs.release.set()
    done.set()
    dealer.close(0)
    ctx.term()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
