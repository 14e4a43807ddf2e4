"""A rank that waits for a batch no sample comes for fails, saying why: no silent hang.

The ranks train in step: each takes its window's batches, then they agree (a
collective) on how many steps all can run. A rank that cannot form a batch therefore
holds every other rank in that agreement; their training draws nothing, their buffers
fill (a reservoir's rate limiter holds inserts back once its draws stop), their
simulations wait on that back-pressure, and the launcher, its job slots held by those
simulations, starts no more; the starved rank's stream never ends, and nothing moves.
A 2-rank trial of one-step simulations (all routed to rank 0 under the routing
``t % W``) sat at step 0 until killed, also with ``stall_timeout=60``. The receivers'
stall watchdog did not end it: rank 1's receiver, silent once the last BYE came,
excused that silence as the launcher's start-up allowance (600 s by default: a rank
other than 0 cannot ask the launcher); rank 0's receiver, blocked on its full buffer,
makes no empty poll, so its clock does not run; and a watchdog of messages is reset by
HELLOs, BYEs and duplicates that bring no sample.

So the starved rank judges itself on *samples*, while its training thread waits for a
batch (`Study.wait_for` with a timeout: a read found too few): once no sample has
reached its buffer for `stall_timeout` s of one wait, and the launcher does not explain
the silence (rank 0: `Launcher.silence_explained`, jobs queued or within their start-up
allowance; another rank: what rank 0 published, `study.progress`, or without it the
start-up allowance, `other_rank_excuse`), the wait fails with `StarvedRankError`,
naming the rank, what its buffer holds against the batch it needs, rank 0's state when
known (its receiver back-pressured, its jobs and pending simulations), and the fixes.
A silence that the receiver's own watchdog has (its socket empty and its clock
running unexcused) is left to it: it fails the study within `stall_timeout` of the last
message, naming the simulations it waits for, as before. This is a stall detection,
not a proof of deadlock: a solver silent longer than `stall_timeout` between two
samples of a rank that waits for them fails too, as a silent stream always did (the
message says to raise `stall_timeout` then).

An explained wait is logged once per wait (a WARNING saying what it waits for).
Not thread-safe: the training thread's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import Buffer, BufferStats
from melissa_trainer.launcher import Launcher
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.launch import other_rank_excuse
from melissa_trainer.study.progress import read_progress

__all__ = ["StarvationWatch", "StarvedRankError", "starved_words", "study_watch"]

logger = logging.getLogger(__name__)

#: idle seconds -> what the silence waits for (words), or None: not explained
Excuse = Callable[[float], str | None]
#: what is known of the other ranks, in words ("" when nothing)
Peers = Callable[[], str]


class StarvedRankError(SourceError):
    """A rank waited `stall_timeout` s for a batch with no sample coming (module docstring)."""


def starved_words(
    rank: int,
    world: int,
    idle: float,
    stall_timeout: float,
    wanted: int,
    size: int,
    put: int,
    peers: str,
) -> str:
    """The error's message: the rank, what it holds against the batch it needs, what
    is known of the others (`peers`, a sentence or ""), why it hangs, and the fixes."""
    held = (
        "; it holds a batch's worth, but its draws are held back (a watermark not reached, "
        "or a reservoir's rate limiter waiting for new samples)"
        if size >= wanted
        else ""
    )
    return (
        f"rank {rank} of {world} cannot train: it waits for a batch of {wanted} samples and "
        f"no sample has reached its buffer for {idle:.0f} s (stall_timeout={stall_timeout:g})"
        f": its buffer holds {size} samples, {put} received in all{held}. {peers}"
        f"The ranks train in step, so a rank that cannot form a batch holds every other "
        f"one back: their buffers fill, their simulations wait on that back-pressure and "
        f"the launcher starts no more, so this rank's data would never come (time step t "
        f"of simulation s goes to rank (s + t) mod {world}: with few simulations, or few "
        f"time steps each, a rank may get fewer samples than a batch). Fix: a smaller "
        f"batch_size (or watermark) than the samples each rank gets, more simulations or "
        f"more time steps each, buffer='fifo' (a reservoir's rate limiter holds inserts "
        f"back while its rank cannot draw), or fewer ranks (--num_processes); or raise "
        f"ReceiverConfig(stall_timeout=...) if a solver takes longer than that between "
        f"two samples of a rank"
    )


class StarvationWatch:
    """The clock of one rank's wait for a batch (module docstring).

    Args:
        rank, world: this rank and the number of ranks.
        stall_timeout: seconds without a sample, in one wait, before it fails (None:
            never).
        excuse: what the silence waits for, if explained (checked past the timeout).
        peers: what is known of the other ranks, for the message.
        put: the samples received so far by this rank's receiver (a counter read).
        stats: this rank's buffer's counters (read once, for the message).
        clock: monotonic seconds (tests give their own).
        stream_has_it: True while the receiver's own stall watchdog has the silence (its
            socket empty, its clock running unexcused): it fails the study within
            `stall_timeout` of its last message, with its own message (which simulations
            it waits for), so this watch waits for it (default: never).
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
    ) -> None:
        self.rank, self.world, self.stall_timeout = rank, world, stall_timeout
        self._stream_has_it = stream_has_it
        self._excuse, self._peers, self._clock = excuse, peers, clock
        self._put_count, self._stats = put, stats
        self._since: float | None = None  # the wait's start, or its last sample's arrival
        self._put = -1  # samples received at that moment
        self._told: float | None = None  # the `_since` whose excuse was said

    def check(self, wanted: int, timeout: float) -> None:
        """At each `Study.wait_for(wanted, timeout)`: a `timeout` of 0 comes before a
        read (no wait in progress: the next one starts afresh), a positive one while a
        read found too few (`waiting`)."""
        if timeout <= 0:
            self._since = None
        else:
            self.waiting(wanted)

    def waiting(self, wanted: int) -> None:
        """The training thread waits for a batch of `wanted` samples: raise
        `StarvedRankError` if no sample came for `stall_timeout` s of this wait and
        nothing explains it. Cheap (a counter and a clock read) until the timeout."""
        now, put = self._clock(), self._put_count()
        if self._since is None or put != self._put:
            self._since, self._put = now, put
            return
        idle = now - self._since
        if self.stall_timeout is None or idle <= self.stall_timeout or self._stream_has_it():
            return
        why = self._excuse(idle)
        if why is not None:
            if self._told != self._since:
                self._told = self._since
                logger.warning(
                    "rank %d has waited %.0f s for a batch of %d samples with no sample "
                    "coming (past stall_timeout=%g), not a stall: %s. Said once per wait",
                    self.rank, idle, wanted, self.stall_timeout, why,
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
            )  # fmt: skip
        )


def rank0_words(progress: dict[str, Any] | None, rank: int) -> str:
    """What rank 0 published (`study.progress`), as a sentence for another rank's
    message ("" on rank 0 itself, whose own launcher `launcher_words` says)."""
    if progress is None:
        return "Rank 0's state is not known here. "
    held = progress.get("backpressured_for")
    counts = (
        f"{progress.get('jobs_alive', '?')} jobs alive, {progress.get('pending', '?')} "
        f"simulations pending, {progress.get('finished', '?')} finished"
    )
    if held is None:
        return f"Rank 0's launcher: {counts}. "
    return (
        f"Rank 0's receiver has waited for room in its buffer for {float(held):.0f} s "
        f"(back-pressure: it waits for rank {rank}, in the step agreement), and its launcher "
        f"starts no more: {counts}. "
    )


def launcher_words(summary: dict[str, float], jobs_alive: int, backpressured: bool) -> str:
    """Rank 0's own launcher, as a sentence for its message."""
    held = "its receiver waits for room in its buffer; " if backpressured else ""
    return (
        f"Rank 0's launcher: {held}{jobs_alive} jobs alive, {int(summary.get('pending', 0))} "
        f"simulations pending, {int(summary.get('finished', 0))} finished (the other ranks' "
        f"state is not known here: one whose buffer is full waits for this one in the step "
        f"agreement). "
    )


def study_watch(
    launcher: Launcher, stream: StreamSource, buffer: Buffer, rank: int, world: int
) -> StarvationWatch:
    """The watch of a `Study`'s rank (after its stream's `start`): on rank 0 its
    launcher explains a silence and describes itself; on another rank what rank 0
    published in the rendezvous directory does (`study.progress`, read at most once a
    second), or without it the launcher's start-up allowance (`other_rank_excuse`)."""
    config = stream.config
    rendezvous, run_id = Path(config.rendezvous_dir or "."), config.run_id

    def put() -> int:
        receiver = stream.receiver
        return 0 if receiver is None else receiver.ingest.samples_put

    fallback = other_rank_excuse(launcher.tuning)  # (the receiver's, on a rank but 0)
    stream_excuse = launcher.silence_explained if rank == 0 else fallback

    def stream_has_it() -> bool:
        receiver = stream.receiver
        idle = 0.0 if receiver is None else receiver.idle_seconds()
        return idle > 0 and (stream_excuse is None or stream_excuse(idle) is None)

    if rank == 0:
        return StarvationWatch(
            rank, world, config.stall_timeout,
            launcher.silence_explained,
            lambda: launcher_words(
                launcher.summary(), launcher.jobs_alive(), launcher.data_backpressured()
            ),
            put, buffer.stats, stream_has_it=stream_has_it,
        )  # fmt: skip
    read: list[Any] = [-float("inf"), None]  # (when, what) of the last read

    def progress() -> dict[str, Any] | None:
        now = time.monotonic()
        if now - read[0] >= 1.0:
            read[:] = [now, read_progress(rendezvous, run_id)]
        return read[1]

    def excuse(idle: float) -> str | None:
        said = progress()
        if said is None:
            return None if fallback is None else fallback(idle)
        explained = said.get("explained")
        return f"rank 0's launcher says: {explained}" if explained else None

    return StarvationWatch(
        rank, world, config.stall_timeout, excuse, lambda: rank0_words(progress(), rank),
        put, buffer.stats, stream_has_it=stream_has_it,
    )  # fmt: skip
