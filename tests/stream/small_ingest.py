"""An `Ingest` with the small limits the tests of the stream's logic use (no socket, no
receiver): tests/stream/test_routing.py, test_client_after_resume.py,
test_reshard_stream.py."""

from __future__ import annotations

from collections.abc import Callable

from melissa_trainer.buffers import Sample
from melissa_trainer.stream.ingest import Ingest

__all__ = ["recording", "small_ingest"]


def small_ingest(
    rank: int = 0,
    world: int = 1,
    *,
    put: Callable[[Sample], bool] = lambda sample: True,
    max_pending: int = 8,
    recent_size: int = 8,
) -> Ingest:
    """Rank `rank` of `world`'s ingest: samples to `put` (by default taken and dropped),
    its end ignored, no expected simulation count, 1 MiB a field and in all pending,
    `max_pending` messages pending, time steps below 2**20, `recent_size` recent keys."""
    return Ingest(
        rank,
        world,
        put=put,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=max_pending,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 20,
        recent_size=recent_size,
    )


def recording(puts: list[tuple[int, int]]) -> Callable[[Sample], bool]:
    """A `put` that takes every sample and appends its (simulation, time step) to `puts`."""

    def put(sample: Sample) -> bool:
        puts.append((int(sample["simulation_id"]), int(sample["time_step"])))
        return True

    return put
