"""The pending batches in a checkpoint: `StreamDataset`'s batches taken from the buffer
and not trained yet, and the last batches taken (what `StreamDataset.pad` re-serves),
written to a rank's directory (`write_pending`), read back (`read_pending`, pure: what
resharding reads for every old rank) and restored for a run of another batch size
(`restore_pending`: the resumed run's ``batch_size`` applies to them too). Which pending
batches are padding (copies `pad` re-served of batches trained already) is said too, so
a resume marks them alike (`StreamDataset.last_padded`) and resharding leaves them out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from melissa_trainer.buffers import Sample

__all__ = [
    "PENDING_ARRAYS",
    "PENDING_FILES",
    "PENDING_META",
    "RECENT_ARRAYS",
    "read_pending",
    "restore_pending",
    "write_pending",
]

#: the files `write_pending` writes, in the order a share reads
PENDING_META = "pending.json"
PENDING_ARRAYS = "pending.safetensors"
RECENT_ARRAYS = "recent.safetensors"  # the last batches taken, which `pad` re-serves
PENDING_FILES = (PENDING_META, PENDING_ARRAYS, RECENT_ARRAYS)


def write_pending(
    directory: str | os.PathLike[str],
    batch_size: int,
    pending: Sequence[Sequence[Sample]],
    recent: Sequence[Sequence[Sample]],
    padded: Sequence[int] = (),
) -> None:
    """Write the `pending` batches and the `recent` ones into `directory` (created), with
    the `batch_size` they were taken at and `padded`, the indices in `pending` of the
    padding batches."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"batch_size": batch_size, "padded": sorted(padded)}
    for key, file, batches in (
        ("fields", PENDING_ARRAYS, pending),
        ("recent", RECENT_ARRAYS, recent),
    ):
        arrays: dict[str, np.ndarray] = {}
        for b, samples in enumerate(batches):
            for s, sample in enumerate(samples):
                for field, value in sample.items():
                    # (not np.ascontiguousarray: it turns 0-d arrays into 1-d ones)
                    arrays[f"b{b}/s{s}/{field}"] = (
                        value if value.flags.c_contiguous else value.copy(order="C")
                    )
        save_file(arrays, str(path / file))
        # each sample's fields in their order: a resumed batch is the same dict, order
        # included
        meta[key] = [[list(sample) for sample in samples] for samples in batches]
    (path / PENDING_META).write_text(json.dumps(meta))


def read_pending(
    directory: str | os.PathLike[str], which: str = "fields", *, padding: bool = False
) -> list[list[Sample]]:
    """The pending batches `write_pending` wrote into `directory` (with `which`
    ``"recent"``: the last batches taken, [] if it wrote none): a list of batches, each a
    list of samples (each sample's fields in their saved order). The padding batches
    are left out unless `padding`: copies of samples trained already, not data owed,
    which resharding must not give back to a buffer (a checkpoint written before they
    were said has none left out). Pure: reads the files, touches no dataset (what
    resharding reads for every old rank).
    """
    path = Path(directory)
    meta = json.loads((path / PENDING_META).read_text())
    if which not in meta:  # (a checkpoint written before the last batches were kept)
        return []
    skip = set() if padding or which != "fields" else set(meta.get("padded", ()))
    arrays = load_file(str(path / (PENDING_ARRAYS if which == "fields" else RECENT_ARRAYS)))
    return [
        [{f: arrays[f"b{b}/s{s}/{f}"] for f in names} for s, names in enumerate(batch)]
        for b, batch in enumerate(meta[which])
        if b not in skip
    ]


def restore_pending(
    directory: str | os.PathLike[str], batch_size: int
) -> tuple[list[list[Sample]], list[Sample], list[list[Sample]], list[int]]:
    """What `directory` holds, for a dataset of `batch_size`: the pending batches, the
    samples carried over to top up the next batch taken, the recent batches, and the
    indices of the pending batches that are padding.

    Written at `batch_size`, they are as they were (a short batch of an uneven end stays
    one, nothing carried; the padding batches where they were). Written at another
    size: the pending samples but the padding batches' regrouped in their order into
    batches of `batch_size`, those that fill no whole batch carried; of the recent
    ones, the newest whole batches. (The padding batches are left out there: a batch
    regrouped across one's edge would be part padding, which a batch cannot say; the
    resumed run pads again as it needs, `StreamDataset.pad`.)
    """
    meta = json.loads((Path(directory) / PENDING_META).read_text())
    pending = read_pending(directory, padding=True)
    recent = read_pending(directory, "recent")
    # (a checkpoint that does not say: its batches' size, the largest of them)
    saved = meta.get("batch_size") or max(map(len, pending + recent), default=0)
    n = batch_size
    if saved in (0, n):
        return pending, [], recent, list(meta.get("padded", ()))
    pending = read_pending(directory)
    flat = [s for batch in pending for s in batch]
    whole = len(flat) - len(flat) % n
    older = [s for batch in recent for s in batch]
    newest = older[len(older) % n if len(older) > n else 0 :]
    return _batches(flat[:whole], n), flat[whole:], _batches(newest, n), []


def _batches(samples: list[Sample], n: int) -> list[list[Sample]]:
    return [samples[i : i + n] for i in range(0, len(samples), n)]
