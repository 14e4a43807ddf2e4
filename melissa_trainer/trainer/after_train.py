"""`meet_after_train`: the ranks' check-in before a collective call made after `train()`
returned (``trainer.log()``, ``evaluate()``, ``save_checkpoint()``,
``load_checkpoint()``), under several ranks.

Why. After `train()` the ranks run the user's code, and nothing keeps them in step: a
Hugging Face script ported as ``if trainer.is_main_process: trainer.save_checkpoint()``
had rank 0 alone enter the save's collectives while rank 1 went on, or exited: rank 0
died in gloo ("Connection closed by peer", or a hang while rank 1 lived on), naming
neither the call nor the fix. Inside `train()` such a call from a hook is a request
that every rank performs (`TrainerActions._hook_asks`); after it, the other ranks cannot
be made to act, so the call checks in first and raises `AfterTrainError` naming the
call and the fix when the ranks do not all make it.

How. Each rank keeps a count of its calls after `train()` (the same on every rank when
every rank makes the same calls); the call of number ``n`` sets
``melissa_trainer/after_train/<run>/<n>/<rank>`` to its name in the launcher's store
(`refusal_mark.launch_store`: ``accelerate launch``'s, hosted by its agent, not by a
rank), then waits until every rank's key is there. It raises, before any collective:
at once when another rank's key names another call, or when that rank has exited (each
rank sets ``.../gone/<rank>`` at its exit, `atexit`, registered as `train()` starts);
past the process group's timeout otherwise (as long as a collective would have waited).
Whether the ranks met is decided once per number, in one key
(``.../<n>/decided``) set by compare-and-set: a rank that sees every rank's key sets it
to ``met``, a rank whose check-in fails to ``off`` (naming itself and its call), and
whichever came first holds for every rank: a rank that gave up as another decided
``met`` goes on into the collective (every rank came), and a rank that saw every key as
another gave up raises too. A rank that comes to that number later reads ``off`` and
raises rather than enter the collective alone, so the ranks' counts stay aligned when
the user catches the error and retries. (The withdrawal it replaces, a rank's key
marked once its wait gave up, let a rank that read the key in the instant between the
give-up and the mark pass into the collective alone.)
The count is the trainer's `DirectCalls.after_train`.
Without such a store (``python train.py``, another launcher) nothing is checked: the
call is the collective it was.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from typing import TYPE_CHECKING

from melissa_trainer.trainer.exit_meeting import group_timeout
from melissa_trainer.trainer.refusal_mark import (
    CONNECT_TIMEOUT,
    LOST_LOOKUP,
    StoreLink,
    launch_store,
)

if TYPE_CHECKING:  # pragma: no cover
    from torch.distributed import TCPStore

    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["AfterTrainError", "POLL", "mark_exit", "meet_after_train"]

logger = logging.getLogger(__name__)

_PREFIX = "melissa_trainer/after_train"
#: seconds between two looks at the other ranks' keys while waiting for them
POLL = 0.05
#: the wait's bound when the process group's timeout cannot be read (torch's gloo default)
FALLBACK_WAIT = 1800.0
#: at most, seconds a rank's exit waits to set its ``gone`` key (`mark_exit`): the plain
#: connection's timeout, and two reverse lookups lost in the DNS (`refusal_mark.READ_WAIT`'s)
EXIT_WAIT = CONNECT_TIMEOUT + 2 * LOST_LOOKUP
#: the key, under the call's number, of the ranks' decision (`_decide`): made once, by
#: compare-and-set, so that no rank enters the call's collective while another raises
_DECIDED = "decided"
#: the decision that every rank came (the collective follows on every rank)
_MET = "met"
#: the decision that a rank gave up (its check-in failed): ``off:<rank> <its call>``
_OFF = "off:"
#: the refusal's reason when the store ends during the check-in (node 0's launcher ended)
_STORE_WENT = "the launcher's store went during its check-in (node 0's launcher ended)"


class AfterTrainError(RuntimeError):
    """A collective call after `train()` that not every rank made (`meet_after_train`)."""


def mark_exit(trainer: OnlineTrainer) -> None:
    """Have this rank's exit set its ``gone`` key in the launcher's store (`atexit`), so
    that a rank waiting in `meet_after_train` for it learns at once that it will not
    come. Nothing without the store, or under one process."""
    if not trainer.stop_sync.distributed:
        return
    key = f"{_PREFIX}/{trainer.run_id}/gone/{trainer.process_index}"

    def tell() -> None:
        link = launch_store()
        if isinstance(link, StoreLink):
            with link:
                try:
                    link.store.set(key, "1")
                except Exception as exc:  # (exiting: said, the exit goes on)
                    logger.warning("could not tell the other ranks of this exit: %r", exc)

    def gone() -> None:
        # In a thread waited on at most EXIT_WAIT s: a store that takes the connection
        # but does not answer (a stopped launcher) held torch's client past its own
        # timeout, and the rank's exit with it (over 100 s seen); the key is a courtesy
        # (a waiting rank gives up past the group's timeout without it)
        teller = threading.Thread(target=tell, name="after_train.gone", daemon=True)
        teller.start()
        teller.join(EXIT_WAIT)
        if teller.is_alive():
            logger.warning("the launcher's store did not take this exit's mark within "
                           "%g s: exiting without it", EXIT_WAIT)  # fmt: skip

    atexit.register(gone)


def _words(call: str, rank: int, world: int, why: str) -> str:
    return (
        f"trainer.{call}() after train() on rank {rank} of {world}: {why}. After "
        f"train() it is a collective, which every rank must call alike (not under `if "
        f"trainer.is_main_process:`); to save or validate from one rank's decision, "
        f"ask in a hook during training (control.should_save / should_validate: every "
        f"rank performs it), or rely on the end's checkpoint and validation "
        f"(save_at_end, eval_dataset)"
    )


def _pause(seconds: float) -> None:
    """The wait's pause between two looks at the store (a test's hook)."""
    time.sleep(seconds)


def meet_after_train(trainer: OnlineTrainer, call: str) -> None:
    """Check in for `call` after `train()` returned; returns once every rank made the
    same call (then its collective follows), raises `AfterTrainError` on this rank
    otherwise (see the module docstring). Nothing under one process, before `train()`
    ended, or without the launcher's store."""
    if not (trainer.stop_sync.distributed and trainer.train_ended):
        return
    link = launch_store()
    if link is None:
        return
    rank, world = trainer.process_index, trainer.num_processes
    if not isinstance(link, StoreLink):
        raise AfterTrainError(_words(call, rank, world, "the launcher's store is gone"))
    number = trainer.direct_calls.after_train
    trainer.direct_calls.after_train = number + 1
    try:
        _meet(link, call, trainer, number)
    except AfterTrainError:
        raise
    except RuntimeError as exc:  # (torch's DistError: the store went between two looks)
        raise AfterTrainError(_words(call, rank, world, _STORE_WENT)) from exc


def _decide(store: TCPStore, key: str, value: str) -> str:
    """The call's decision (`_DECIDED` ``met``, or `_OFF` and who gave up), `value` if
    this rank's compare-and-set made it first, else the one made before."""
    return bytes(store.compare_set(key, "", value)).decode()


def _meet(link: StoreLink, call: str, trainer: OnlineTrainer, number: int) -> None:
    """`meet_after_train`'s check-in of call `number` and wait, over `link`."""
    rank = trainer.process_index
    base = f"{_PREFIX}/{trainer.run_id}/{number}"
    bound = group_timeout(trainer.accelerator.device) or FALLBACK_WAIT
    with link:
        store = link.store
        store.set(f"{base}/{rank}", call)
        try:
            _wait_others(link, call, trainer, base, bound)
        except AfterTrainError:
            # Given up, decided so unless a rank decided first that every rank came (it
            # read this rank's check-in in the instant before: it enters the collective,
            # and so does this rank). A rank that comes later to this number (it was
            # slow, past this rank's wait) must not read this rank's call as made and
            # enter its collective alone, nor, once the user retries the call (number +
            # 1 here), meet the retry's number with its own first call: it reads the
            # decision and raises too, and the ranks' numbers line up again
            if link.gone():
                raise
            decided = ""
            try:
                decided = _decide(store, f"{base}/{_DECIDED}", f"{_OFF}{rank} {call}")
            except RuntimeError as exc:  # (torch's DistError: it went since the look)
                # the check-in's own failure (who did not come, or called what) is the
                # user's error, not the mark's: said, and the store's end stops a late
                # rank's check-in too
                logger.warning("could not withdraw its check-in of trainer.%s(): %r",
                               call, exc)  # fmt: skip
            if decided != _MET:
                raise  # (the AfterTrainError: this block's own exception)
            logger.info("trainer.%s() after train(): every rank came as this rank gave up "
                        "(one decided first that they met): it goes on", call)  # fmt: skip


def _wait_others(link: StoreLink, call: str, trainer: OnlineTrainer, base: str,
                 bound: float) -> None:  # fmt: skip
    """`_meet`'s wait for the other ranks' check-in at `base` (`bound` s at most),
    returning once the ranks are decided to have met."""
    rank, world = trainer.process_index, trainer.num_processes
    store = link.store
    waiting = [r for r in range(world) if r != rank]
    deadline = time.monotonic() + bound
    decision = f"{base}/{_DECIDED}"
    while True:
        # (its end read first: torch's client asked on a closed connection logs
        # its C++ stack, then raises a DistError naming neither the call nor why)
        if link.gone():
            raise AfterTrainError(_words(call, rank, world, _STORE_WENT))
        if store.check([decision]):  # (another rank decided: this one follows)
            _follow(store.get(decision).decode(), call, rank, world)
            return
        for other in list(waiting):
            key = f"{base}/{other}"
            if store.check([key]):
                theirs = store.get(key).decode()
                if theirs != call:
                    why = f"rank {other} called trainer.{theirs}() there instead"
                    raise AfterTrainError(_words(call, rank, world, why))
                waiting.remove(other)
            elif store.check([f"{_PREFIX}/{trainer.run_id}/gone/{other}"]):
                why = f"rank {other} exited without calling it"
                raise AfterTrainError(_words(call, rank, world, why))
        if not waiting:  # every rank came: met, unless a rank gave up first
            _follow(_decide(store, decision, _MET), call, rank, world)
            return
        if time.monotonic() > deadline:
            late = ", ".join(map(str, waiting))
            why = f"rank(s) {late} did not call it within {bound:g} s"
            raise AfterTrainError(_words(call, rank, world, why))
        _pause(POLL)  # (the others' keys are looked at again; no event to wait on)


def _follow(decided: str, call: str, rank: int, world: int) -> None:
    """Return when `decided` is `_MET`; raise `AfterTrainError` naming the rank that
    gave up otherwise."""
    if decided == _MET:
        return
    who, _, theirs = decided.removeprefix(_OFF).partition(" ")
    if theirs == call:
        why = (f"rank {who} gave up its trainer.{theirs}() there "
               f"(its check-in failed before this rank came)")  # fmt: skip
    else:
        why = f"rank {who} called trainer.{theirs}() there instead"
    raise AfterTrainError(_words(call, rank, world, why))
