"""The ingest's counters and the receiver's telemetry keys, the same on every rank.

`IngestState` (`ingest_state`) keeps one attribute per
counter and reports them, in this order, from `IngestState.telemetry`: `COUNTERS`, then
the rejections (``rejected`` and one ``rejected_{reason}`` per `REJECT_REASONS`), then
`TAIL_COUNTERS`; `telemetry_keys` lists them so (docs/reference/make_quick.py draws the
quick reference's table from these names).
"""

from __future__ import annotations

from melissa_trainer.stream.assembly import REJECT_REASONS

__all__ = ["COUNTERS", "TAIL_COUNTERS", "telemetry_keys"]

#: the ingest's counters, in telemetry order: these, the rejections, then the tail
COUNTERS = ("messages", "bytes", "samples_put", "duplicates")
TAIL_COUNTERS = (
    "simulations_finished",
    "simulations_abandoned",
    "incomplete_dropped",
    "ignored_after_end",
    "nonfinite_refused",
    "connections_lost",
)


def telemetry_keys() -> list[str]:
    """The fixed telemetry keys of every receiver (the same on every rank)."""
    reasons = [f"rejected_{r}" for r in REJECT_REASONS]
    return [*COUNTERS, "rejected", *reasons, *TAIL_COUNTERS]
