"""A reservoir whose samples also live on the accelerator device (``buffer_device
"accelerator"``): batches are gathered there, with no host-to-device copy of a batch.

`DeviceReservoirBuffer` is a `ReservoirBuffer` (the same policy, random draws, counters
and checkpoint: its host samples stay the buffer's record) that mirrors every held
sample into one tensor per field, ``[capacity, *field shape]``, on `device`, at its
slot. The samples put since the last copy are copied in one host-to-device copy per
field: at the end of each `put_available` (the receiver's path: one copy per arriving
block), `put` or `try_put`, and, should a draw come first, before it. `get_block`
gathers the drawn slots on the device (`index_select`) into a `DeviceBlock`.

Lineage and checkpoints are the host reservoir's: the same seeded draws pick the same
slots (the policy code is `ReservoirBuffer`'s), the device rows are copies of the host
samples, and `save`/`load` write and read the host samples in the reservoir's format
(a load copies them to the device again). The cost: the host copy is kept (host memory
as a host reservoir, plus `capacity` samples on the device).

Ordering: rows are written and gathered under the buffer's lock, on the device's
current stream of each thread (the default stream on CUDA), so a gather enqueued before
a later write into the same slot reads the old row.

Every sample must have the fields, shapes and dtypes of the first one (the device
tensors are allocated once); another raises ValueError on its put.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import numpy as np
import torch

from melissa_trainer.buffers import ReservoirBuffer, Sample, SampleBlock, make_buffer

__all__ = ["DeviceBlock", "DeviceReservoirBuffer"]


class _Held(dict[str, np.ndarray]):
    """A held sample (the same arrays as the sample put) and its slot."""

    __slots__ = ("slot",)
    slot: int


class DeviceBlock(SampleBlock):
    """A batch drawn from a `DeviceReservoirBuffer`: `fields` are tensors on the device
    (gathered there; ``[n, *field shape]``), and the batch's host samples are what
    iteration, indexing and `samples()` give (what a checkpoint of pending batches
    writes, and `StreamDataset.last_samples` names)."""

    __slots__ = ("_host",)

    def __init__(self, host: Sequence[Sample], tensors: Mapping[str, torch.Tensor]) -> None:
        self.fields: dict[str, Any] = dict(tensors)
        self._n = len(host)
        self._host = list(host)

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> SampleBlock: ...

    def __getitem__(self, index: int | slice) -> Sample | SampleBlock:
        if isinstance(index, slice):
            return SampleBlock.from_samples(self._host[index])
        return self._host[index]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._host)

    def samples(self) -> list[Sample]:
        return list(self._host)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}: {v.dtype}{list(v.shape[1:])}" for k, v in self.fields.items())
        return f"DeviceBlock({self._n} samples on {self._device_name()}; {shapes})"

    def _device_name(self) -> str:
        first = next(iter(self.fields.values()), None)
        return str(first.device) if first is not None else "no device"


class DeviceReservoirBuffer(ReservoirBuffer):
    """`ReservoirBuffer`'s arguments, and `device`: where the samples are mirrored and
    batches gathered (the training device). See the module docstring."""

    def __init__(self, *args: Any, device: torch.device | str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.device = torch.device(device)
        self._rows: dict[str, torch.Tensor] = {}  # field -> [capacity, *shape] on device
        self._layout: dict[str, tuple[tuple[int, ...], np.dtype]] | None = None
        self._unwritten: dict[int, _Held] = {}  # slot -> sample put since the last copy

    # -- storing -------------------------------------------------------------------------

    def _check(self, sample: Sample) -> None:
        """Raise ValueError unless `sample` has the first sample's fields (lock held)."""
        layout = {k: (np.shape(v), np.asarray(v).dtype) for k, v in sample.items()}
        if self._layout is None:
            self._layout = layout
        elif layout != self._layout:
            raise ValueError(
                f"a device buffer holds samples of one layout, {self._describe(self._layout)}; "
                f"got {self._describe(layout)}"
            )

    @staticmethod
    def _describe(layout: Mapping[str, tuple[tuple[int, ...], np.dtype]]) -> str:
        return "{" + ", ".join(f"{k}: {d}{list(s)}" for k, (s, d) in layout.items()) + "}"

    def _insert(self, sample: Sample, insert_id: int) -> None:
        self._check(sample)
        held = _Held(sample)
        super()._insert(held, insert_id)
        held.slot = self._undrawn[-1]  # `_insert` appends the slot it filled
        self._unwritten[held.slot] = held

    def _evict_for(self, samples: Sequence[Sample]) -> None:
        for sample in samples:
            self._check(sample)
        held = [_Held(s) for s in samples]
        super()._evict_for(held)
        for h, slot in zip(held, self._undrawn[len(self._undrawn) - len(held) :], strict=True):
            h.slot = slot
            self._unwritten[slot] = h

    def _write_rows(self) -> None:
        """Copy the samples put since the last copy to their device rows: one
        host-to-device copy and one scatter per field (lock held)."""
        if not self._unwritten:
            return
        held = list(self._unwritten.values())  # one per slot: the last one put there
        self._unwritten = {}
        if not self._rows:
            assert self._layout is not None
            self._rows = {
                k: torch.empty(
                    (self._capacity, *shape),
                    dtype=torch.from_numpy(np.empty(0, dtype)).dtype,
                    device=self.device,
                )
                for k, (shape, dtype) in self._layout.items()
            }
        index = self._to_device(torch.tensor([h.slot for h in held], dtype=torch.long))
        for k, rows in self._rows.items():
            block = torch.from_numpy(np.stack([np.asarray(h[k]) for h in held]))
            rows.index_copy_(0, index, self._to_device(block))

    def _to_device(self, tensor: torch.Tensor) -> torch.Tensor:
        """A host tensor copied to the device. On CUDA through pinned memory, without
        blocking the host (a copy from pageable memory waits for the stream's queue:
        the training steps queued); the caching host allocator keeps the pinned copy
        until the transfer has run."""
        if self.device.type == "cuda":
            return tensor.pin_memory().to(self.device, non_blocking=True)
        return tensor.to(self.device)

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        with self._lock:
            self._put_locked(sample, timeout)
            self._write_rows()

    def put_available(self, samples: Sequence[Sample]) -> int:
        n = super().put_available(samples)
        with self._lock:
            self._write_rows()
        return n

    def try_put(self, sample: Sample) -> bool:
        put = super().try_put(sample)
        if put:
            with self._lock:
                self._write_rows()
        return put

    # -- drawing ---------------------------------------------------------------------------

    def get_block(self, n: int, timeout: float | None = None) -> SampleBlock:
        """`Buffer.get_block`'s draws, as a `DeviceBlock` gathered on the device (an
        empty `SampleBlock` at the end of the stream)."""
        with self._lock:
            n = self._wait_to_get(n, timeout)
            items = self._take_closed(n) if self._closed else self._take(n)
            if not items:
                return SampleBlock.empty()
            self._count_got(len(items))
            self._write_rows()  # a draw before the putter's copy: copied now
            slots = [h.slot for h in items if isinstance(h, _Held)]
            assert len(slots) == len(items)  # every held sample is a _Held
            index = self._to_device(torch.tensor(slots, dtype=torch.long))
            tensors = {k: rows.index_select(0, index) for k, rows in self._rows.items()}
        return DeviceBlock(items, tensors)

    # -- checkpoints -----------------------------------------------------------------------

    def _load_contents(self, samples: dict[str, Sample], meta: dict[str, Any]) -> None:
        super()._load_contents(samples, meta)
        self._layout = None
        self._unwritten = {}
        self._rows = {}
        for slot, sample in enumerate(self._slots):
            if sample is None:
                continue
            self._check(sample)
            held = _Held(sample)
            held.slot = slot
            self._slots[slot] = held
            self._unwritten[slot] = held
        self._write_rows()


def make_device_buffer(config: Any, device: torch.device | str) -> DeviceReservoirBuffer:
    """The `DeviceReservoirBuffer` a reservoir `BufferConfig` describes, on `device`
    (as `make_buffer` builds the host one).

    Raises ValueError when `config.kind` is not ``"reservoir"``.
    """
    if config.kind != "reservoir":
        raise ValueError(
            f"a buffer on the accelerator device is a reservoir; got buffer={config.kind!r}: "
            "use buffer='reservoir', or buffer_device='host'"
        )
    host = make_buffer(config)
    assert isinstance(host, ReservoirBuffer)
    return DeviceReservoirBuffer(
        config.capacity,
        config.watermark,
        seed=config.seed,
        rate_limiter=host.rate_limiter,
        retain=config.retain,
        max_sample_reuse=config.max_sample_reuse,
        draw_choices=config.draw_choices,
        evict_choices=config.evict_choices,
        device=device,
    )
