"""A trainer's receiving side in a process of its own, for tests that SIGKILL or
SIGSTOP it: the real `Receiver` on a FIFO, drained by this process's main thread.

    python tests/scripts/keys_receiver.py

Prints ``endpoint tcp://...`` once bound, then ``key SIMULATION STEP`` per sample put,
and ``end`` when the stream has ended (one simulation, `expected_simulations=1`);
each line flushed. Exits 0 after ``end``.
"""

from __future__ import annotations

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig


def main() -> None:
    buffer = FIFOBuffer(64)
    receiver = Receiver(buffer, 0, 1, ReceiverConfig(expected_simulations=1))
    receiver.start()
    try:
        print("endpoint", receiver.endpoint, flush=True)
        while True:
            try:
                batch = buffer.get_batch(16, timeout=0.1)
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
