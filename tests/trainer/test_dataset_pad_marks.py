"""`StreamDataset`'s padding mark (`last_padded`) across a checkpoint: the padding
batches pending at a save are padding after a load (the ledger's check relies on it:
tests/hooks/test_lineage_pad_resume.py), a checkpoint written before the mark was saved
loads as it did (none marked), resharding reads no padding batch back into a buffer, and
a resume at another batch size leaves them out (it pads again as it needs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer import FIFOBuffer, StreamDataset, to_tensors
from melissa_trainer.core.pending_file import PENDING_META, read_pending

pytestmark = pytest.mark.timeout(30)


def sample(i: int) -> dict[str, np.ndarray]:
    return {"x": np.full(3, i, dtype=np.float32), "y": np.asarray(float(i), dtype=np.float32)}


def padding_pending(columnar: bool, batch_size: int = 4) -> StreamDataset:
    """A dataset whose data ran out (3 batches, the third pending) and that then padded
    two batches: pending [real, padding, padding]."""
    buffer = FIFOBuffer(capacity=16)
    for i in range(12):
        buffer.put(sample(i))
    buffer.close()
    process = None if columnar else to_tensors
    dataset = StreamDataset(buffer, batch_size=batch_size, process_sample=process)
    assert dataset.prefetch(3) == 3
    dataset.next_batch(), dataset.next_batch()
    assert dataset.prefetch(3) == 1  # the end of the stream here
    assert dataset.pad(3) == 2
    return dataset


def taken(dataset: StreamDataset, n: int) -> list[tuple[list[float], bool]]:
    out = []
    for _ in range(n):
        batch, _ = dataset.next_batch()
        out.append((batch["y"].tolist(), dataset.last_padded))
    return out


@pytest.mark.parametrize("columnar", [True, False])
def test_the_pending_padding_batches_are_padding_after_a_load(
    tmp_path: Path, columnar: bool
) -> None:
    dataset = padding_pending(columnar)
    dataset.save(tmp_path)
    expected = taken(dataset, 3)  # the run that was not interrupted: the oracle
    assert [pad for _, pad in expected] == [False, True, True]

    restored = StreamDataset(
        FIFOBuffer(capacity=4), batch_size=4, process_sample=None if columnar else to_tensors
    )
    restored.load(tmp_path)
    assert taken(restored, 3) == expected


def test_a_checkpoint_written_before_the_mark_loads_none_marked(tmp_path: Path) -> None:
    padding_pending(columnar=True).save(tmp_path)
    meta = json.loads((tmp_path / PENDING_META).read_text())
    del meta["padded"]  # what a checkpoint of an earlier version says
    (tmp_path / PENDING_META).write_text(json.dumps(meta))
    restored = StreamDataset(FIFOBuffer(capacity=4), batch_size=4)
    restored.load(tmp_path)
    assert [pad for _, pad in taken(restored, 3)] == [False, False, False]
    assert len(read_pending(tmp_path)) == 3


def test_resharding_reads_no_padding_batch(tmp_path: Path) -> None:
    """Resharding gives the pending batches back to the buffers (`buffers.reshard`):
    a padding batch, a copy of samples trained already, would be trained again."""
    padding_pending(columnar=True).save(tmp_path)
    assert [[float(s["y"]) for s in b] for b in read_pending(tmp_path)] == [[8, 9, 10, 11]]
    assert len(read_pending(tmp_path, padding=True)) == 3


def test_another_batch_size_regroups_the_data_and_leaves_the_padding_out(
    tmp_path: Path,
) -> None:
    padding_pending(columnar=True).save(tmp_path)
    restored = StreamDataset(FIFOBuffer(capacity=4), batch_size=2)
    restored.load(tmp_path)
    assert taken(restored, 2) == [([8.0, 9.0], False), ([10.0, 11.0], False)]
    assert restored.num_pending == 0 and restored.pad(1) == 1  # it pads as it needs
    assert taken(restored, 1)[0][1] is True
