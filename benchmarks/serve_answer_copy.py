"""The cost of copying each serving reply (`PredictServer._reply`: ``copy=True``, why in
`melissa_trainer.stream.serving_bind`), against the same replies sent without a copy
(the baseline: the code before, shared with libzmq and let go of through pyzmq's
collector thread).

A real `PredictServer` (one rank, input ``u`` of 16 float32) answers with an output of
`--sizes` bytes, from an answering thread of this process (as the training thread
does: `take` 64, `answer` each). A client process keeps `--window` PREDICTs in flight
on a DEALER and reads `--answers` PREDICTIONs; the clock runs from its first send to
its last answer. A and B alternate (A B A B ...) `--rounds` times per size, medians
compared; ratio = ours / baseline (answers per second, higher is better). Sizes under
64 KiB are left out: pyzmq copies them either way. `--json` prints ``{"rows": [...]}``,
the benchmarks' rows (``case``, ``ours``, ``baseline``, ``unit``, ``ratio``,
``target``: none, the figures are for people to read); each arm's rounds go to stderr.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import threading
import time
from typing import Any

import numpy as np


def client(endpoint: str, answers: int, window: int, out: Any) -> None:
    """Ask `answers` predictions, `window` in flight; put the answers per second."""
    import zmq

    from melissa_trainer.wire import predict as wire

    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(endpoint)
    u = {"u": np.zeros(16, dtype="<f4")}
    sent = got = 0
    start = time.perf_counter()
    while got < answers:
        while sent < answers and sent - got < window:
            dealer.send_multipart(wire.encode_predict(0, sent, 60_000, None, u))
            sent += 1
        dealer.recv_multipart(copy=False)
        got += 1
    out.put(answers / (time.perf_counter() - start))
    dealer.close(0)
    ctx.term()


def zero_copy_reply(self: Any, identity: bytes | None, frames: list[Any]) -> None:
    """`PredictServer._reply` (`ServingSockets.reply`) before the copy (the baseline)."""
    socks = self._sockets
    if socks is None:
        return
    if threading.current_thread() is self._thread:
        socks.router.send_multipart([identity or b"", *frames], copy=False)
        return
    with socks.lock:
        if socks.replies_out is not None:
            socks.replies_out.send_multipart([identity or b"", *frames], copy=False)


def run(size: int, answers: int, window: int, copied: bool) -> float:
    from melissa_trainer.stream.serving import PredictServer

    server = PredictServer({"u": ((16,), "float32")})
    if not copied:
        server._reply = zero_copy_reply.__get__(server)  # type: ignore[method-assign]
    server.start()
    server.serving = True
    output = np.ones(size // 4, dtype="<f4")
    done = threading.Event()

    def answering() -> None:
        while not done.is_set():
            if server.wait_pending(0.05):
                for pending in server.take(64):
                    server.answer(pending, {"y": output}, 1)

    thread = threading.Thread(target=answering, daemon=True)
    thread.start()
    out: Any = mp.Queue()
    proc = mp.Process(target=client, args=(server.endpoint, answers, window, out))
    proc.start()
    rate = float(out.get(timeout=300))
    proc.join(60)
    done.set()
    thread.join(10)
    server.stop()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[65536, 1 << 20])
    parser.add_argument("--answers", type=int, default=3000)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    mp.set_start_method("spawn")
    rows = []
    for size in opts.sizes:
        rates: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(opts.rounds):
            for copied in (True, False):
                rates[copied].append(run(size, opts.answers, opts.window, copied))
        ours, base = statistics.median(rates[True]), statistics.median(rates[False])
        rows.append({"case": f"answers of {size} B: copied vs zero-copy (before)",
                     "ours": round(ours), "baseline": round(base), "unit": "answers/s",
                     "ratio": round(ours / base, 3), "target": None})  # fmt: skip
        print(f"{size} B rounds, copied: {[round(r) for r in rates[True]]}, zero-copy: "
              f"{[round(r) for r in rates[False]]}", file=sys.stderr)  # fmt: skip
    if opts.json:
        from melissa_trainer.common.json_output import to_json

        print(to_json({"rows": rows}))
        return
    print("| case | copied (answers/s) | zero-copy, before (answers/s) | ratio |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['case']} | {r['ours']} | {r['baseline']} | {r['ratio']} |")


if __name__ == "__main__":
    main()
