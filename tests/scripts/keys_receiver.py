"""A trainer's receiving side in a process of its own, for tests that SIGKILL or
SIGSTOP it: the real `Receiver` on a FIFO, drained by this process's main thread.

    python tests/scripts/keys_receiver.py [--rendezvous DIR --run_id ID] [--fifo N]
                                          [--batch N] [--hold | --on_stdin]

Prints ``endpoint tcp://...`` once bound (and, with ``--rendezvous``, published there:
a client in external mode finds it), then ``key SIMULATION STEP`` per sample put, read
by batches of up to ``--batch``, and ``end`` when the stream has ended (one simulation,
`expected_simulations=1`); each line flushed. Exits 0 after ``end``. ``--hold`` drains
nothing until killed (its FIFO full, the rest, a BYE among it, waits unread: a trainer
whose buffer is full); ``--on_stdin`` drains nothing until a line comes on stdin (the
test's go). Driven from tests by `tests/client/keys_receiver_process.py`.
"""

from __future__ import annotations

import argparse
import sys
import threading

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rendezvous", help="the rendezvous directory to publish in")
    parser.add_argument("--run_id", help="the run id (with --rendezvous)")
    parser.add_argument("--fifo", type=int, default=64, help="the FIFO's capacity")
    parser.add_argument("--batch", type=int, default=16, help="samples read at a time")
    wait = parser.add_mutually_exclusive_group()
    wait.add_argument("--hold", action="store_true", help="drain nothing until killed")
    wait.add_argument("--on_stdin", action="store_true", help="drain once stdin has a line")
    args = parser.parse_args()
    buffer = FIFOBuffer(args.fifo)
    config = ReceiverConfig(
        expected_simulations=1, rendezvous_dir=args.rendezvous, run_id=args.run_id
    )
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    try:
        print("endpoint", receiver.endpoint, flush=True)
        if args.hold:
            threading.Event().wait()  # (killed by the test)
        if args.on_stdin:
            sys.stdin.readline()  # (the test's go: what was sent stays unread until then)
        while True:
            try:
                batch = buffer.get_batch(args.batch, timeout=0.1)
            except TimeoutError:
                continue
            if not batch:
                break
            for sample in batch:
                print("key", int(sample["simulation_id"]), int(sample["time_step"]), flush=True)
        print("end", flush=True)
    finally:
        receiver.stop()


if __name__ == "__main__":
    main()
