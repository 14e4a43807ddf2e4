"""A reduction period's per-simulation sums: counted on one rank (`sum_per_id`, or
`sum_per_row` into the statistics' rows when they hold a range of ids) and gathered from
every rank (`gather_sums`), for `loss_per_simulation.SimulationLosses`.

Both are pure functions of their arguments; `gather_sums` is a collective (every rank
calls it at the same step). Each sum adds its id's values in the order they come, so a
statistic is the same bits however the ids are numbered or the work is split.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist


def sum_per_id(
    ids: np.ndarray, values: np.ndarray, counts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct `ids` (sorted), the sum of their `values`, and their number (the
    sum of their `counts` if given: every rank's sums folded into one).

    Each sum adds its id's values in the order they come (`numpy.bincount`), whichever
    way the ids are numbered: the same bits. A period's ids usually lie in a narrow
    range (the simulations streaming now and those the buffer still holds), so they
    are counted in a table over that range, offset by the least (no sort); a range
    wider than `TABLE_SPAN` times the entries is sorted (`numpy.unique`) instead, so
    that the table stays O(entries)."""
    if len(ids) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float64), np.zeros(0, np.int64)
    low = int(ids.min())
    span = int(ids.max()) - low + 1
    if span <= TABLE_SPAN * len(ids):
        where = ids - low
        seen = np.bincount(where, minlength=span)
        present: Any = np.flatnonzero(seen)
        unique, size = present + low, span
    else:
        unique, where = np.unique(ids, return_inverse=True)
        present, size = slice(None), len(unique)
        seen = np.bincount(where, minlength=size)
    sums = np.bincount(where, weights=values, minlength=size)[present]
    number = seen if counts is None else np.bincount(where, weights=counts, minlength=size)
    return unique, sums, number[present].astype(np.int64)


#: `sum_per_id` uses a table while the ids' range is at most this many times the entries
TABLE_SPAN = 4


def sum_per_row(
    ids: np.ndarray, values: np.ndarray, low: int, count: int
) -> tuple[np.ndarray | None, np.ndarray, np.ndarray] | None:
    """`sum_per_id(ids, values)` as rows of a table whose ids are ``low .. low + count -
    1`` (`SimulationLosses`' statistics once they hold every id of a range: the usual
    case), in fewer numpy calls (issue 46's ninth round: each one costs several
    microseconds on the training thread, in cold caches, at every reduction).

    Returns ``(rows, sums, counts)``: the rows of the distinct ids (``id - low``,
    increasing; None when every row has an id in `ids`: then `sums` and `counts` have one
    entry per row), their sums and their numbers, the same bits as `sum_per_id`'s (each
    sum adds its id's values in the order they come: `numpy.bincount`, however the bins
    are numbered; a test compares them). None when `ids` is empty or holds an id outside
    the table's range (`sum_per_id` then)."""
    if count <= 0 or len(ids) == 0:
        return None
    # (the ends first: an id far above would make the tables below that long)
    if int(ids.min()) < low or int(ids.max()) >= low + count:
        return None
    where = ids - low if low else ids
    seen = np.bincount(where, minlength=count)
    sums = np.bincount(where, weights=values, minlength=count)
    if seen.all():
        return None, sums, seen.astype(np.int64, copy=False)
    present = np.flatnonzero(seen)
    return present, sums[present], seen[present].astype(np.int64, copy=False)


def gather_sums(
    ids: np.ndarray, sums: np.ndarray, counts: np.ndarray, device: torch.device
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every rank's `(ids, sums, counts)`, concatenated in rank order. Collective: three
    all-gathers of tensors on `device` (NCCL needs them there), padded to the longest."""
    world = dist.get_world_size()
    length = torch.tensor([len(ids)], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(length) for _ in range(world)]
    dist.all_gather(lengths, length)
    sizes = [int(n.item()) for n in lengths]
    longest = max(sizes)
    if longest == 0:
        return ids, sums, counts
    mine_int = torch.zeros((2, longest), dtype=torch.int64)
    mine_int[0, : len(ids)] = torch.from_numpy(ids)
    mine_int[1, : len(ids)] = torch.from_numpy(counts)
    mine_float = torch.zeros(longest, dtype=torch.float64)
    mine_float[: len(ids)] = torch.from_numpy(sums)
    ints = [torch.zeros((2, longest), dtype=torch.int64, device=device) for _ in range(world)]
    floats = [torch.zeros(longest, dtype=torch.float64, device=device) for _ in range(world)]
    dist.all_gather(ints, mine_int.to(device))
    dist.all_gather(floats, mine_float.to(device))
    int_parts = [t.cpu().numpy()[:, :n] for t, n in zip(ints, sizes, strict=True)]
    float_parts = [t.cpu().numpy()[:n] for t, n in zip(floats, sizes, strict=True)]
    return (
        np.concatenate([p[0] for p in int_parts]),
        np.concatenate(float_parts),
        np.concatenate([p[1] for p in int_parts]),
    )
