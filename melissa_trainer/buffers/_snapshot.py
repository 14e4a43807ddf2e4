"""Snapshots of a :class:`~melissa_trainer.buffers.Buffer`: statistics and checkpoints,
each taken (or restored) under the buffer's lock."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from . import _state
from ._common import BufferStats
from ._core import BufferCore

__all__ = ["SnapshotMixin"]


class SnapshotMixin(BufferCore):
    """`stats`, `state_dict` / `load_state_dict` and `save` / `load` of `Buffer`."""

    # ------------------------------------------------------------------ statistics
    def stats(self) -> BufferStats:
        """A consistent snapshot of the counters (see :class:`BufferStats`)."""
        with self._lock:
            return BufferStats(
                size=self._size(),
                capacity=self._capacity,
                put=self._n_put,
                got=self._n_got,
                evicted=self._n_evicted,
                reuse_histogram=dict(sorted(self._reuse_hist.items())),
                mean_age=self._age_sum / self._n_got if self._n_got else 0.0,
            )

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Consistent snapshot ``(arrays, meta)``, taken under the lock.

        ``arrays`` holds the samples as flat arrays keyed ``"s{slot}/{field}"`` (and
        ``"r{i}/{field}"`` for the retained list). They are the held arrays themselves,
        not copies (a buffer never modifies a sample), unless a copy is needed to make
        them C-contiguous and native-endian. ``meta`` holds everything else (counters,
        RNG state, order, draw counts, closed flag) and is JSON-serializable. No pickle.

        Raises:
            TypeError: a held sample is not a dict of numeric/bool numpy arrays (the
                message names the field).
        """
        with self._lock:
            arrays: dict[str, np.ndarray] = {}
            meta: dict[str, Any] = {
                "kind": self.kind,
                "format_version": _state.FORMAT_VERSION,
                "capacity": self._capacity,
                "watermark": self._watermark,
                "retain": self._retain,
                "closed": self._closed,
                "put": self._n_put,
                "got": self._n_got,
                "evicted": self._n_evicted,
                "age_sum": self._age_sum,
                "reuse_histogram": {str(k): v for k, v in sorted(self._reuse_hist.items())},
                "rng": _state.rng_state(self._rng),
                "rate_limiter": None if self._limiter is None else self._limiter.state_dict(),
            }
            meta["contents"] = self._contents_state(arrays)
            meta["field_order"] = _state.field_order(arrays)
            return arrays, meta

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` snapshot exactly.

        Afterwards the buffer behaves as the snapshotted one did: same contents, order,
        counters, closed flag and RNG state, hence the same future random draws given
        the same calls. The configuration (capacity, watermark, retain, limiter
        parameters, ``max_sample_reuse``) stays the constructor's. Waiters are woken.

        Raises:
            ValueError: the snapshot is of another buffer kind, has another capacity,
                disagrees on having a rate limiter, or is malformed.
        """
        common = _state.parse_common_meta(meta, self.kind, self._capacity, self._limiter)
        samples = _state.decode_samples(arrays, meta.get("field_order"))
        with self._lock:
            self._load_contents(samples, common.contents)
            if self._limiter is not None and common.limiter is not None:
                self._limiter.load_state_dict(common.limiter)
            self._n_put, self._n_got, self._n_evicted, self._age_sum = common.counters
            self._reuse_hist = common.reuse_histogram
            self._closed = common.closed
            self._rng = common.rng
            self._unpark()  # a refused `try_put` was for the contents replaced here
            self._readable.notify_all()
            self._writable.notify_all()

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write ``buffer.safetensors`` and ``buffer.json`` into ``directory`` (created).

        The snapshot is taken under the lock (see :meth:`state_dict`); the files are
        written outside it, each to a temporary name then renamed.
        """
        arrays, meta = self.state_dict()
        _state.write_files(directory, arrays, meta)

    def load(self, directory: str | os.PathLike[str]) -> None:
        """Restore the buffer from the files :meth:`save` wrote in ``directory``."""
        arrays, meta = _state.read_files(directory)
        self.load_state_dict(arrays, meta)
