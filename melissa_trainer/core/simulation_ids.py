"""The simulation id of each sample of a batch: `simulation_ids`, `simulation_ids_or_none`.

The stream's receiver adds a ``simulation_id`` field to every sample it puts; the
per-simulation losses (`loss_guard`, the hooks that ask for `last_simulation_ids`) read
it from each batch, whatever its form: a `SampleBlock` (one column), views of one
gathered batch (`BlockViews`: its column, not one 0-d array per sample), or a list of
samples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from melissa_trainer.buffers import Sample, SampleBlock
from melissa_trainer.buffers.block import BlockViews
from melissa_trainer.core.device_buffer import DeviceBlock

__all__ = ["simulation_ids", "simulation_ids_or_none"]


def simulation_ids(samples: Sequence[Sample]) -> np.ndarray:
    """The ``simulation_id`` of each sample (int64, in order), which the receiver adds
    to every sample it puts.

    Raises:
        ValueError: a sample has no ``simulation_id`` (a source other than the stream's).
    """
    try:
        if isinstance(samples, SampleBlock) and not isinstance(samples, DeviceBlock):
            return np.asarray(samples.fields["simulation_id"], dtype=np.int64).reshape(-1)
        if type(samples) is BlockViews:  # views of one gathered batch: its column (issue 42:
            # the trainer reads the ids of every batch; per sample, 64 reads of 0-d arrays)
            column = samples.column("simulation_id")
            if column is not None:
                return np.asarray(column, dtype=np.int64).reshape(-1)
        return np.array([int(s["simulation_id"]) for s in samples], dtype=np.int64)
    except KeyError:
        raise ValueError(
            "per-simulation losses need a 'simulation_id' field in every sample, which the "
            "stream's receiver adds and this source's samples lack: add it, or set "
            "simulation_loss_steps=0"
        ) from None


def simulation_ids_or_none(samples: Sequence[Sample]) -> np.ndarray | None:
    """`simulation_ids(samples)`, or None when a sample has no ``simulation_id``."""
    try:
        return simulation_ids(samples)
    except ValueError:  # (simulation_ids' only ValueError: a sample without the field)
        return None
