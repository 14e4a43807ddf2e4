"""A rank that waits for a batch no sample comes for fails, saying why: no silent hang.

The ranks train in step: each takes its window's batches, then they agree (a
collective) on how many steps all can run. A rank that cannot form a batch therefore
holds every other rank in that agreement; their training draws nothing, their buffers
fill (a reservoir's rate limiter holds inserts back once its draws stop), their
simulations wait on that back-pressure and, in a study, the launcher, bounded in the
simulations whose data is not in, starts no more; the starved rank's stream never
ends, and nothing moves. The receivers' stall watchdog does not see it: a blocked
receiver makes no empty poll (its clock does not run), and a watchdog of messages is
reset by HELLOs, BYEs and duplicates that bring no sample.

So a rank judges itself on *samples*, while its training thread waits for a batch
(`wait_for` with a timeout: a read found too few): once no sample has reached its
buffer for `stall_timeout` s of one wait, and nothing explains the silence (`excuse`),
the wait fails with `StarvedRankError`, naming the rank, what its buffer holds against
the batch it needs, what is known of the others (`peers`) and the fixes. A silence that
the receiver's own watchdog has (its socket empty and its clock running unexcused) is
left to it: it fails within `stall_timeout` of the last message, naming the
simulations it waits for. This is a stall detection: a solver silent longer than
`stall_timeout` between two samples of a rank that waits for them fails too (the
message says to raise `stall_timeout` then). A caller that knows more may say sooner
that the wait can never end (`deadlock`: a `Study`, from rank 0's launcher), or that
the study it waits on has failed (`failed`: the wait ends with the study's error).

Where it runs: a `StreamSource` on its own (external mode: the user starts the
simulations) runs `external_watch`, whose words say that no launcher starts more (the
user's simulations must); a `Study` replaces it by its own (`study.starvation`).

A wait past `REPORT_AFTER` s with no sample is told to `report` (a `Study` tells rank
0, whose launcher may then start more: `study.progress`), and its end too. An explained
wait is logged once per wait (a WARNING saying what it waits for).

The watch also keeps the cadence of its training thread's reads (`ReadClock`, in
`read_clock`), which rank 0 publishes.
Not thread-safe: the training thread's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from melissa_trainer.buffers import Buffer, BufferStats
from melissa_trainer.common.words import plural
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.read_clock import ReadClock
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.watchdog import SilenceExcuse

__all__ = [
    "REPORT_AFTER",
    "StarvationWatch",
    "StarvedRankError",
    "external_watch",
    "starved_words",
]

logger = logging.getLogger(__name__)

#: idle seconds -> what the silence waits for (words), or None: not explained
Excuse = Callable[[float], str | None]
#: what is known of the other ranks, in words ("" when nothing)
Peers = Callable[[], str]
#: seconds of a wait with no sample before it is told to `report`
REPORT_AFTER = 2.0


class StarvedRankError(SourceError):
    """A rank waited for a batch with no sample coming (module docstring)."""


def hang_and_fixes(world: int, external: bool, deadlock: bool = False) -> str:
    """Why a starved rank hangs every rank, and the fixes (`external`: the user starts
    the simulations; `deadlock`: the wait is known never to end, no timeout to raise)."""
    who = (
        "the simulations you start wait on that back-pressure (no launcher starts more "
        "in external mode: yours must)"
        if external
        else "their simulations wait on that back-pressure and the launcher starts no more"
    )
    more = (
        "start more simulations (or more time steps each) that send this rank samples"
        if external
        else "more simulations or more time steps each"
    )
    fix = (
        f"The ranks train in step, so a rank that cannot form a batch holds every other "
        f"one back: their buffers fill, {who}, so this rank's data would never come (time "
        f"step t of simulation s goes to rank (s + t) mod {world}: with few simulations, "
        f"or few time steps each, a rank may get fewer samples than a batch). Fix: a "
        f"smaller batch_size (or watermark) than the samples each rank gets, {more}, "
        f"buffer='fifo' (a reservoir's rate limiter holds inserts back while its rank "
        f"cannot draw), or fewer ranks (--num_processes)"
    )
    if deadlock:
        return fix
    return (
        f"{fix}; or raise ReceiverConfig(stall_timeout=...) if a solver takes longer than "
        f"that between two samples of a rank"
    )


def starved_words(
    rank: int,
    world: int,
    idle: float,
    stall_timeout: float,
    wanted: int,
    size: int,
    put: int,
    peers: str,
    external: bool = False,
) -> str:
    """The error's message: the rank, what it holds against the batch it needs, what
    is known of the others (`peers`, a sentence or ""), why it hangs, and the fixes."""
    return (
        f"rank {rank} of {world} cannot train: it waits for a batch of "
        f"{plural(wanted, 'sample')} and "
        f"no sample has reached its buffer for {idle:.0f} s (stall_timeout={stall_timeout:g})"
        f": {holds(size, put, wanted)}. {peers}{hang_and_fixes(world, external)}"
    )


def holds(size: int, put: int, wanted: int) -> str:
    """What a starved rank's buffer holds, in words."""
    held = (
        "; it holds a batch's worth, but its draws are held back (a watermark not reached, "
        "or a reservoir's rate limiter waiting for new samples)"
        if size >= wanted
        else ""
    )
    return f"its buffer holds {plural(size, 'sample')}, {put} received in all{held}"


class StarvationWatch:
    """The clock of one rank's wait for a batch (module docstring), and of its reads
    (`reads`, the same clock's).

    Args:
        rank, world: this rank and the number of ranks.
        stall_timeout: seconds without a sample, in one wait, before it fails (None:
            never, unless `deadlock` says so).
        excuse: what the silence waits for, if explained (checked past the timeout).
        peers: what is known of the other ranks, for the message.
        put: the samples received so far by this rank's receiver (a counter read).
        stats: this rank's buffer's counters (read once, for the message).
        clock: monotonic seconds (tests give their own).
        stream_has_it: True while the receiver's own stall watchdog has the silence (its
            socket empty, its clock running unexcused): it fails the study within
            `stall_timeout` of its last message, with its own message (which simulations
            it waits for), so this watch waits for it (default: never).
        external: the user starts the simulations (the message's fixes say so).
        report: told the idle seconds once a wait has had no sample for `REPORT_AFTER`
            s, and None when that wait ends (a sample came, or a read).
        deadlock: given the idle seconds of a reported wait and the batch wanted, the
            message of a wait known never to end, or None; checked at each wait.
        failed: given the batch wanted, the message of a study known to have failed
            (a `Study`'s rank other than 0: rank 0's launcher gave up), or None; checked
            first at each wait, samples coming or not: the wait ends with a `SourceError`
            of that message (not a starvation: no fixes of one).
    """

    def __init__(
        self,
        rank: int,
        world: int,
        stall_timeout: float | None,
        excuse: Excuse,
        peers: Peers,
        put: Callable[[], int],
        stats: Callable[[], BufferStats],
        clock: Callable[[], float] = time.monotonic,
        stream_has_it: Callable[[], bool] = lambda: False,
        external: bool = False,
        report: Callable[[float | None], None] | None = None,
        deadlock: Callable[[float, int], str | None] | None = None,
        failed: Callable[[int], str | None] | None = None,
    ) -> None:
        self.rank, self.world, self.stall_timeout = rank, world, stall_timeout
        self._stream_has_it, self._external = stream_has_it, external
        self._excuse, self._peers, self._clock = excuse, peers, clock
        self._put_count, self._stats = put, stats
        self._report, self._deadlock, self._failed = report, deadlock, failed
        self._since: float | None = None  # the wait's start, or its last sample's arrival
        self._put = -1  # samples received at that moment
        self._told: float | None = None  # the `_since` whose excuse was said
        self._reported = False  # this wait (since `_since`) was told to `report`
        #: the training thread's reads (`ReadClock`): rank 0 publishes them
        self.reads = ReadClock(clock)

    def check(self, wanted: int, timeout: float) -> None:
        """At each `wait_for(wanted, timeout)`: a `timeout` of 0 comes before a read (no
        wait in progress: the next one starts afresh), a positive one while a read found
        too few (`waiting`)."""
        self.reads.came(read=timeout <= 0)
        if timeout <= 0:
            self._since = None
            self._unreport()
        else:
            self.waiting(wanted)

    def _unreport(self) -> None:
        if self._reported:
            self._reported = False
            if self._report is not None:
                self._report(None)

    def waiting(self, wanted: int) -> None:
        """The training thread waits for a batch of `wanted` samples: raise
        `StarvedRankError` if no sample came for `stall_timeout` s of this wait and
        nothing explains it, or if `deadlock` says it never ends. Cheap (a counter and
        a clock read) until `REPORT_AFTER`; before that, `failed` (module docstring)."""
        said = None if self._failed is None else self._failed(wanted)
        if said is not None:  # (its own story: no `__cause__`, no starvation advice)
            raise SourceError(said)
        now, put = self._clock(), self._put_count()
        if self._since is None or put != self._put:
            self._since, self._put = now, put
            self._unreport()
            return
        idle = now - self._since
        if idle >= REPORT_AFTER and self._report is not None and not self._reported:
            self._reported = True
            self._report(idle)
        if self._reported and self._deadlock is not None:
            words = self._deadlock(idle, wanted)
            if words is not None:
                stats = self._stats()
                raise StarvedRankError(
                    f"rank {self.rank} of {self.world} cannot train, and nothing can change "
                    f"that: it waits for a batch of {plural(wanted, 'sample')}, "
                    f"{holds(stats.size, stats.put, wanted)}, none for {idle:.0f} s. "
                    f"{words}{hang_and_fixes(self.world, self._external, deadlock=True)}"
                )
        if self.stall_timeout is None or idle <= self.stall_timeout or self._stream_has_it():
            return
        why = self._excuse(idle)
        if why is not None:
            if self._told != self._since:
                self._told = self._since
                logger.warning(
                    "rank %d has waited %.0f s for a batch of %s with no sample "
                    "coming (past stall_timeout=%g), not a stall: %s. Said once per wait",
                    self.rank, idle, plural(wanted, "sample"), self.stall_timeout, why,
                )  # fmt: skip
            return
        stats = self._stats()
        raise StarvedRankError(
            starved_words(
                self.rank,
                self.world,
                idle,
                self.stall_timeout,
                wanted,
                stats.size,
                stats.put,
                self._peers(),
                self._external,
            )  # fmt: skip
        )


def external_watch(
    receiver: Receiver,
    excuse: Callable[[], SilenceExcuse | None],
    buffer: Buffer,
    rank: int,
    world: int,
    stall_timeout: float | None,
    clock: Callable[[], float] = time.monotonic,
) -> StarvationWatch:
    """The watch of a `StreamSource` on its own (external mode), of its started
    `receiver`: nothing is known of the other ranks, no launcher explains a silence (the
    source's `excuse` does, if the user gave one), and the message's fixes are for the
    user's simulations to make (`clock`: as `StarvationWatch`'s)."""

    def silence(idle: float) -> str | None:
        said = excuse()
        return None if said is None else said(idle)

    def stream_has_it() -> bool:
        idle = receiver.idle_seconds()
        return idle > 0 and silence(idle) is None

    def peers() -> str:
        if receiver.backpressured():
            return "This rank's own receiver waits for room in its buffer. "
        return "The other ranks' state is not known here (external mode). "

    return StarvationWatch(
        rank, world, stall_timeout, silence, peers, lambda: receiver.ingest.samples_put,
        buffer.stats, clock, stream_has_it=stream_has_it, external=True,
    )  # fmt: skip
