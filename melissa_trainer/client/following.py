"""`Following`: a `Client`'s replay window and the switch of its transport to a
restarted trainer (the protocol and the steps are `follow`'s; the window `replay`'s).

The client calls `check` before a send (cheap unless `follow.CHECK_INTERVAL` has
passed), `after_gone` when a send, flush or close gave up on a receiver gone, and
`record` after each send. A follow (`switch`) releases the old transport (what it had
queued is dropped: the window has it), asks the new receivers what they hold, makes
the new transport (its HELLO carries the new run id, its BYE counts every step routed
to each receiver) and sends again, from the window, what they lack.

Not thread-safe: the client's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from melissa_trainer.client.follow import Follower, FollowError
from melissa_trainer.client.replay import ReplayWindow
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.wire import HELD_ABANDONED, HeldReply

__all__ = ["Following", "Switchable", "steps_to_send"]


class Switchable(Protocol):
    """What `Following.switch` reads of the transport it replaces."""

    @property
    def steps(self) -> list[StepSet]: ...

    def abandon(self) -> None:
        """Release the sockets at once, dropping what is queued."""


def steps_to_send(
    sent: list[StepSet], replies: list[HeldReply], window: ReplayWindow, whose: str, advice: str
) -> tuple[list[int], list[int]]:
    """(every step sent, sorted; the steps the new receivers lack, sorted): what the
    client must send again.

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
    needed = [t for t in every if not replies[t % world].holds(t)]
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

    def record(self, step: int, arrays: Mapping[str, Any]) -> None:
        self.window.record(step, arrays)

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

    def after_gone(self, error: BaseException) -> list[dict[str, Any]]:
        """The entries of the restarted trainer to follow, waiting `follow_timeout`
        for it; re-raises `error` if none published in time."""
        entries = self.follower.wait_restarted(self._timeout)
        if entries is None:
            raise error
        return entries

    def switch(
        self,
        old: Switchable,
        entries: list[dict[str, Any]],
        make: Callable[[list[dict[str, Any]]], Any],
        resend: Callable[[Any, int, dict[str, np.ndarray]], None],
    ) -> Any:
        """Follow the trainer of `entries`: ask, release `old`, `make` the new
        transport (opened: HELLO sent), record every step sent in its `steps`, and
        `resend` through it each step lacking. Returns the new transport.

        Raises:
            FollowError: as `steps_to_send`, or a receiver that cannot be asked.
        """
        replies = self.follower.held(entries)
        every, needed = steps_to_send(old.steps, replies, self.window, self._whose, self._advice)
        old.abandon()  # (what it had queued is dropped: the window has what is needed)
        new = make(entries)
        world = len(entries)
        for t in every:
            new.steps[t % world].add(t)
        self.follower.adopt(entries)
        for t in needed:
            resend(new, t, self.window[t])
        return new
