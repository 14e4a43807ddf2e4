"""What the ledger checker (`lineage_check`) says of many (simulation, time step) pairs
or ids, short enough to read: `spans` writes ids as ranges ("0-95, 128-199"), and
`missing_line` is the MISSING line, naming each pair when there are few, else the time
steps missing by the simulations that miss them.

A user's killed run of 200 simulations missed 10048 samples: its MISSING line named
ten of them, all of simulation 0 (time steps 50 to 59), then "10038 more", saying
neither which simulations nor which steps. Imports nothing of the package but
`common.words`."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from melissa_trainer.common.words import plural

__all__ = ["MOST_PAIRS", "missing_line", "spans"]

#: up to this many missing pairs, the MISSING line names each (as the DUPLICATES line)
MOST_PAIRS = 10
#: at most this many groups of simulations missing the same time steps, then "N more"
MOST_GROUPS = 5
#: at most this many ranges in a list of ids, then "N more"
MOST_SPANS = 6


def spans(values: Iterable[int], most: int = MOST_SPANS) -> str:
    """`values` (any order, repeats ignored) as ranges of consecutive ids, ascending:
    ``[0, 1, 2, 5, 7, 8]`` -> "0-2, 5, 7-8"; after `most` ranges, how many ids more
    (", and 40 more")."""
    ordered = sorted(set(values))
    runs: list[list[int]] = []
    for value in ordered:
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    said = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:most])
    left = sum(b - a + 1 for a, b in runs[most:])
    return said + (f", and {left} more" if left else "")


def missing_line(missing: Sequence[tuple[int, int]]) -> str:
    """The MISSING line of the (simulation, time step) pairs never trained on: up to
    `MOST_PAIRS` each named ("simulation 0 time step 2, ..."), more by group, the
    simulations that miss the same time steps together ("time steps 50-99 of
    simulations 0-95, 128-199; ..."), at most `MOST_GROUPS` groups, then how many
    simulations more."""
    head = f"MISSING: {plural(len(missing), 'sample')} never trained on: "
    if len(missing) <= MOST_PAIRS:
        return head + ", ".join(f"simulation {s} time step {t}" for s, t in missing)
    steps: dict[int, list[int]] = collections.defaultdict(list)
    for s, t in missing:
        steps[s].append(t)
    # the simulations missing the same time steps, in the order of their first
    groups: dict[tuple[int, ...], list[int]] = collections.defaultdict(list)
    for s in sorted(steps):
        groups[tuple(sorted(set(steps[s])))].append(s)
    said = [
        f"time {'step' if len(ts) == 1 else 'steps'} {spans(ts)} of "
        f"{'simulation' if len(sims) == 1 else 'simulations'} {spans(sims)}"
        for ts, sims in list(groups.items())[:MOST_GROUPS]
    ]
    left = sum(len(sims) for sims in list(groups.values())[MOST_GROUPS:])
    return head + "; ".join(said) + (f"; and {plural(left, 'simulation')} more" if left else "")
