"""A short batch taken from the buffer when the source then says it failed is kept:
`_take` took the last samples (fewer than a batch: the end?) and asked the source
whether the end was a failure; the `SourceError` it raised lost those samples (neither
pending, carried nor in the buffer), so the failure's checkpoint (one process, and now
several ranks saving together) lacked them and a resume never trained them (review of
the several-rank failure save). Failed before: 0 carried, 0 saved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.sources.source import SourceError

pytestmark = pytest.mark.timeout(30)


class FailsAtTheEnd:
    """A source whose second look (after the short batch) says the study failed."""

    def __init__(self) -> None:
        self.looks = 0

    def wait_for(self, n: int, timeout: float) -> None:
        self.looks += 1
        if self.looks >= 2:
            raise SourceError("the study failed: 3 simulations given up")


def test_the_short_batch_before_a_source_failure_is_saved_and_restored(tmp_path: Path) -> None:
    buffer = FIFOBuffer(16)
    for i in range(3):
        buffer.put({"x": np.full(2, i, np.float32)})
    buffer.close()  # (no more puts: a read takes what is left at once)
    data = StreamDataset(buffer, batch_size=8, source=FailsAtTheEnd())
    with pytest.raises(SourceError, match="given up"):
        data.prefetch(1)
    assert len(buffer) == 0 and data.num_pending == 0
    data.save(tmp_path)
    again = StreamDataset(FIFOBuffer(16), batch_size=8)
    again.load(tmp_path)
    again.buffer.put({"x": np.full(2, 9, np.float32)})
    again.buffer.close()
    xs: list[float] = []
    while again.prefetch(1):  # (the kept ones: a short batch of their own or topped up)
        batch, _ = again.next_batch()
        xs += [float(v) for v in np.asarray(batch["x"])[:, 0]]
    assert xs == [0.0, 1.0, 2.0, 9.0], xs  # the three kept, in order, then the new one
