"""The stream dataset: buffer samples -> `process_sample` -> collated batches.

It tells "no data yet" (wait, while the source works and says if it failed) from "no data
ever again" (the buffer is closed and drained). The trainer uses it through
`prefetch` / `next_batch`: raw samples for the next window of steps are taken from the
buffer first, so that every rank knows how many steps it can run before the ranks
agree on when to stop; they are processed and collated one batch at a time. Batches
taken but not yet trained on are part of the checkpoint (`save` / `load`), so a resume
loses nothing. A rank whose data ran out before another's re-serves its last batches
(`pad`) until every rank's has; those are in the checkpoint, marked: a resume pads alike.

Used alone, `StreamDataset` is a `torch.utils.data.IterableDataset` yielding collated
batches until the end of the stream (do not wrap it in a multi-worker DataLoader: the
buffer lives in this process).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, default_collate

from melissa_trainer.buffers import Buffer, Sample, SampleBlock
from melissa_trainer.core.data_wait import DataWait
from melissa_trainer.core.device_buffer import DeviceBlock

# `X as X`: kept importable here for this module's old path (issue 45); they go with _moved.py
from melissa_trainer.core.pending_file import PENDING_ARRAYS as PENDING_ARRAYS
from melissa_trainer.core.pending_file import PENDING_FILES as PENDING_FILES
from melissa_trainer.core.pending_file import PENDING_META as PENDING_META
from melissa_trainer.core.pending_file import RECENT_ARRAYS as RECENT_ARRAYS
from melissa_trainer.core.pending_file import read_pending as read_pending
from melissa_trainer.core.pending_file import restore_pending, write_pending
from melissa_trainer.core.simulation_ids import simulation_ids as simulation_ids
from melissa_trainer.core.simulation_ids import simulation_ids_or_none
from melissa_trainer.sources.source import Source

#: how many of the last batches taken a rank whose data ran out first re-serves (`pad`)
PAD_BATCHES = 8

ProcessSample = Callable[[Sample], Any]
Collate = Callable[[list[Any]], Any]
ProcessBatch = Callable[[SampleBlock], Any]


def _contiguous(array: np.ndarray) -> np.ndarray:
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return array if array.flags.c_contiguous else array.copy(order="C")


def to_tensors(sample: Sample) -> dict[str, torch.Tensor]:
    """Default `process_sample`: each field as a tensor sharing the array's memory."""
    return {k: torch.from_numpy(_contiguous(v)) for k, v in sample.items()}


def fast_collate(examples: list[Any]) -> Any:
    """Stack a list of examples into a batch.

    Tensors, tuples/lists of tensors and dicts of tensors are stacked with one
    `torch.stack` per field (no per-element checks); anything else falls back to
    `torch.utils.data.default_collate`.
    """
    first = examples[0]
    if isinstance(first, torch.Tensor):
        return torch.stack(examples)
    if isinstance(first, tuple | list) and all(isinstance(x, torch.Tensor) for x in first):
        return type(first)(torch.stack(col) for col in zip(*examples, strict=True))
    if isinstance(first, Mapping) and all(isinstance(x, torch.Tensor) for x in first.values()):
        return {k: torch.stack([e[k] for e in examples]) for k in first}
    return default_collate(examples)


def check_batch_options(
    process_sample: ProcessSample | None,
    collate_fn: Collate | None,
    process_batch: ProcessBatch | None,
) -> None:
    """Raise ValueError if `process_batch` comes with `process_sample` or `collate_fn`."""
    if process_batch is not None and (process_sample is not None or collate_fn is not None):
        pairs = (("process_sample", process_sample), ("collate_fn", collate_fn))
        given = [name for name, value in pairs if value is not None]
        raise ValueError(
            f"process_batch makes whole batches, so it replaces process_sample and "
            f"collate_fn; got it with {' and '.join(given)}: pass either process_batch, or "
            f"process_sample and/or collate_fn"
        )


def check_device_buffer(process_sample: ProcessSample | None, collate_fn: Collate | None) -> None:
    """Raise ValueError if `process_sample` or `collate_fn` comes with a buffer on the
    device, whose batches are gathered there as blocks (not per sample)."""
    given = [n for n, v in (("process_sample", process_sample), ("collate_fn", collate_fn)) if v]
    if given:
        raise ValueError(
            f"buffer_device='accelerator' gathers whole batches on the device, so it takes "
            f"no {' or '.join(given)}: pass process_batch (it receives a DeviceBlock whose "
            f"fields are device tensors) or nothing, or use buffer_device='host'"
        )


class StreamDataset(IterableDataset):
    """Batches from a buffer.

    Args:
        buffer: the buffer that a source fills.
        batch_size: samples per batch; the last batch of a stream may be smaller.
        process_sample: turns one sample (a dict of numpy arrays) into one training
            example, e.g. an `(inputs, targets)` tuple of tensors.
        collate_fn: stacks examples into a batch (default `fast_collate`).
        source: what fills `buffer`: its `Source.wait_for` is called before each read
            of the buffer (an `IterableSource` fills the buffer there, a `StreamSource`
            ingests what has arrived) and while no data arrives, so a failed producer
            raises `SourceError` here.
        poll_interval: seconds between two looks at `interrupted` (see `prefetch`)
            while no data arrives (at most 0.02 s with a source).
        process_batch: instead of `process_sample` and `collate_fn`: turns a whole
            batch, a `SampleBlock` (one array per field, the samples along axis 0),
            into a training batch, e.g. ``lambda b: (torch.from_numpy(b.fields["x"]),
            torch.from_numpy(b.fields["y"]))``: vectorized, with no per-sample call.
            The block's arrays are the batch's own (fresh, writable; but a batch served
            again at an uneven end, `pad`, is a copy of the block as it left the
            step: a change made in place would be made twice).

    Raises:
        ValueError: `process_batch` given with `process_sample` or `collate_fn`.

    With neither `process_sample` nor `collate_fn` (a batch is then the dict of stacked
    fields as tensors, or what `process_batch` makes), batches are taken as blocks
    (`Buffer.get_block`) and never go through a per-sample object: the same batches,
    for less work per sample (a FIFO serves the blocks a receiver put as they are).

    Not thread-safe: one consumer (the training thread).
    """

    def __init__(
        self,
        buffer: Buffer,
        batch_size: int,
        process_sample: ProcessSample | None = None,
        collate_fn: Collate | None = None,
        source: Source | None = None,
        poll_interval: float = 0.5,
        process_batch: ProcessBatch | None = None,
    ) -> None:
        super().__init__()
        check_batch_options(process_sample, collate_fn, process_batch)
        self.buffer = buffer
        self.batch_size = batch_size
        self.process_batch = process_batch
        self._columnar = process_sample is None and collate_fn is None
        self.process_sample = process_sample or to_tensors
        self.collate_fn = collate_fn or fast_collate
        self.source = source
        self.poll_interval = poll_interval
        #: says when training has waited long for data (`data_wait`)
        # (a `Study` has a launcher, which kills and reruns silent simulations: its words)
        launcher = getattr(source, "launcher", None)  # (its queue: `Launcher.queued`)
        self.data_wait = DataWait(
            launched=hasattr(source, "launcher"), queued=getattr(launcher, "queued", None)
        )
        self._pending: deque[Sequence[Sample]] = deque()
        #: samples restored pending that did not fill a batch of `batch_size` (a resume
        #: with another batch size): the next batch taken is topped up from them
        self._carry: list[Sample] = []
        #: the last `PAD_BATCHES` batches taken, which `pad` re-serves (module docstring)
        self._recent: deque[Sequence[Sample]] = deque(maxlen=PAD_BATCHES)
        #: set `next_batch`'s `last_simulation_ids` (the trainer does, when a hook asks
        #: for the per-sample losses: SAMPLE_LOSSES carries them)
        self.track_simulation_ids = False
        self.last_simulation_ids: np.ndarray | None = np.zeros(0, np.int64)
        #: the raw samples of the last `next_batch` (the trainer's loss check names
        #: their simulations; one batch held, no copy)
        self.last_samples: Sequence[Sample] = ()
        #: `last_samples` is a copy `pad` re-served (a sample trained already), by id
        self.last_padded, self._pads = False, set[int]()

    # -- raw samples ---------------------------------------------------------------

    def _take(
        self, interrupted: Callable[[], bool] | None = None, n: int | None = None
    ) -> Sequence[Sample] | None:
        """The next batch of raw samples (`n`, default `batch_size`); blocks for data; []
        at the end of the stream; None if `interrupted()` turned True while it waited."""
        # With a source, the source does its producer's work before each read and,
        # after a read that found no data, waits in short slices (`wait_for`), so that
        # data arriving while this thread waits is ingested at once by whoever ingests;
        # the read itself then never waits. Without one, wait on the buffer.
        source, n = self.source, self.batch_size if n is None else n
        timeout = self.poll_interval if source is None else 0.0
        wait = 0.0  # what the source may wait before the next read: none while data flows
        said = self.data_wait
        while True:
            if source is not None:
                source.wait_for(n, wait)
            try:
                samples: Sequence[Sample]
                if self._columnar:
                    samples = self.buffer.get_block(n, timeout=timeout)
                else:  # (a columnar reservoir's gather: viewed per sample when used)
                    samples = self.buffer.get_batch_or_block(n, timeout=timeout)
            except TimeoutError:
                if interrupted is not None and interrupted():
                    return None
                said.empty(self.buffer, n)  # a long wait is said (`data_wait`)
                wait = min(self.poll_interval, 0.02)
                continue
            said.served()
            if len(samples) < n and source is not None:
                try:  # a short batch means the end: was it a failure?
                    source.wait_for(n, 0.0)
                except BaseException:
                    # taken from the buffer already: carried (saved with the failure's
                    # checkpoint, `save`), not lost with the error
                    self._carry = [*self._carry, *_host(samples)]
                    raise
            return samples

    def prefetch(self, n: int, interrupted: Callable[[], bool] | None = None) -> int:
        """Make `n` batches pending, blocking until they exist or the stream has ended.

        Returns the number of pending batches: `n`, or fewer only when the stream has
        ended (no data ever again on this rank) or, with `interrupted`, when it returned
        True while this waited for data (looked at every `poll_interval` s at most; the
        trainer passes its preemption request, so a starved rank notices a signal).
        """
        while len(self._pending) < n:
            self.data_wait.window(len(self._pending), n)  # (a long wait for the rest is said)
            samples = self._take(interrupted, self.batch_size - len(self._carry))
            if self._carry and samples is not None:  # first the samples carried over
                samples, self._carry = [*self._carry, *_host(samples)], []
            if not samples:  # an empty read: the end of the stream (or None: interrupted)
                break
            self._pending.append(samples)
        self.data_wait.window(n, n)
        return min(n, len(self._pending))

    @property
    def num_pending(self) -> int:
        return len(self._pending)

    @property
    def can_pad(self) -> bool:
        """`pad` has batches to re-serve: a batch was taken since the start or resume,
        or one is pending."""
        return bool(self._recent or self._pending)

    def pad(self, n: int) -> int:
        """Make `n` batches pending by re-serving the last batches taken (oldest first,
        each a fresh copy), when the stream has ended here while another rank still has
        data; returns how many were added (0 when nothing was taken or is pending:
        `can_pad`).

        Every rank of a run must run the same number of steps: a rank whose data ran
        out first trains on its last `PAD_BATCHES` batches again, in turn, until the
        other ranks' data has run out too, as Accelerate's ``even_batches`` repeats
        samples so that every rank gets as many batches (see `OnlineTrainer.train`).
        """
        # oldest first; each copy rejoins them when taken (before any batch was taken:
        # the pending ones, which the window trains on first)
        recent = list(self._recent) or list(self._pending)
        added = max(0, n - len(self._pending)) if recent else 0
        copies = [_copy_of(recent[i % len(recent)]) for i in range(added)]
        self._pads.update(map(id, copies))  # (held in _pending until taken: ids unique)
        self._pending.extend(copies)
        return added

    # -- batches -------------------------------------------------------------------

    def next_batch(self) -> tuple[Any, int]:
        """Collate the next pending batch; returns `(batch, number_of_samples)`.

        With `track_simulation_ids` set, `last_simulation_ids` is then the batch's
        samples' ``simulation_id`` values, in the batch's order (None when a sample has
        none: a source other than the stream's).

        Raises:
            IndexError: nothing is pending (call `prefetch` first).
        """
        samples = self.take_pending()
        return self.collate_samples(samples), len(samples)

    def peek_pending(self) -> Sequence[Sample] | None:
        """The raw samples of the next pending batch, left pending (None: none is); what
        `melissa_trainer.core.staging` collates one step ahead, so a checkpoint still holds it."""
        return self._pending[0] if self._pending else None

    def take_pending(self) -> Sequence[Sample]:
        """Take the next pending batch's raw samples, uncollated, as `next_batch` does
        (`last_samples` and `last_simulation_ids` then refer to them).

        Raises IndexError when nothing is pending.
        """
        samples = self.last_samples = self._pending.popleft()
        self.last_padded = id(samples) in self._pads
        self._pads.discard(id(samples))
        # (a device block's host samples: its device tensors are not held for padding)
        self._recent.append(_host(samples))
        if self.track_simulation_ids:
            self.last_simulation_ids = simulation_ids_or_none(samples)
        return samples

    def collate_samples(self, samples: Sequence[Sample]) -> Any:
        """Process and collate `samples` (e.g. a validation batch) like training batches."""
        if isinstance(samples, DeviceBlock):  # gathered on the device: its tensors
            if self.process_batch is not None:
                return self.process_batch(samples)
            return dict(samples.fields)
        if self._columnar:  # as one block (samples restored from a checkpoint too)
            block = (
                samples if isinstance(samples, SampleBlock) else SampleBlock.from_samples(samples)
            )
            if self.process_batch is not None:
                return self.process_batch(block)
            # what to_tensors + fast_collate give, without the per-sample tensors
            return {k: torch.from_numpy(_contiguous(v)) for k, v in block.fields.items()}
        if type(samples) is SampleBlock:  # a block read for `process_sample`
            # (`Buffer.get_batch_or_block`, a re-served copy of one: `_copy_of`): its
            # views are the samples `get_batch` gives, made and freed here, while warm
            # in the caches, instead of kept with the batch (issue 42)
            samples = samples.views()
        process = self.process_sample
        return self.collate_fn([process(s) for s in samples])

    def __iter__(self) -> Iterator[Any]:
        while self.prefetch(1):
            yield self.next_batch()[0]

    def rewind(self) -> int:
        """Replay the samples the buffer retained (pseudo-epochs); returns their number."""
        return self.buffer.rewind()

    # -- checkpoint ----------------------------------------------------------------

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the pending (taken, untrained) batches to `directory`, and the last
        batches taken (what `pad` would re-serve: a resume pads as the run would)."""
        carried = [self._carry] if self._carry else []  # (after the pending ones, in order)
        pads = [i for i, batch in enumerate(self._pending) if id(batch) in self._pads]
        write_pending(directory, self.batch_size, [*self._pending, *carried], self._recent, pads)

    def clear_pending(self) -> None:
        """Forget the pending batches and those `pad` would re-serve (a resume on
        another number of ranks: the checkpoint's pending batches are in the buffers'
        shares; the new ranks pad from what they take)."""
        self._pending.clear()
        self._recent.clear()
        self._carry, self._pads = [], set()

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Restore the pending batches and the last batches taken, written by `save`
        (replacing any now; a checkpoint written before the latter were kept has none).
        A checkpoint of another batch size: its batches regrouped into batches of
        `batch_size`, the rest topped up by the next batch taken (`restore_pending`).
        The pending padding batches stay padding (`last_padded`; a checkpoint written
        before they were said: none is)."""
        pending, self._carry, recent, padded = restore_pending(directory, self.batch_size)
        self._pending.clear()
        self._pads = {id(pending[i]) for i in padded}  # (held in _pending: ids unique)
        self._pending.extend(pending)
        self._recent.clear()
        self._recent.extend(recent)


def _host(samples: Sequence[Sample]) -> Sequence[Sample]:
    return samples.samples() if isinstance(samples, DeviceBlock) else samples


def _copy_of(batch: Sequence[Sample]) -> Sequence[Sample]:
    """A batch to serve again: fresh arrays where a step may have been handed the
    batch's own (a block, which `process_batch` may change in place); a list of samples
    as a buffer serves them (the same samples, as a reservoir serves them again)."""
    if isinstance(batch, SampleBlock):
        return SampleBlock({k: np.array(v, copy=True) for k, v in batch.fields.items()})
    return list(batch)
