"""The check, as an in-process source starts, that its data can reach the buffer's
watermark (`warn_unreachable_watermark`, called by `IterableSource.start`).

Contract: it only warns (the run stays legal: training drains what the stream put), once
per rank, and only for data whose length is known (`Sized`); it never raises and never
iterates the data. It logs under `melissa_trainer.sources.source`'s logger, where the
source's own messages go.
"""

from __future__ import annotations

import logging
from collections.abc import Sized

__all__ = ["warn_unreachable_watermark"]

# (the source's logger: a user filters a source's words by one name)
logger = logging.getLogger("melissa_trainer.sources.source")


def warn_unreachable_watermark(data: object, watermark: int, rank: int, world_size: int) -> None:
    """Warn, as the source starts, when `data` (this rank's whole stream) has a length
    below the buffer's `watermark`: no read is then served before the stream ends, and
    training only drains what the stream put, each sample about once. Melissa refuses
    its `per_server_watermark` above the samples per server at start; here the run stays
    legal (the drain trains), but is said before it waits rather than only in the
    end-of-run reuse line (`hooks.reuse`). An empty one is said as such, without the
    watermark (none would help). An iterable without a length (a generator, a study's
    stream) says nothing: its size is not known at start."""
    if not isinstance(data, Sized):
        return
    n = len(data)
    if n >= watermark:
        return
    who = f"rank {rank}'s train_source" if world_size > 1 else "train_source"
    if n == 0:  # (no watermark helps: "lower --watermark (well below 0)" misled)
        logger.warning(
            "%s holds no sample: this rank has nothing to train on (a factory "
            "train_source(rank, world_size) whose share for rank %d is empty?); give "
            "each rank samples",
            who,
            rank,
        )
        return
    logger.warning(
        "%s holds %d samples, fewer than --watermark %d (the fewest the buffer must hold, "
        "per rank, before a batch is drawn): the watermark is never reached, so training "
        "starts only when the stream ends and then drains each sample about once. Lower "
        "--watermark (well below %d), or give each rank more samples (Melissa's "
        "per_server_watermark above the samples per server)",
        who,
        n,
        watermark,
        n,
    )
