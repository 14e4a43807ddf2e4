"""Batches staged for the device, one step ahead of the step that trains on them.

`BatchStager` sits between the `StreamDataset` and the training step. At the end of a
step (after its hooks' actions: a checkpoint is written before), the trainer asks it to
`stage` the next pending batch: it is processed and collated (as `next_batch` would),
and, on a CUDA device, copied into pinned host memory and sent to the device on a side
stream, so that the copy runs while the GPU still works through the queued step. The
next `next_batch` serves it, once the compute stream waited for the copy.

What a step trains on is unchanged:

- the batch is only *peeked* at while staged (`StreamDataset.peek_pending`): it stays
  pending until the step takes it, so a checkpoint written in between saves it raw and
  a resume collates it again; `last_samples` / `last_simulation_ids` are set when the
  step takes it (they refer to the batch being trained);
- the staged copy is used only if the pending batch is still the very object that was
  staged (a `load`, a replaced pending queue: collated afresh);
- `process_sample` / `collate_fn` / `process_batch` run in the same order relative to
  the model's forward passes as without staging (after the previous step's update and
  actions, before the next forward), so one that draws from torch's RNG (a random
  augmentation) draws the same numbers; only the next step's STEP_START hook now comes
  after them.

On CPU the copy is a no-op (the same code path, the batch as collated); on another
accelerator (MPS, XPU) the batch goes through Accelerate's `send_to_device`.

Pinned memory: two slots of host buffers, reused batch after batch (grown when a batch
needs more), alternated so that one is filled while the other's copy may still run; a
slot is written again only after its last copy's event completed. The device tensors
are allocated on the side stream and `record_stream`-ed on the compute stream, so the
caching allocator does not hand their memory out again before the step used them.

Not thread-safe: the training thread only.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accelerate.utils import recursively_apply, send_to_device

from melissa_trainer.buffers import Sample
from melissa_trainer.core.dataset import StreamDataset


def _is_tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


@dataclass
class _Staged:
    """A collated batch on its way to (or on) the device."""

    samples: Sequence[Sample]  # the pending raw samples it was made of (kept: `is` check)
    batch: Any
    event: Any | None  # torch.cuda.Event recorded after the copy, on CUDA


class _PinnedSlot:
    """Reused pinned host buffers for one batch's tensors, by position in the batch."""

    def __init__(self) -> None:
        self.flat: list[torch.Tensor | None] = []  # one flat buffer per tensor of a batch
        self.event: Any | None = None  # the last copy out of these buffers

    def host_copy(self, index: int, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` copied into this slot's pinned buffer `index` (made anew only when
        missing, of another dtype or too small: a shorter last batch reuses it)."""
        n = tensor.numel()
        while len(self.flat) <= index:
            self.flat.append(None)
        buf = self.flat[index]
        if buf is None or buf.dtype != tensor.dtype or buf.numel() < n:
            buf = torch.empty(max(n, 1), dtype=tensor.dtype, pin_memory=True)
            self.flat[index] = buf
        view = buf[:n].view(tensor.shape)
        view.copy_(tensor)
        return view


class BatchStager:
    """Serves `dataset`'s batches on `device`, the next one staged ahead (see module doc).

    Args:
        dataset: where batches come from (its pending queue stays the one owner of the
            batches taken from the buffer and not yet trained on).
        device: the training device (`Accelerator.device`).
    """

    def __init__(self, dataset: StreamDataset, device: torch.device) -> None:
        self.dataset = dataset
        self.device = device
        self._cuda = device.type == "cuda"
        self._staged: _Staged | None = None
        self._stream: Any | None = None
        self._slots: list[_PinnedSlot] = []
        self._slot = 0
        if self._cuda:
            self._stream = torch.cuda.Stream(device)
            self._slots = [_PinnedSlot(), _PinnedSlot()]

    @property
    def staged(self) -> bool:
        """Whether a batch is staged (for the next pending batch or an outdated one)."""
        return self._staged is not None

    def stage(self) -> None:
        """Collate the next pending batch and start its copy to the device; nothing if
        no batch is pending or it is staged already."""
        samples = self.dataset.peek_pending()
        if samples is None:
            return
        if self._staged is not None and self._staged.samples is samples:
            return
        self._staged = None  # an outdated one: its memory may go
        batch = self.dataset.collate_samples(samples)
        if self._cuda:
            batch, event = self._copy_cuda(batch)
            self._staged = _Staged(samples, batch, event)
        elif self.device.type != "cpu":
            self._staged = _Staged(samples, send_to_device(batch, self.device, True), None)
        else:
            self._staged = _Staged(samples, batch, None)

    def next_batch(self) -> tuple[Any, int]:
        """The next pending batch, on the device, taken; returns `(batch, samples)`.

        The staged one if it was staged (else staged now): the same batch, samples and
        `last_samples` / `last_simulation_ids` as `StreamDataset.next_batch`.

        Raises IndexError when nothing is pending.
        """
        self.stage()
        staged, self._staged = self._staged, None
        if staged is None:
            raise IndexError("no pending batch: call StreamDataset.prefetch first")
        samples = self.dataset.take_pending()
        if staged.event is not None:  # the compute stream waits for the copy, not the host
            compute = torch.cuda.current_stream(self.device)
            compute.wait_event(staged.event)

            def keep(t: torch.Tensor) -> torch.Tensor:
                if t.device.type == "cuda":
                    t.record_stream(compute)
                return t

            recursively_apply(keep, staged.batch, test_type=_is_tensor)
        return staged.batch, len(samples)

    def _copy_cuda(self, batch: Any) -> tuple[Any, Any]:
        """`batch`'s host tensors sent to the device through a pinned slot, on the side
        stream; returns the device batch and the event recorded after the copies."""
        slot = self._slots[self._slot]
        self._slot ^= 1
        if slot.event is not None:
            slot.event.synchronize()  # its previous copy has read the pinned memory
        stream = self._stream
        assert stream is not None
        counter = itertools.count()

        def copy(t: torch.Tensor) -> torch.Tensor:
            if t.device.type != "cpu":
                return t
            pinned = slot.host_copy(next(counter), t)
            with torch.cuda.stream(stream):
                return pinned.to(self.device, non_blocking=True)

        out = recursively_apply(copy, batch, test_type=_is_tensor)
        event = torch.cuda.Event()
        event.record(stream)
        slot.event = event
        return out, event
