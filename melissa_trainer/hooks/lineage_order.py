"""The order of a ledger's runs, from the order of their headers in the rank files.

Each rank file is append-only: a run's header comes after the headers of every run
that wrote to that file before it. That order cannot go back, where the headers'
wall-clock ``time`` can (a resume requeued on a node whose clock is behind, NTP
stepping the clock back). `order_runs` merges the files' orders into one: a run
comes after every run that precedes it in any rank file. Rank 0 writes in every run,
so its file alone orders them all; the other files agree with it, and order the runs
whose rank-0 header is damaged. Only runs that no file orders (none share a file) are
ordered by ``time``, as a last resort; files that disagree (a rank file assembled by
hand) are said in the notes and resolved by ``time``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from melissa_trainer.common.words import plural

__all__ = ["order_runs"]


def order_runs(
    sequences: Sequence[Sequence[str]],
    times: Mapping[str, float],
    notes: list[str] | None = None,
) -> list[str]:
    """The run ids of `times`, each after every run that precedes it in one of
    `sequences` (each the run ids of one rank file, in the order of their headers);
    runs no sequence orders go by their `times` (then id). A cycle (files that
    disagree) is broken by `times` too, and said in `notes` (appended)."""
    after: dict[str, set[str]] = {run: set() for run in times}  # run -> the runs it follows
    for seq in sequences:
        for i, run in enumerate(seq):
            after[run].update(r for r in seq[:i] if r != run)
    ordered: list[str] = []
    placed: set[str] = set()
    left = set(times)
    disagree = 0
    while left:
        ready = [r for r in left if after[r] <= placed]
        if not ready:  # each left follows another left: files disagree
            disagree += 1
            ready = list(left)
        run = min(ready, key=lambda r: (times[r], r))
        ordered.append(run)
        placed.add(run)
        left.discard(run)
    if disagree and notes is not None:
        notes.append(
            f"the rank files order the runs differently ({plural(disagree, 'conflict')}: a "
            "rank file assembled by hand?): those runs were ordered by their start time"
        )
    return ordered
