"""A fairer baseline for the pinned 1 KB row of `ingest.py`: a raw receive thread that
does the work ours must do, and no more.

The pinned row's raw PULL thread receives the client's messages and discards them: it
takes the client's full pace and puts nothing anywhere. Ours decodes each BATCH, makes
its block of samples and puts it into the trainer's reservoir, held back by the
reservoir's room (back-pressure). `RawPutSource` is that in a plain thread of the
training process: a PULL socket, `wire.decode` of each BATCH (other messages: the
client's HELLO, skipped), the same block of four fields as a receiver makes
(`assembly.block_of`: the rows copied out of the frame, the simulation id, the steps,
the parameters), put into the same columnar reservoir (`puts_blocks`), what does not
fit put blocking, as a receiver's thread does. None of ours: no dedup, no ledger, no
checkpoint record, no checks beyond the decode's.

The buffer starts pre-filled with the workload's samples as blocks of the same four
fields (the same layout, so that the reservoir stays columnar), as the step alone's.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import zmq

from melissa_trainer import wire as P
from melissa_trainer.buffers import Buffer, BufferClosedError, SampleBlock
from melissa_trainer.sources.source import Source

__all__ = ["RawPutSource"]


def block_of(rows: np.ndarray, simulation_id: int, steps: np.ndarray) -> SampleBlock:
    """The receiver's four fields for `rows` (copied: the frame is not kept)."""
    n = len(rows)
    return SampleBlock(
        {
            "u": rows.copy(),
            "simulation_id": np.full(n, simulation_id, np.int64),
            "time_step": steps.astype(np.int64),
            "parameters": np.zeros((n, 0), np.float64),  # the client sends none
        }
    )


class RawPutSource(Source):
    """Pre-fills the buffer with `fields` (1-D float32 arrays), then puts what a client
    streams to `endpoint` (bound at construction) from a thread of its own."""

    puts_blocks = True  # the trainer then stores its reservoir by column, as for ours

    def __init__(self, fields: list[np.ndarray]) -> None:
        self.fields = fields
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.RCVTIMEO, 50)
        self.endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        self.halt = threading.Event()
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.put = 0

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        n = len(self.fields)
        buffer.put_available(block_of(np.stack(self.fields), 1 << 40, np.arange(n)))
        self.thread = threading.Thread(target=self._run, args=(buffer,), daemon=True)
        self.thread.start()

    def _run(self, buffer: Buffer) -> None:
        recv, halt = self.sock.recv, self.halt
        try:
            while not halt.is_set():
                try:
                    frame = recv(copy=False)
                except zmq.Again:
                    continue
                view = frame.buffer
                if len(view) <= P.KIND_AT or view[P.KIND_AT] != P.BATCH:
                    continue  # the client's HELLO
                msg = P.decode(view)
                assert type(msg) is P.Batch
                self._put(buffer, block_of(msg.payloads, msg.simulation_id, msg.steps))
        except BufferClosedError:
            pass  # the trainer ended its stream
        except BaseException as exc:  # re-raised by wait_for, in the training thread
            self.error = exc

    def _put(self, buffer: Buffer, block: SampleBlock) -> None:
        """All of `block`, blocking for room (a sample at a time once full, as a
        receiver's thread does), until stopped."""
        done = buffer.put_available(block)
        while done < len(block) and not self.halt.is_set():
            try:
                buffer.put(block[done], 0.05)
            except TimeoutError:
                continue
            done += 1
            done += buffer.put_available(block[done:]) if done < len(block) else 0
        self.put += done

    def wait_for(self, n_samples: int, timeout: float) -> None:
        if self.error is not None:
            raise RuntimeError(f"the raw put thread failed: {self.error!r}")

    def telemetry(self) -> dict[str, float]:
        return {"samples_put": float(self.put)}

    def stop(self) -> None:
        self.halt.set()
        if self.thread is not None:
            self.thread.join(10)
        with contextlib.suppress(Exception):
            self.sock.close(linger=0)
            self.ctx.term()
