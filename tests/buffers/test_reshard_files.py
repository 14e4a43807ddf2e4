"""Resharding buffer snapshots read from files (`melissa_trainer.buffers.reshard`): snapshots
and pending batches read back, a new rank reading only the large arrays of its share
(`LazyArrays`), and a device reservoir loading its share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from reshard_snapshots import CAPACITY, make, old_rank, sample, uids
from safetensors import SafetensorError

from melissa_trainer.buffers import read_snapshot
from melissa_trainer.buffers._state import LazyArrays, write_files
from melissa_trainer.buffers.reshard import share
from melissa_trainer.core.dataset import StreamDataset
from melissa_trainer.core.pending_file import read_pending

pytestmark = pytest.mark.timeout(120)


def test_snapshots_and_pending_batches_read_back_from_files(tmp_path: Path) -> None:
    buf = make("firo", seed=3)
    for i in range(12):
        buf.put(sample(i))
    dataset = StreamDataset(buf, 4, process_sample=lambda s: s["x"])
    assert dataset.prefetch(2) == 2
    buf.save(tmp_path / "buffer")
    dataset.save(tmp_path / "dataset")
    arrays, meta = read_snapshot(tmp_path / "buffer")
    pending = read_pending(tmp_path / "dataset")
    taken = [dataset.take_pending() for _ in range(2)]
    assert [[int(s["uid"]) for s in b] for b in pending] == [
        [int(s["uid"]) for s in b] for b in taken
    ]
    a, m = share([(arrays, meta)], [pending], 0, 2)
    b, n = share([(arrays, meta)], [pending], 1, 2)
    assert sorted(uids(a) + uids(b)) == list(range(12))
    again = StreamDataset(make("firo"), 4, process_sample=lambda s: s["x"])
    again.load(tmp_path / "dataset")  # the dataset's own load reads the same way
    assert again.num_pending == 2


@pytest.mark.parametrize("name", ["reservoir", "fifo-retain"])
def test_a_new_rank_reads_from_the_files_only_the_large_arrays_of_its_share(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    olds = [old_rank(name, r) for r in range(2)]
    for r, ((arrays, meta), _) in enumerate(olds):
        write_files(tmp_path / f"rank_{r}", dict(arrays), meta)
    read: list[str] = []
    get = LazyArrays.__getitem__

    def counting(self: LazyArrays, key: str) -> np.ndarray:
        read.append(key)
        return get(self, key)

    monkeypatch.setattr(LazyArrays, "__getitem__", counting)
    snaps = [read_snapshot(tmp_path / f"rank_{r}") for r in range(2)]
    pend = [p for _, p in olds]
    arrays, meta = share(snaps, pend, 1, 3)
    want = share([s for s, _ in olds], pend, 1, 3)  # the same share from memory
    assert meta == want[1]
    assert arrays.keys() == want[0].keys()
    assert all(np.array_equal(arrays[key], want[0][key]) for key in arrays)
    # the large field "x" (128 bytes: not part of a sample's key) is read for this
    # share's samples and the candidates of pending samples only
    large = [key for key in read if key.endswith("/x")]
    share_size = len(uids(arrays)) + len(uids(arrays, "r"))
    assert len(large) <= share_size + sum(len(b) for p in pend for b in p)
    total = sum(len(uids(a)) + len(uids(a, "r")) for (a, _), _ in olds)
    assert len(large) < total


def test_a_device_reservoir_loads_its_share() -> None:
    from melissa_trainer.core.device_buffer import DeviceReservoirBuffer

    olds = [old_rank("reservoir", r) for r in range(2)]
    arrays, meta = share([s for s, _ in olds], [p for _, p in olds], 2, 3)
    buf = DeviceReservoirBuffer(CAPACITY, 2, device="cpu")
    buf.load_state_dict(arrays, meta)
    block = buf.get_block(4)
    assert set(block.fields["uid"].tolist()) <= set(uids(arrays))


def test_lazy_arrays_read_what_the_file_holds(tmp_path: Path) -> None:
    arrays = {
        "s0/b": np.array([True, False]),
        "s0/i": np.arange(6, dtype=np.int16).reshape(2, 3),
        "s0/f": np.array(2.5, np.float64),
        "s0/e": np.zeros((0, 4), np.float32),
        "s1/u": np.array([7], np.uint64),
    }
    write_files(tmp_path, arrays, {})
    lazy = LazyArrays(tmp_path / "buffer.safetensors")
    assert sorted(lazy) == sorted(arrays) and len(lazy) == 5 and "s0/b" in lazy
    for key, value in arrays.items():
        got = lazy[key]
        assert got.dtype == value.dtype and got.shape == value.shape
        assert np.array_equal(got, value) and got.flags.writeable
    with pytest.raises(KeyError, match="s2/x"):
        lazy["s2/x"]
    (tmp_path / "junk").write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{nope")
    with pytest.raises(SafetensorError):  # as `read_files` (safetensors' own load)
        LazyArrays(tmp_path / "junk")
