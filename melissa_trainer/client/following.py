"""`Following`: a `Client`'s replay window and the switch of its transport to a
restarted trainer (the protocol and the steps are `follow`'s; the window `replay`'s).

The client's `send`, `flush` and `close` go through `send`, `flush` and `close` here:
a send looks at the rendezvous first (cheap unless `follow.CHECK_INTERVAL` has
passed) and keeps a copy of its step after; one that gives up on a receiver gone
(`send_wait.ReceiverGone`; a close's "not delivered") waits for a restarted trainer
(`after_gone`), follows it, and tries again. A send or close blocked on a receiver
disconnected gives up as soon as the rendezvous names a restarted trainer (`seen`), not
only after `disconnected_timeout`; unless its trainer's stop record said that
it stopped for good (`send_wait.StoppedForGood`, `closing.TrainerStopped`: read by the
send's wait and the close, `RestartCheck.stopped`): no trainer comes back, and the error
is raised at once, not after `follow_timeout`. A follow (`switch`) asks the new
receivers what they hold, releases the old transport (what it had queued is dropped:
the window has what is needed), makes the new one (its HELLO carries the new run id,
its BYE counts every step routed to each receiver) and sends again, from the window,
what they lack.

Not thread-safe: the client's thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, SupportsIndex

import numpy as np

from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.config import check_time_step
from melissa_trainer.client.follow import QUERY_TIMEOUT, Follower, FollowError, Superseded
from melissa_trainer.client.follow_words import follow_gave_up
from melissa_trainer.client.gave_up import rerun_words
from melissa_trainer.client.replay import ReplayWindow
from melissa_trainer.client.send_errors import ReceiverGone, StoppedForGood
from melissa_trainer.client.tuning import DEFAULT_DISCONNECTED_TIMEOUT
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_ABANDONED, HeldReply
from melissa_trainer.wire.routing import receiver_of

__all__ = ["Following", "Switchable", "steps_to_send"]

#: ``send_once(time_step, arrays, kwargs) -> fields given``: one try of `Client.send`
SendOnce = Callable[[SupportsIndex, Mapping[str, Any] | None, dict[str, Any]], Mapping[str, Any]]
#: ``follow(entries)``: the client switches to the restarted trainer of `entries`
Follow = Callable[[list[dict[str, Any]]], None]


class Switchable(Protocol):
    """What `Following.switch` reads of the transport it replaces."""

    @property
    def steps(self) -> list[StepSet]: ...

    #: whose steps it sent and how they were routed (`wire.routing`): the new
    #: transport routes them alike (the receivers honour each simulation's HELLO)
    simulation_id: int
    routing: str | None

    def abandon(self) -> None:
        """Release the sockets at once, dropping what is queued."""


def steps_to_send(
    sent: list[StepSet],
    replies: list[HeldReply],
    window: ReplayWindow,
    whose: str,
    advice: str,
    simulation_id: int = 0,
    routing: str | None = None,
) -> tuple[list[int], list[int]]:
    """(every step sent, sorted; the steps the new receivers lack, sorted): what the
    client must send again. Step t is asked of the receiver `routing` (the
    simulation's, `wire.routing`) sends it to.

    Raises:
        FollowError: a needed step left the window, or the trainer abandoned the
            simulation (the message names them, and `advice`).
    """
    world = len(replies)
    every = sorted(set().union(*(set(s) for s in sent)))
    if any(r.status == HELD_ABANDONED for r in replies):
        raise FollowError(
            f"{whose}: the restarted trainer abandoned this simulation (it takes nothing "
            f"more of it).{advice}"
        )
    needed = [
        t
        for t in every
        if not replies[receiver_of(simulation_id, t, world, routing)].holds(t, routing)
    ]
    missing = [t for t in needed if t not in window]
    if missing:
        shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
        raise FollowError(
            f"{whose}: the restarted trainer's checkpoint lacks {len(missing)} time "
            f"step(s) this simulation sent ({shown}) that have left its replay window "
            f"(ClientTuning.replay_bytes={window.max_bytes} bytes, or "
            f"$MELISSA_TRAINER_REPLAY_BYTES: make it hold what the simulation sends "
            f"between two checkpoints).{advice}"
        )
    return every, needed


class Following:
    """A client's window and follower (module docstring).

    Args:
        follower: notices and queries the restarted trainer.
        window: the copies of the last steps sent.
        follow_timeout: seconds to wait, once the trainer is found gone, for a new one.
        whose: "simulation 3 rank 0", for messages.
        advice: what a failure adds (run the simulation again with the same id).
    """

    def __init__(
        self,
        follower: Follower,
        window: ReplayWindow,
        follow_timeout: float | None,
        whose: str,
        advice: str,
    ) -> None:
        self.follower, self.window = follower, window
        self._timeout, self._whose, self._advice = follow_timeout, whose, advice
        #: the run a wait was told to follow at once (`seen`), until `after_gone` reads
        #: the rendezvous again to follow it: said if that read no longer finds it
        self._announced: str | None = None
        #: when the last restarted trainer was followed (`switch`; `time.monotonic()`,
        #: None: none yet): a close's budget in all counts from it if later than the
        #: close's start (`Client.close`; the C client's close_began)
        self.followed_at: float | None = None

    @classmethod
    def made_for(
        cls,
        rendezvous: str | None,
        replay_bytes: int,
        follow_timeout: float | None,
        simulation_id: int,
        rank: int,
        run_id: str | None,
        endpoints: Sequence[str],
        disconnected_timeout: float | None = DEFAULT_DISCONNECTED_TIMEOUT,
    ) -> Following | None:
        """A client's following, or None without a rendezvous or a window
        (`disconnected_timeout`: the tuning's, for its follow sockets' connects)."""
        if not replay_bytes or rendezvous is None:
            return None
        again = "Run this simulation again, with the same simulation id "
        again += f"(MELISSA_TRAINER_SIMULATION_ID={simulation_id})"
        return cls(
            Follower(rendezvous, simulation_id, run_id, endpoints, disconnected_timeout),
            ReplayWindow(replay_bytes),
            follow_timeout,
            f"simulation {simulation_id} rank {rank}",
            f" {rerun_words(simulation_id, again, first=True)}: the resumed trainer "
            f"keeps the steps it holds and takes the others, each once.",
        )

    def record(self, step: int, arrays: Mapping[str, Any]) -> None:
        self.window.record(step, arrays)

    def send(
        self,
        send_once: Callable[
            [SupportsIndex, Mapping[str, Any] | None, dict[str, Any]], Mapping[str, Any]
        ],
        follow: Follow,
        time_step: SupportsIndex,
        arrays: Mapping[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        """`Client.send` with a replay window: `follow` a restarted trainer first if the
        rendezvous names one, or after `send_once` gave up on a receiver gone (then try
        again); then keep a copy of the step."""
        started = time.monotonic()  # (an error after a follow wait counts the whole wait)
        if time.monotonic() >= self.follower.due_at and (entries := self.check()):
            follow(entries)
        while True:
            try:
                given = send_once(time_step, arrays, kwargs)
                break
            except ReceiverGone as exc:
                follow(self.after_gone(exc, started))
        step = time_step if type(time_step) is int else check_time_step(time_step)
        self.window.record(step, given)

    def flush(self, flush: Callable[[], None], follow: Follow) -> None:
        """`Client.flush`: `flush`, following a restarted trainer if it gave up on a
        receiver gone (then once more)."""
        started = time.monotonic()
        try:
            flush()
        except ReceiverGone as exc:
            follow(self.after_gone(exc, started))
            flush()

    def close(self, close: Callable[[], None], follow: Follow) -> None:
        """`Client.close` with a BYE: follow a trainer restarted since the last look,
        `close`, and if it did not deliver (a receiver gone), follow a restarted
        trainer and `close` once more."""
        started = time.monotonic()  # (its error counts the whole wait)
        entries = self.check(force=True)
        if entries is not None:
            follow(entries)
        try:
            close()
        except TimeoutError as exc:  # (a receiver gone: a restarted trainer, followed)
            if "not delivered" not in str(exc):
                raise
            follow(self.after_gone(exc, started))
            close()

    @property
    def due_at(self) -> float:
        """When a send should next look at the rendezvous (`time.monotonic()`)."""
        return self.follower.due_at

    def check(self, force: bool = False) -> list[dict[str, Any]] | None:
        """A restarted trainer's rendezvous entries if the rendezvous names one now
        (looked at once every `follow.CHECK_INTERVAL` s, or at once with `force`)."""
        if not force and not self.follower.due():
            return None
        return self.follower.restarted(force=force)

    def seen(self) -> str | None:
        """What a wait on a receiver disconnected (a blocked send's, `send_wait`; a
        close's, `patience.CloseWait`) reads, at most once a slice: "a restarted trainer
        published in DIR (run R): followed at once" if the rendezvous names another
        complete run now, else None. A ``stat`` of rank 0's file, read only once
        rewritten or every `follow.CHECK_INTERVAL` s (`Follower.rewritten`): the client's
        own trainer's file, unchanged or marked stopped, and a rendezvous half rewritten
        are not followed. The wait then gives up on the receiver at once and the client
        follows (`after_gone` finds the run), as the C client does, rather than after
        `disconnected_timeout` (a user trial: ~50 s after the C solver).

        The run is read again when followed (`after_gone`): the rendezvous may have
        changed in between (that trainer stopped as it started, a newer one rewriting
        it). The words say what is to come, not that it was done, and the run is kept
        for `after_gone` to say what became of it."""
        entries = self.follower.rewritten()
        if entries is None:
            return None
        rendezvous, run = self.follower.rendezvous, entries[0].get("run_id")
        self._announced = str(run)
        return f"a restarted trainer published in {rendezvous} (run {run}), to be followed at once"

    def after_gone(
        self, error: BaseException, started: float | None = None
    ) -> list[dict[str, Any]]:
        """The entries of the restarted trainer to follow, waiting `follow_timeout`
        for it; re-raises `error` if none published in time, or at once if it says that
        its trainer's stop record said it stopped for good (`StoppedForGood`, a send's;
        `TrainerStopped`, a close's, `SimulationNotNeeded` among them): no trainer comes
        back there. Given `started` (a close
        whose transport gave up, or a blocked send's `ReceiverGone`: the
        `time.monotonic()` it began), its message is completed with that wait, the
        whole one, and what to do (`follow_words.follow_gave_up`); a receipt's error says
        them already (`receipts`). An `error` that a wait raised on a run `seen`
        announced, which the rendezvous no longer names complete when read here (it
        stopped as it started, or is being rewritten), says so before that wait: the
        run seen is never said followed when it was not."""
        announced, self._announced = self._announced, None  # (this error's, if any)
        if isinstance(error, (StoppedForGood, TrainerStopped)):
            raise error  # (its stop record said why, read first: nothing to wait for)
        waiting = time.monotonic()
        entries = self.follower.wait_restarted(self._timeout)
        if entries is None:
            waited, sid = time.monotonic() - waiting, self.follower.simulation_id
            if started is not None:
                rendezvous = self.follower.rendezvous
                follow_gave_up(error, waited, self._timeout, rendezvous, started, sid, announced)
            raise error
        return entries

    def switch(
        self,
        old: Switchable,
        entries: list[dict[str, Any]],
        make: Callable[[list[dict[str, Any]]], Any],
        resend: Callable[[Any, int, dict[str, np.ndarray]], None],
        ask_within: float = QUERY_TIMEOUT,
        whole: bool = False,
    ) -> Any:
        """Follow the trainer of `entries` (or of a newer run published while it was
        asked and did not answer: `follow.Superseded`): ask, release `old`, `make` the new
        transport (opened: HELLO sent), record every step sent in its `steps`, and
        `resend` through it each step lacking. Returns the new transport. Each receiver
        of each run asked is awaited `ask_within` s; `whole` (a prediction's, bound by
        its request's timeout): all of them together, the runs superseded included.

        Raises:
            FollowError: as `steps_to_send`, or a receiver that cannot be asked
                (`follow.Unanswered`: no HELD within `ask_within` s, nothing done yet).
        """
        until = time.monotonic() + ask_within if whole else None
        while True:
            try:
                replies = self.follower.held(entries, ask_within, until)
                break
            except Superseded as newer:  # (killed as it started: its successor)
                entries = newer.entries
        sid, routing = old.simulation_id, old.routing
        every, needed = steps_to_send(
            old.steps, replies, self.window, self._whose, self._advice, sid, routing
        )
        old.abandon()  # (what it had queued is dropped: the window has what is needed)
        new = make(entries)
        world = len(entries)
        for t in every:
            new.steps[receiver_of(sid, t, world, routing)].add(t)
        self.follower.adopt(entries)
        self._announced = None  # (followed: what a wait said before is moot)
        for t in needed:
            resend(new, t, self.window[t])
        self.followed_at = time.monotonic()
        return new
