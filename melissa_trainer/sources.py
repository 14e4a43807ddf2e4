"""Sources: what fills a rank's buffer while the trainer reads it.

A `Source` owns a producer (a thread here; the network receiver later) that puts
samples into the buffer and closes it when no data will ever come again. The trainer
starts it, polls `check()` while it waits for data (so a dead producer surfaces as an
error instead of a hang), and stops it at the end.

`IterableSource` is the in-process source: a Python iterable (or a factory of one per
rank) drained by a background thread. It is useful for tests and for simulators
written in Python.
"""

from __future__ import annotations

import itertools
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

import numpy as np

from melissa_trainer.buffers import Buffer, BufferClosedError, Sample

logger = logging.getLogger(__name__)


class SourceError(RuntimeError):
    """The producer of a source failed; the original exception is the `__cause__`."""


class Source(ABC):
    """Fills one rank's buffer. Methods are called from the training thread."""

    def configure(self, output_dir: str) -> None:  # noqa: B027 - optional, no-op
        """Called once by the trainer, before anything else, with its `output_dir`
        (where a source may put files: rendezvous, logs). No-op by default."""

    @abstractmethod
    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        """Begin filling `buffer` in the background (returns at once).

        `buffer` may already hold restored contents and counters: a resumed source
        continues after what the buffer has already received.
        """

    def on_all_ranks_started(self) -> None:  # noqa: B027 - optional, no-op
        """Called on every rank once every rank's `start` has returned (the trainer puts
        a barrier in between): e.g. every receiver's endpoint is published. No-op by
        default."""

    def pump(self, wait: float = 0.0) -> bool:
        """Called by the reader (the training thread) before it takes data: a source
        may do its producer's work here, between training steps, rather than in a
        thread that competes with training for the GIL.

        With `wait` 0 it must not block. A reader short of data calls it with `wait` > 0:
        the source may then wait up to `wait` seconds for its input and put what comes,
        so that data is ingested as it arrives. Returns True if it did (the reader
        then looks at the buffer without waiting), False if the reader should wait on
        the buffer itself. The default does nothing and returns False."""
        return False

    @abstractmethod
    def check(self) -> None:
        """Raise `SourceError` if the producer has failed; cheap, non-blocking."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the producer and release its resources; idempotent, blocks until done."""

    #: Keys of `telemetry()` that are figures of the whole study, which every rank counts
    #: in full (e.g. simulations finished, when each receiver sees every simulation
    #: end): the trainer reduces them over ranks with MAX, not SUM, so that a study of
    #: 16 simulations logs 16 on any number of ranks. Empty by default.
    study_keys: ClassVar[frozenset[str]] = frozenset()

    def telemetry(self) -> dict[str, float]:
        """Cumulative figures for the logs (messages, bytes, rejected…); empty by default.

        The same keys on every rank: the trainer sums them over ranks at each log,
        except `study_keys`, whose maximum over ranks is logged.
        """
        return {}

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable state saved with this rank's checkpoint (e.g. which
        (simulation, time step) pairs were received); empty by default."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; called before `start`."""
        if state:
            raise ValueError(f"{type(self).__name__} has no state but the checkpoint holds some")


SampleFactory = Callable[[int, int], Iterable[Mapping[str, Any]]]


def as_sample(item: Any) -> Sample:
    """Convert one produced item to a `Sample` (a dict of numpy arrays), or raise TypeError."""
    if not isinstance(item, Mapping):
        raise TypeError(
            f"a source must produce mappings of field name -> array, got {type(item).__name__}"
        )
    return {str(k): np.asarray(v) for k, v in item.items()}


class IterableSource(Source):
    """Feeds the buffer from an iterable of samples on a daemon thread.

    Args:
        data: an iterable of mappings (field name -> array-like), or a factory
            `data(rank, world_size)` returning one, so that each rank gets its own share.
        put_timeout: seconds between checks of the stop request while `put` blocks on a
            full buffer (back-pressure).
        stop_timeout: how long `stop()` waits for the producer thread.

    Resume contract: when the buffer passed to `start` has already received `k`
    samples (restored from a checkpoint), the first `k` items of the iterable are
    skipped, so a deterministic iterable continues exactly where it stopped.

    When the iterable is exhausted the buffer is closed (end of stream). If iterating
    raises, the buffer is closed too and `check()` raises `SourceError` from it.
    """

    def __init__(
        self,
        data: Iterable[Mapping[str, Any]] | SampleFactory,
        put_timeout: float = 0.1,
        stop_timeout: float = 10.0,
    ) -> None:
        self._data = data
        self._put_timeout = put_timeout
        self._stop_timeout = stop_timeout
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        if self._thread is not None:
            raise RuntimeError("IterableSource.start() was called twice")
        data = self._data(rank, world_size) if callable(self._data) else self._data
        skip = buffer.stats().put
        self._thread = threading.Thread(
            target=self._run, args=(iter(data), skip, buffer), name="melissa-source", daemon=True
        )
        self._thread.start()

    def _run(self, items: Any, skip: int, buffer: Buffer) -> None:
        try:
            for item in itertools.islice(items, skip, None):
                sample = as_sample(item)
                while not self._stop.is_set():
                    try:
                        buffer.put(sample, timeout=self._put_timeout)
                        break
                    except TimeoutError:
                        continue
                if self._stop.is_set():
                    return
            buffer.close()
        except BufferClosedError:
            return  # the trainer closed the buffer: nothing more is wanted
        except BaseException as exc:  # surfaced in the training thread by check()
            self._error = exc
            buffer.close()

    def check(self) -> None:
        if self._error is not None:
            raise SourceError(f"the sample source failed: {self._error!r}") from self._error

    def stop(self) -> None:
        """Ask the producer to stop and wait up to `stop_timeout` seconds for it.

        A producer stuck inside the user's iterable (a simulation step that takes
        long) cannot be interrupted; it is a daemon thread, so it is left behind with
        a warning rather than blocking the end of training.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._stop_timeout)
            if self._thread.is_alive():
                logger.warning(
                    "the sample source did not stop within %.0f s (its iterable is still "
                    "producing an item); leaving its daemon thread behind",
                    self._stop_timeout,
                )


def as_source(obj: Source | Iterable[Mapping[str, Any]] | SampleFactory) -> Source:
    """Accept a `Source`, an iterable of samples or a per-rank factory of one."""
    if isinstance(obj, Source):
        return obj
    if callable(obj) or isinstance(obj, Iterable):
        return IterableSource(obj)
    raise TypeError(
        "train_source must be a melissa_trainer Source, an iterable of samples, or a "
        f"callable (rank, world_size) -> iterable; got {type(obj).__name__}"
    )
