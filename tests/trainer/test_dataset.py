"""StreamDataset: waiting versus end of stream, collation, pending batches in checkpoints."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from melissa_trainer import (
    FIFOBuffer,
    IterableSource,
    SourceError,
    StreamDataset,
    fast_collate,
    to_tensors,
)

pytestmark = pytest.mark.timeout(30)


def sample(i: int) -> dict[str, np.ndarray]:
    return {"x": np.full(3, i, dtype=np.float32), "y": np.asarray(float(i), dtype=np.float32)}


def test_iterates_batches_until_the_stream_ends() -> None:
    buffer = FIFOBuffer(capacity=8)
    source = IterableSource([sample(i) for i in range(10)])
    dataset = StreamDataset(buffer, batch_size=4, source=source)
    source.start(buffer, 0, 1)
    batches = list(dataset)
    source.stop()
    assert [len(b["y"]) for b in batches] == [4, 4, 2]
    assert torch.cat([b["y"] for b in batches]).tolist() == list(range(10))


class EmptyReadsCounted(FIFOBuffer):
    """A FIFO that counts the reads that found it empty (timed out) and sets `looked`
    at the second: the data comes only after the dataset has waited through polls."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity=capacity)
        self.empty_reads = 0
        self.looked = threading.Event()

    def get_block(self, n: int, timeout: float | None = None) -> Any:
        return self._counted(super().get_block, n, timeout)

    def get_batch_or_block(self, n: int, timeout: float | None = None) -> Any:
        return self._counted(super().get_batch_or_block, n, timeout)

    def _counted(self, read: Any, n: int, timeout: float | None) -> Any:
        try:
            return read(n, timeout=timeout)
        except TimeoutError:
            self.empty_reads += 1
            if self.empty_reads >= 2:
                self.looked.set()
            raise


def test_waits_for_data_rather_than_ending() -> None:
    buffer = EmptyReadsCounted(capacity=8)
    dataset = StreamDataset(buffer, batch_size=2, poll_interval=0.05)

    def late_producer() -> None:
        # (an event, not a sleep: the data comes once the dataset has found the buffer
        # empty twice, however slow the machine; a dataset that ended at an empty read
        # never sets it, and prefetch(1) below returns 0)
        if buffer.looked.wait(20):
            buffer.put(sample(1))
            buffer.put(sample(2))
        buffer.close()

    thread = threading.Thread(target=late_producer)
    thread.start()
    try:
        assert dataset.prefetch(1) == 1  # waited through several polls, then got data
        assert buffer.empty_reads >= 2
        assert dataset.prefetch(2) == 1  # then the end: fewer than asked
    finally:
        buffer.looked.set()  # (a failed assertion: the producer ends at once)
        thread.join()


def test_a_failed_source_raises_while_waiting() -> None:
    def broken():
        yield sample(0)
        raise ValueError("bad solver input")

    buffer = FIFOBuffer(capacity=8)
    source = IterableSource(broken())
    dataset = StreamDataset(buffer, batch_size=4, source=source, poll_interval=0.05)
    source.start(buffer, 0, 1)
    with pytest.raises(SourceError, match="bad solver input"):
        dataset.prefetch(1)
    source.stop()


def test_source_rejects_items_that_are_not_mappings() -> None:
    buffer = FIFOBuffer(capacity=8)
    source = IterableSource([np.zeros(3)])
    source.start(buffer, 0, 1)
    dataset = StreamDataset(buffer, batch_size=1, source=source, poll_interval=0.05)
    with pytest.raises(SourceError, match="mappings of field name"):
        dataset.prefetch(1)
    source.stop()


def test_fast_collate_layouts() -> None:
    tensors = [torch.full((2,), float(i)) for i in range(3)]
    assert fast_collate(tensors).shape == (3, 2)
    pairs = [(t, t.sum()) for t in tensors]
    x, y = fast_collate(pairs)
    assert x.shape == (3, 2) and y.tolist() == [0.0, 2.0, 4.0]
    dicts = [to_tensors(sample(i)) for i in range(3)]
    assert fast_collate(dicts)["x"].shape == (3, 3)
    assert fast_collate([1, 2, 3]).tolist() == [1, 2, 3]  # falls back to default_collate


def test_pending_batches_round_trip(tmp_path: Path) -> None:
    buffer = FIFOBuffer(capacity=16)
    for i in range(10):
        buffer.put(sample(i))
    buffer.close()
    dataset = StreamDataset(buffer, batch_size=4)
    assert dataset.prefetch(3) == 3
    dataset.next_batch()
    dataset.save(tmp_path)

    restored = StreamDataset(FIFOBuffer(capacity=16), batch_size=4)
    restored.load(tmp_path)
    assert restored.num_pending == 2
    a, n_a = dataset.next_batch()
    b, n_b = restored.next_batch()
    assert n_a == n_b == 4 and torch.equal(a["x"], b["x"])
    assert restored.next_batch()[1] == 2


def test_scalar_fields_keep_their_shape(tmp_path: Path) -> None:
    # regression: np.ascontiguousarray turned 0-d fields into shape (1,)
    buffer = FIFOBuffer(capacity=4)
    buffer.put(sample(3))
    buffer.close()
    dataset = StreamDataset(buffer, batch_size=1)
    dataset.prefetch(1)
    dataset.save(tmp_path)
    restored = StreamDataset(FIFOBuffer(capacity=4), batch_size=1)
    restored.load(tmp_path)
    assert restored.next_batch()[0]["y"].shape == (1,)
    assert to_tensors(sample(3))["y"].shape == ()


def _ys(dataset: StreamDataset, n: int) -> list[list[float]]:
    return [dataset.next_batch()[0]["y"].tolist() for _ in range(n)]


@pytest.mark.parametrize("columnar", [True, False])
def test_pad_reserves_the_last_batches_in_turn_and_a_resume_pads_alike(
    tmp_path: Path, columnar: bool
) -> None:
    """A rank whose data ran out re-serves its last PAD_BATCHES batches taken, oldest
    first, in turn; a checkpoint keeps them, so a resumed rank pads as the run would."""
    from melissa_trainer.core.dataset import PAD_BATCHES

    buffer = FIFOBuffer(capacity=64)
    for i in range(40):
        buffer.put(sample(i))
    buffer.close()
    process = None if columnar else to_tensors
    dataset = StreamDataset(buffer, batch_size=4, process_sample=process)
    assert not dataset.can_pad and dataset.pad(3) == 0  # nothing taken yet
    assert dataset.prefetch(10) == 10
    first = _ys(dataset, 10)
    assert dataset.prefetch(3) == 0 and dataset.can_pad  # the data ran out here
    dataset.save(tmp_path)  # the pool of the last batches is part of the checkpoint
    assert dataset.pad(3) == 3
    last = first[-PAD_BATCHES:]
    assert _ys(dataset, 3) == last[:3]
    assert dataset.pad(PAD_BATCHES) == PAD_BATCHES  # the rotation goes on, in turn
    assert _ys(dataset, PAD_BATCHES) == last[3:] + last[:3]

    restored = StreamDataset(FIFOBuffer(capacity=4), batch_size=4, process_sample=process)
    restored.load(tmp_path)
    assert restored.num_pending == 0 and restored.pad(3 + PAD_BATCHES) == 3 + PAD_BATCHES
    assert _ys(restored, 3 + PAD_BATCHES) == last[:3] + last[3:] + last[:3]
    restored.clear_pending()  # a resume on another number of ranks: nothing to pad yet
    assert not restored.can_pad


def test_before_any_batch_was_taken_pad_reserves_the_pending_ones() -> None:
    """A rank whose stream ended before its first step (fewer batches than a window)
    pads with the batches it has, so the other ranks' data is trained all the same."""
    buffer = FIFOBuffer(capacity=8)
    for i in range(6):
        buffer.put(sample(i))
    buffer.close()
    dataset = StreamDataset(buffer, batch_size=4)
    assert not dataset.can_pad
    assert dataset.prefetch(4) == 2 and dataset.can_pad
    assert dataset.pad(4) == 2
    assert _ys(dataset, 4) == [[0, 1, 2, 3], [4, 5], [0, 1, 2, 3], [4, 5]]


def test_a_padded_block_is_a_copy() -> None:
    """A `process_batch` given a block may change it in place: the same batch served
    again is a copy of it, not the block already changed twice."""
    buffer = FIFOBuffer(capacity=8)
    for i in range(4):
        buffer.put(sample(i))
    buffer.close()

    def double_in_place(block: Any) -> Any:
        block.fields["y"] *= 2
        return torch.from_numpy(block.fields["y"].copy())

    dataset = StreamDataset(buffer, batch_size=4, process_batch=double_in_place)
    dataset.prefetch(1)
    assert dataset.next_batch()[0].tolist() == [0.0, 2.0, 4.0, 6.0]
    dataset.pad(1)  # the block as it left its step, doubled once more (not twice)
    assert dataset.next_batch()[0].tolist() == [0.0, 4.0, 8.0, 12.0]
    dataset.pad(2)  # in turn: the first block again (as it left), then its copy
    assert [dataset.next_batch()[0].tolist() for _ in range(2)] == [
        [0.0, 4.0, 8.0, 12.0],
        [0.0, 8.0, 16.0, 24.0],
    ]


def test_a_columnar_reservoir_s_samples_reach_process_sample_as_the_plain_one_s(
    tmp_path: Path,
) -> None:
    """With a `process_sample`, a columnar reservoir's batch is kept as its gathered
    block and viewed per sample when collated (issue 42). The plain reservoir, seeded
    and fed alike, is the oracle: `process_sample` receives the same dicts (fields in
    order, dtypes, shapes, values, 0-d ids), batch after batch, with the same
    simulation ids, pending checkpoint and re-served (`pad`) batches."""
    from safetensors.numpy import load_file

    from melissa_trainer.buffers import ColumnarReservoirBuffer, ReservoirBuffer, SampleBlock
    from melissa_trainer.core.pending_file import PENDING_ARRAYS, PENDING_META, RECENT_ARRAYS

    rng = np.random.default_rng(4)
    blocks = [
        SampleBlock(
            {
                "u": rng.random((7, 5), dtype=np.float32),
                "simulation_id": np.full(7, b % 3, np.int64),
                "time_step": np.arange(7 * b, 7 * b + 7),
                "parameters": np.zeros((7, 0)),
            }
        )
        for b in range(12)
    ]
    seen: dict[str, list[dict[str, Any]]] = {"plain": [], "columnar": []}
    datasets = {}
    for name, cls in (("plain", ReservoirBuffer), ("columnar", ColumnarReservoirBuffer)):
        buffer = cls(40, 1, seed=9)
        for block in blocks[:6]:
            buffer.put_available(block)

        def process(s: dict[str, np.ndarray], name: str = name) -> Any:
            assert type(s) is dict
            seen[name].append({k: (type(v), v.dtype, v.shape, v.copy()) for k, v in s.items()})
            return to_tensors(s)

        dataset = datasets[name] = StreamDataset(buffer, 8, process_sample=process)
        dataset.track_simulation_ids = True
        dataset.prefetch(3)
    assert type(datasets["columnar"].peek_pending()) is SampleBlock  # the block path
    for step in range(9):  # (the last two: batches re-served by `pad`)
        batches = {}
        for name, dataset in datasets.items():
            dataset.buffer.put_available(blocks[6 + step % 6])
            dataset.prefetch(3)
            batches[name] = dataset.next_batch()[0]
            if step == 3:
                dataset.save(tmp_path / name)
            if step == 4:
                assert dataset.pad(5) == 3  # (2 pending: 3 re-served after them)
        assert all(torch.equal(v, batches["columnar"][k]) for k, v in batches["plain"].items())
        assert np.array_equal(
            datasets["plain"].last_simulation_ids, datasets["columnar"].last_simulation_ids
        )
    assert len(seen["plain"]) == len(seen["columnar"]) == 9 * 8
    for a, b in zip(seen["plain"], seen["columnar"], strict=True):
        assert list(a) == list(b)
        for (ta, da, sa, va), (tb, db, sb, vb) in zip(a.values(), b.values(), strict=True):
            assert (ta, da, sa) == (tb, db, sb) and np.array_equal(va, vb)
    plain, columnar = tmp_path / "plain", tmp_path / "columnar"
    assert (plain / PENDING_META).read_text() == (columnar / PENDING_META).read_text()
    for file in (PENDING_ARRAYS, RECENT_ARRAYS):
        x, y = load_file(str(plain / file)), load_file(str(columnar / file))
        assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
