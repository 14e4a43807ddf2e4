"""Training that waits long for data says so: no silent wait.

A rank's training blocks in `StreamDataset` while its buffer serves nothing: a
simulation hangs without sending, the stream is slower than training, a reservoir's
`sample_to_insert_ratio` holds draws until new samples arrive. The launcher's and the
stream's timeouts end a wait that never ends (a silent simulation is killed after its
``simulation_timeout``, 120 s at least by default; a silent stream fails after its
``stall_timeout``), but until then nothing was said: a user saw the log stop for
minutes and could not tell a hang from a slow solver. `DataWait` logs a WARNING when a
wait passes `WAIT_NOTICE` s, and again each time it doubles, naming what the buffer
holds and what ends the wait. Not before the first sample is put: that wait (a study's
start-up, simulations started by hand) is said by the source (`sources.first_data`,
the stream's watchdog).

A rank that already holds batches but waits for the rest of its window (the trainer
takes ``stop_sync_steps`` x ``gradient_accumulation_steps`` batches before the ranks
agree to run them; under several ranks, from the second window on, the next window's
too; a run's first window is one step, so its first step waits for one step's
batches only) says so once, after `WINDOW_NOTICE` s, with the setting that shortens
it and what holds a window back in the buffer in use (`Buffer.kind`): with a FIFO or
FIRO buffer each batch is new data, so a slow stream delays every window; a reservoir
waits only while it holds its draws back (its watermark, its sample_to_insert_ratio).

Not thread-safe: the training thread's (one consumer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch.distributed as dist

from melissa_trainer.buffers import Buffer
from melissa_trainer.common.words import plural

__all__ = ["WAIT_NOTICE", "WINDOW_NOTICE", "DataWait", "in_queue"]

logger = logging.getLogger("melissa_trainer.core.dataset")

#: seconds of one wait for data before training says it waits (then at 2x, 4x...)
WAIT_NOTICE = 60.0
#: seconds a rank holding part of a window waits for the rest before it says why (once)
WINDOW_NOTICE = 5.0


def in_queue(queued: int, reasons: dict[str, int], what: str) -> str:
    """ ", N queued by the scheduler (...)" for a notice, or "" when none is queued:
    `queued` jobs not started by their scheduler, `reasons` its reasons with their
    counts (`Launcher.queued`), `what` the jobs' kind ("simulation", "worker"). The one
    wording of a study's queue: the first-data notice's (`study.first_data`) and the
    later waits' (`DataWait`)."""
    if not queued:
        return ""
    why = ", ".join(f"{reason} x{n}" if n > 1 else reason for reason, n in sorted(reasons.items()))
    text = f", {plural(queued, what)} queued by the scheduler, not started yet"
    if why:
        text += f" (the scheduler's reason: {why})"
    if what == "simulation":  # (`supervisor.note_startups`: queued is not silent)
        text += " and not timed: their start-up allowance begins when they run"
    return text


#: what `DataWait` asks of the launcher's queue: `Launcher.queued`
Queued = Callable[[], tuple[int, dict[str, int]]]


class DataWait:
    """The clock of the current wait for data. `empty` at each read that found none,
    `served` at each that found some; `notice` (seconds, default `WAIT_NOTICE` when
    constructed) may be changed at any time. `launched`: a launcher runs the simulations
    (a `Study`), which kills one silent past its timeout and runs it again; False in
    external mode (simulations started by hand) and with an in-process source, where
    nothing does, and the notice says so instead (a user trial read the launcher's words
    in external mode). `queued` (a `Launcher.queued`; None: no launcher here): the
    notice counts the jobs the scheduler still queues, with its reasons (`in_queue`),
    as the first-data notice does (htrial30: simulations PENDING in Slurm's queue went
    unmentioned in the later waits)."""

    def __init__(
        self,
        notice: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        launched: bool = True,
        queued: Queued | None = None,
    ):
        self.notice = WAIT_NOTICE if notice is None else float(notice)
        self.launched = launched
        self.queued = queued
        self._clock = clock
        self._since: float | None = None
        self._next = self.notice
        #: as `notice`, for the wait for the rest of a window (`window`), said once
        self.window_notice = WINDOW_NOTICE
        self._window: tuple[int, int] = (0, 0)
        self._window_since: float | None = None
        self._window_said = False

    def window(self, held: int, wanted: int) -> None:
        """The reader holds `held` of the `wanted` batches it waits for (the trainer's
        window, `StreamDataset.prefetch`): the window's clock runs from the first held
        batch until all are held."""
        self._window = (held, wanted)
        if held <= 0 or held >= wanted:
            self._window_since = None
        elif self._window_since is None:
            self._window_since = self._clock()

    def served(self) -> None:
        """Data came: the wait, if any, is over."""
        self._since = None

    def empty(self, buffer: Buffer, wanted: int) -> None:
        """A read of `wanted` samples found none: start the clock, or say the wait
        when it has passed the next notice."""
        now = self._clock()
        if self._window_since is not None and not self._window_said:
            # (getattr: a duck-typed buffer of a user may have no kind: neutral words)
            self._say_window(now - self._window_since, getattr(buffer, "kind", ""))
        if self._since is None:
            self._since, self._next = now, self.notice
            return
        waited = now - self._since
        if waited < self._next:
            return
        self._next = 2 * max(self._next, waited)
        stats = buffer.stats()
        if stats.put == 0:  # the first data: the source's own notices say that wait
            return
        held = (
            "; it holds enough for a batch, so draws are held back: a --watermark not "
            "reached yet, or a reservoir's --sample_to_insert_ratio waiting for new samples"
            if stats.size >= wanted
            else ""
        )
        queue = in_queue(*self.queued(), "simulation") if self.queued is not None else ""
        logger.warning(
            "training%s has waited %.3g s for data (a batch of %d samples): the buffer "
            "holds %d samples of %d, %d put so far%s%s. Training goes on when data comes; "
            "%s. Said again at %.3g s",
            _of_rank(), waited, wanted, stats.size, stats.capacity, stats.put, queue, held,
            _ENDS[self.launched], self._next,
        )  # fmt: skip

    def _say_window(self, waited: float, kind: str) -> None:
        """Say the wait for the rest of a window (once, past `window_notice`), with what
        holds a window back in a buffer of this `kind` (`Buffer.kind`: "fifo", "firo",
        "reservoir"; any other, a user's buffer, gets the words that hold for all)."""
        if waited < self.window_notice:
            return
        self._window_said = True
        held, wanted = self._window
        logger.warning(
            "training%s holds %d of the %d batches it takes before its next steps and "
            "has waited %.3g s for the rest: each rank takes a window of stop_sync_steps x "
            "gradient_accumulation_steps batches (under several ranks, from the second "
            "window on, the next one's too) before the ranks agree to run them. %s; a "
            "lower --stop_sync_steps makes windows shorter. Said once",
            _of_rank(), held, wanted, waited, _WINDOW_CAUSE.get(kind, _WINDOW_CAUSE[""]),
        )  # fmt: skip


def _of_rank() -> str:
    """ " of rank R" under several ranks, else "": each rank says its own wait, and two
    lines alike but for their figures read as one said twice (htrial10, 2026-12-07: the
    window notice, "Said once", came twice under two ranks, naming neither)."""
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return f" of rank {dist.get_rank()}"
    return ""


#: launched (`DataWait.launched`) -> what ends a wait for data that never ends
_ENDS = {
    True: "a simulation silent past its timeout is killed and run again, a stream silent "
    "past its stall_timeout fails (their own lines say so)",
    False: "no launcher runs the simulations here (started by hand: external mode), so "
    "none is killed or run again: start again one that stopped or hangs; a stream silent "
    "past its stall_timeout fails (its own line says so)",
}

#: buffer kind -> what holds its window back (`DataWait._say_window`)
_WINDOW_CAUSE = {
    **dict.fromkeys(
        ("fifo", "firo"),
        "With a FIFO or FIRO buffer each batch is new data, so a slow stream holds every "
        "window back (a reservoir, --buffer reservoir, re-draws the samples it holds and "
        "waits less)",
    ),
    "reservoir": "The reservoir re-draws the samples it holds, so it waits only while it "
    "holds back draws: its --watermark not reached yet, or its --sample_to_insert_ratio "
    "waiting for new samples (a slow stream holds every window back then)",
    "": "A slow stream holds every window back",
}
