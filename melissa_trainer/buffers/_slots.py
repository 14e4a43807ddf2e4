"""A reservoir's index bookkeeping for a burst of evictions, in one loop.

`ReservoirBuffer` keeps its slots in Python lists (per slot: the draw count, the insert
id, the position in its index list; the index lists of undrawn and drawn slots), read
element by element by its draws. A receiver's block of ``n`` samples into a full
reservoir evicts ``n`` drawn samples, one per sample, each chosen among the drawn ones
left after the previous eviction: the choice is sequential (each victim's position
depends on the swap-removals before it), and the rest of the bookkeeping is a few list
stores per victim. Measured at issue 42's pinned 1 KB row (a block of 63, about 90
drawn slots), numpy does not pay at these sizes: the victims' 63 positions alone (three
numpy calls, before any replay of the swap-removals) took a third of the time of the
whole eviction, and storing into a list through ``map(list.__setitem__, ...)`` cost more
than a Python loop (Python 3.11). So
`evict_drawn` is one loop of plain list operations per victim, with nothing else in it
(no per-victim sample, no checks that hold for the whole burst).

Pure functions of the lists they are given: the caller holds the buffer's lock.
"""

from __future__ import annotations

__all__ = ["evict_drawn"]


def evict_drawn(
    drawn: list[int],
    pos: list[int],
    draws: list[int],
    ins: list[int],
    hist: dict[int, int],
    uniforms: list[float],
    choices: int,
    first_id: int,
    first_pos: int,
) -> list[int]:
    """Evict ``len(uniforms) // choices`` drawn samples, one after the other, as as many
    calls of `ReservoirBuffer._insert` into a full buffer evict them; return their
    slots, in order.

    Victim ``i`` is chosen among the ``k - i`` slots left in `drawn` (``k`` its length
    now) with the uniforms ``[i * choices, (i + 1) * choices)``: with ``choices == 1``
    the slot at position ``int(u * (k - i))`` (the last on a float rounding), otherwise
    the most drawn of the ``choices`` candidates so picked (`draws`; the first on a
    tie). It is swap-removed from `drawn` (the last slot takes its place: `pos` says
    so), its draw count is added to the reuse histogram `hist` and reset to 0, and it
    gets insert id ``first_id + i`` and position ``first_pos + i``: the caller appends
    the victims to its undrawn list (at `first_pos`) and stores their samples.
    """
    victims: list[int] = []
    add, pop, seen = victims.append, drawn.pop, hist.get
    k = len(drawn)
    i, p = first_id, first_pos
    if choices == 1:  # the default: the loop is the whole cost, kept to the bare stores
        for u in uniforms:
            j = int(u * k)
            k -= 1
            last = pop()
            if j < k:  # not the last: the last takes its place
                v = drawn[j]
                drawn[j] = last
                pos[last] = j
            else:  # the last itself (j == k, or k + 1 on a float rounding)
                v = last
            count = draws[v]
            hist[count] = seen(count, 0) + 1
            draws[v] = 0
            ins[v] = i
            i += 1
            pos[v] = p
            p += 1
            add(v)
        return victims
    for start in range(0, len(uniforms), choices):
        best, most = 0, -1
        for u in uniforms[start : start + choices]:
            j = int(u * k)
            if j >= k:  # float rounding guard
                j = k - 1
            count = draws[drawn[j]]
            if count > most:
                best, most = j, count
        k -= 1
        last = pop()
        if best < k:
            v = drawn[best]
            drawn[best] = last
            pos[last] = best
        else:
            v = last
        hist[most] = seen(most, 0) + 1
        draws[v] = 0
        ins[v] = i
        i += 1
        pos[v] = p
        p += 1
        add(v)
    return victims
