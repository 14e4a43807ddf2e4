"""How the ingest benchmarks read the buffer: as the training thread does
(`StreamDataset`), one implementation shared by `ingest.py` and `c_client.py`."""

from __future__ import annotations

from melissa_trainer.buffers import Buffer
from melissa_trainer.stream.receiver import Receiver

#: payloads up to this many bytes travel in one frame (and are batched by the clients)
INLINE_MAX = 65536


def buffer_capacity(nbytes: int) -> int:
    """The FIFO capacity the benchmarks give a stream of `nbytes` fields."""
    return 4096 if nbytes <= INLINE_MAX else 64


def drain(receiver: Receiver, buffer: Buffer, nbytes: int) -> None:
    """Read until the end of the stream, as the training thread takes data: pump the
    receiver (ingest in this thread), then take what there is, up to a batch; with
    nothing there, wait on the network (`pump(wait)`), else on the buffer. Batched small
    fields are held as blocks and taken as blocks (`get_block`, the dataset's default
    batches); large ones as the samples they are. Returns once the buffer is closed and
    empty."""
    batch = max(1, buffer_capacity(nbytes) // 8)
    get = buffer.get_block if nbytes <= INLINE_MAX else buffer.get_batch
    while True:
        receiver.pump()
        k = min(len(buffer), batch)
        if not k and receiver.pump(0.02):
            continue
        try:
            if not get(max(k, 1), timeout=0.0 if k else 0.02):
                return  # closed and empty: the end of the stream
        except TimeoutError:
            continue
