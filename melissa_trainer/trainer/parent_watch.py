"""The watch of the launcher that started a rank, while `train()` runs: which launcher a
`preemption.PreemptionHandler` watches (`launcher_to_watch`), the watch itself
(`watch_parent`, the body of its thread) and the thread's start (`start_watch`). The
module docstring of `melissa_trainer.trainer.preemption` says why (a rank whose launcher
died stops with a checkpoint).

Contract: `watch_parent` polls, asks the handler for a stop once the launcher is gone
(`request`, as a SIGTERM does, with the launcher's death as the cause), and exits as a
second signal does (`force_exit`) if the rank is still alive `grace` s later; it returns
as soon as `unwatch` is set (training ended: the handler's `restore`). It logs under
`melissa_trainer.trainer.preemption`'s logger, as the handler does: one log for one
feature.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable

from melissa_trainer.trainer.launcher_watch import hand_over, launcher_parent
from melissa_trainer.trainer.stop_cause import StopCause

__all__ = ["launcher_to_watch", "start_watch", "watch_parent"]

# (the handler's logger: a user filters the preemption's words by one name)
logger = logging.getLogger("melissa_trainer.trainer.preemption")


def launcher_to_watch(parent: int | str | None) -> tuple[int, StopCause] | None:
    """The launcher to watch and the cause its death will give, for a handler built with
    `parent`: ``"auto"``, the one the start-up watch watched (`launcher_watch.hand_over`:
    it may be gone already, which the first poll sees), or else `launcher_parent`; a pid,
    which must be this process's parent (else ValueError); None: none (None returned,
    as when ``"auto"`` finds no launcher)."""
    handed = hand_over() if parent == "auto" else None
    if handed is not None:
        parent = handed.launcher
    elif parent == "auto":
        parent = launcher_parent()
    elif parent is not None and parent != os.getppid():
        raise ValueError(
            f"PreemptionHandler(parent={parent!r}): the launcher watched must be this "
            f"process's parent ({os.getppid()}), or 'auto' or None"
        )
    if not isinstance(parent, int):
        return None
    # (named while alive: the start-up watch named it at the rank's start)
    return parent, handed or StopCause.launcher_gone(parent)


def watch_parent(
    parent: int,
    gone: StopCause,
    *,
    poll: float,
    grace: float,
    unwatch: threading.Event,
    request: Callable[[StopCause], bool],
    force_exit: Callable[[int], None],
) -> None:
    """Every `poll` s: is `parent` still this process's parent? When it is not (it died:
    init or a subreaper adopted this process), `request` a stop as a SIGTERM does, its
    cause `gone` (the launcher's death, not a SIGTERM; `request` says False when a stop
    was requested before); then, after `grace` s still alive, `force_exit` as a second
    signal does. Returns once `unwatch` is set."""
    while not unwatch.wait(poll):
        if os.getppid() != parent:
            break
    else:
        return
    if request(gone):
        logger.warning(
            "%s: stopping at the next stop synchronisation, with a checkpoint (exiting "
            "without one if not done in %.0f s)", gone, grace,
        )  # fmt: skip
    if unwatch.wait(grace):
        return  # training ended (restore) in time
    logger.critical(
        "still running %.0f s after %s: exiting now, without a checkpoint",
        grace,
        str(gone).replace(" is gone", " died"),
    )
    force_exit(signal.SIGTERM)


def start_watch(
    parent: int | str | None,
    *,
    poll: float,
    grace: float,
    unwatch: threading.Event,
    request: Callable[[StopCause], bool],
    force_exit: Callable[[int], None],
) -> threading.Thread | None:
    """Start the thread that watches the launcher (`watch_parent`, with these arguments)
    if there is one to watch (`launcher_to_watch(parent)`: ValueError for a pid that is
    not this process's parent), `unwatch` cleared first; returns it, or None when there
    is none (`unwatch` untouched). The thread is a daemon: it never holds the exit."""
    found = launcher_to_watch(parent)
    if found is None:
        return None
    unwatch.clear()
    launcher, gone = found
    watching = threading.Thread(
        target=watch_parent,
        args=(launcher, gone),
        kwargs=dict(
            poll=poll, grace=grace, unwatch=unwatch, request=request, force_exit=force_exit
        ),
        name="melissa-launcher-watch",
        daemon=True,
    )
    watching.start()
    return watching
