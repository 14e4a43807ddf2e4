"""The keys and version of the record a receiver's ingest keeps in a checkpoint.

`Ingest` takes the record (`Ingest.state_dict`) and restores it
(`Ingest.load_state_dict`) itself: it is the one owner of its state. This module holds
what others read without importing `Ingest` (the receiver's telemetry keys): the
counters in telemetry order, and the record's current version; the upgrade of earlier
versions is `checkpoint_migrations`' ("receiver").

The record is per rank: each receiver records the time steps sent to it (t with
t % world_size == rank), so resuming on another number of ranks merges the k old
records and re-splits them by step for the new routing: `melissa_trainer.stream.reshard`.
"""

from __future__ import annotations

from melissa_trainer.checkpoint_migrations import CURRENT

__all__ = ["COUNTERS", "STATE_VERSION", "TAIL_COUNTERS"]

#: 3: finished simulations may be archived (``"archive"``); 2: a simulation's BYE counts
#: are the steps sent to this receiver (protocol 2); in 1 they were over all receivers
STATE_VERSION = CURRENT["receiver"]
#: the ingest's counters, in telemetry order: these, the rejections, then the tail
COUNTERS = ("messages", "bytes", "samples_put", "duplicates")
TAIL_COUNTERS = (
    "simulations_finished",
    "simulations_abandoned",
    "incomplete_dropped",
    "ignored_after_end",
    "nonfinite_refused",
)
