"""What the stream brought each rank, in the words of the end-of-run reuse warning
(`hooks.reuse.reuse_report`): each rank's figure, never a mean presented as one."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["Shares"]


class Shares:
    """What the stream brought the ranks, in the warning's words: `low`, the fewest
    samples a rank received (every step waits for every rank: that rank bounds the run),
    and whose figure it is. Each rank's figure when `rank_puts` (in rank order) has one
    per rank adding up to `put` and they differ (up to `LISTED` ranks, else their range);
    else the mean, said to be one under several ranks (a mean presented as "per rank"
    read as each rank's, of ranks that took 30 and 11)."""

    #: ranks named one by one; more are given as a range
    LISTED = 4

    def __init__(self, put: float, num_processes: int, rank_puts: Sequence[int]) -> None:
        known = len(rank_puts) == num_processes and sum(rank_puts) == round(put)
        if known and num_processes > 1 and len(set(rank_puts)) > 1:
            self.low = float(min(rank_puts))
            fewest = [r for r, n in enumerate(rank_puts) if n == self.low]
            ranks = f"rank {fewest[0]}" if len(fewest) == 1 else f"ranks {_listed(fewest)}"
            if num_processes <= self.LISTED:
                each = _listed([f"{n} on rank {r}" for r, n in enumerate(rank_puts)])
            else:
                each = f"{self.low:.0f} to {max(rank_puts)} per rank"
            self.who, self.each = ranks, each
            self.buffer = f"{ranks}'s buffer" if len(fewest) == 1 else f"the buffers of {ranks}"
            self.listing = f"{each}; "
            self.received = f"{ranks} received (the fewest: {each})"
            return
        self.low = put / num_processes
        mean = " on average" if num_processes > 1 and not known else ""
        self.who, self.each = f"each rank{mean}", f"{self.low:.0f} per rank{mean}"
        self.buffer, self.listing, self.received = "the buffer", "", f"each rank received{mean}"


def _listed(items: Sequence[object]) -> str:
    """ "a", "a and b", "a, b and c"."""
    words = [str(i) for i in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + f" and {words[-1]}"
