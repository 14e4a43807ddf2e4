"""The hooks' requests (`TrainerControl`): how hooks ask the trainer for actions.

A hook sets a flag; the trainer performs the action at the next action point and
clears the flag there (see `TrainerControl`). The flags are policy ("please save now");
the mechanism (how a checkpoint is written, how the validation loss is reduced) belongs
to the trainer. Its other fields are the trainer's (`_INTERNAL`): a hook reads them and
never sets them.

Rank consistency: `should_log`, `should_validate` and `should_save` start collective
operations, which every rank must enter at the same step: under several ranks a hook's
request is kept (`TrainerControl.defer`) until the ranks agree on it, and every rank
performs it then, whichever ranks asked. `should_stop` may be requested by a single
rank: the trainer all-reduces it so that every rank stops at the same step.

Split from `core.state`, where it was (users import it from `melissa_trainer`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

#: other libraries' control flags (HF `TrainerControl`) -> what to do here: set, they
#: would be plain attributes that nothing reads, so a ported callback never stopped
_OTHER_LIBRARIES_FLAGS: dict[str, str] = {
    "should_training_stop": "set should_stop (or call control.request_stop(reason))",
    "should_evaluate": "set should_validate",
    "should_epoch_stop": (
        "there is no epoch to end early in a stream: set should_stop to end training, "
        "or should_rewind in on_end_of_stream to replay the buffer"
    ),
}


def _unknown_flag(name: str) -> str:
    """Why `TrainerControl` has no attribute `name`, and what to set instead."""
    flags = ", ".join(n for n in _CONTROL_FIELDS if n.startswith("should_"))
    if name in _OTHER_LIBRARIES_FLAGS:
        hint = f"{name} is Hugging Face's flag, not one here: {_OTHER_LIBRARIES_FLAGS[name]}"
    else:
        close = difflib.get_close_matches(name, _CONTROL_FIELDS, n=1)
        hint = f"did you mean {close[0]}?" if close else "nothing would read it"
    return f"TrainerControl has no flag {name!r}: {hint} (its flags: {flags})"


@dataclass
class TrainerControl:
    """Actions requested by hooks, performed and cleared by the trainer.

    A flag may be set in any event; it stays set until the trainer performs its action
    at the next *action point*, and is cleared there, once, as that action starts (a
    request made by the action's own events is kept for the following action point).
    The action points (see `hooks.Event` for the whole loop):

    * `should_log`, `should_validate`, `should_save`: after every STEP_END; after
      PSEUDO_EPOCH_END (before the buffer is replayed); after LOOP_END. Under several
      ranks (`defer`), a hook's request is kept until the ranks' next agreement: the
      loss check of the next action point that the schedule (`hooks.flow.FlowHook`,
      alike on every rank) opens, the stop agreement read at the end of the window
      after the current one (there, an action point of its own), or PSEUDO_EPOCH_END's
      and LOOP_END's (twice at the end); every rank performs it there. One made in
      VALIDATION_END is agreed on right after that validation (`TrainerActions._act`).
      Performed in
      that order (log, validate, save), so a save requested in `on_validation_end` is
      written at the same point. A request left after the last action point (made in
      `on_train_end`, or in the events of the final log, validation or save) cannot be
      honoured: the trainer logs a warning naming it.
    * `should_stop`: at the next stop synchronisation (every `stop_sync_steps` steps;
      under several ranks the one after it, whose agreement starts after the flag is
      set: `OnlineTrainer.train`;
      every rank stops at the same step, and it may be set on one rank only). Never
      cleared: training ends.
    * `should_rewind`: at the next end of stream (END_OF_STREAM), where it is
      cleared and the buffer replayed as a new pseudo-epoch instead of stopping. One
      still set when training ends is reported like the other requests.

    Attributes:
        should_stop: end training at the next stop synchronisation.
        should_save: write a checkpoint (all ranks alike: a collective).
        should_validate: run validation (all ranks alike: a collective).
        should_log: compute and emit the training logs (all ranks alike: a collective).
        should_rewind: at end of stream, replay the samples retained in the buffer
            (all ranks alike).

    Setting any other attribute is an AttributeError naming the flag to set instead
    (Hugging Face's ``should_training_stop`` -> `should_stop`, ``should_evaluate`` ->
    `should_validate`; ``should_epoch_stop`` has no counterpart): a ported callback's
    request would otherwise be an attribute that nothing reads. So is setting, once
    made, any of its fields that are the trainer's (`_INTERNAL`: `asked`, `deferring`,
    `stop_reason`, `stop_step`, `clock`; read-only to hooks, the error naming what to
    use instead: a flag, `request_stop`): `__init__` sets them, then only its methods
    (`defer`, `take_asks`, `keep`, `request_stop`, the flags' setter). `asked` cannot be
    changed in place either (``control.asked["should_save"] = ...``: `AskedRequests`).
    """

    should_stop: bool = False
    should_save: bool = False
    should_validate: bool = False
    should_log: bool = False
    should_rewind: bool = False
    #: Under several ranks (`defer`): the collective requests (`ASKED`) that a hook made
    #: since the last meeting of the ranks, flag -> who set it, not yet agreed: they are
    #: performed where the ranks agree on them (`take_asks`, `grant`), not by this rank
    #: alone at its next action point (a request on one rank made the ranks' collectives
    #: fall out of step: htrial's `if state.is_world_process_zero: should_save`)
    #: (read-only: `AskedRequests`; this class's methods change it)
    asked: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: whether hooks' requests are deferred to the ranks' agreement (`defer`)
    deferring: bool = field(default=False, compare=False, repr=False)
    #: Why `should_stop` was set, in words ("" until it is): what `request_stop` was
    #: given, or who set the flag (the method's qualified name, ``Hook.on_log``), so
    #: that the end of the run can say why it stopped before `max_steps` or the stream's
    #: end. The first request wins; rank-local (the flag's other ranks do not know it).
    stop_reason: str = field(default="", compare=False)
    #: The step at which `should_stop` was first set (read from `clock`), None until it
    #: is or without a clock: under several ranks the other ranks' end-of-run words say
    #: it (`trainer.stop_asked`), the stop itself coming up to two windows later.
    stop_step: int | None = field(default=None, compare=False)
    #: The `TrainerState` whose `global_step` dates a stop request (set by the trainer;
    #: None: not dated).
    clock: Any = field(default=None, compare=False, repr=False)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _CONTROL_FIELDS:  # a ported callback's flag would do nothing
            raise AttributeError(_unknown_flag(name))
        if name in _INTERNAL and self.__dict__.get("_made"):
            # (the trainer's own, set by `__init__`, then only by this class's methods:
            # a hook's write would redate or reword a stop, or, `deferring` on one rank,
            # put its collectives out of step with the other ranks')
            raise AttributeError(_internal_field(name))
        if value and name in ASKED and self.__dict__.get("deferring"):
            # a hook's request under several ranks: kept for the ranks' agreement (who
            # set it found here, once per request: the cost is paid only then)
            frame = inspect.currentframe()
            setter = frame.f_back if frame is not None else None
            code = setter.f_code if setter is not None else None
            who = "" if code is None else getattr(code, "co_qualname", code.co_name)
            dict.setdefault(self.asked, name, who)  # (read-only to others: `AskedRequests`)
            return
        if name == "should_stop" and value and self.__dict__.get("stop_step") is None:
            clock = self.__dict__.get("clock")  # (dated once: `stop_step`)
            if clock is not None:
                object.__setattr__(self, "stop_step", int(clock.global_step))
        # Who sets the flag is recorded here, once, when it is first set: hooks set
        # `control.should_stop = True` directly (the transformers idiom), and the cost
        # is paid only then, never per step.
        if name == "should_stop" and value and not self.__dict__.get("stop_reason"):
            frame = inspect.currentframe()  # this method's: the setter's is the one back
            setter = frame.f_back if frame is not None else None
            if setter is not None:
                code = setter.f_code
                who = getattr(code, "co_qualname", code.co_name)  # (3.11+: Class.method)
                object.__setattr__(self, "stop_reason", f"{who} set control.should_stop")
        object.__setattr__(self, name, value)

    def __post_init__(self) -> None:
        # `asked` read-only to hooks (`AskedRequests`), this control's own (a copy: one
        # given to `__init__`, `dataclasses.replace`'s, is not shared)
        object.__setattr__(self, "asked", AskedRequests(self.asked))
        # made: from now on `_INTERNAL` fields are refused to ``control.NAME = ...``
        # (a copy or an unpickled one carries the mark in its ``__dict__``)
        object.__setattr__(self, "_made", True)

    def keep(self, name: str, who: str) -> None:
        """The trainer's: a request of the flag `name` (of `ASKED`) that `who` made,
        kept in `asked` for the ranks' agreement (a hook's direct call under several
        ranks: `trainer.actions`); a hook sets the flag instead."""
        if name not in ASKED:
            raise ValueError(f"keep: {name!r} is not one of {ASKED}")
        dict.setdefault(self.asked, name, who)

    def request_stop(self, reason: str) -> None:
        """Set `should_stop`, with `reason` (words a user reads at the end of the run:
        "eval_loss not better in 3 validations") as `stop_reason` unless one was
        given before."""
        if not self.stop_reason:
            object.__setattr__(self, "stop_reason", reason)
        self.should_stop = True

    def pending(self) -> list[str]:
        """The names of the set flags that ask for an action (all but `should_stop`),
        the requests kept for the ranks' agreement (`asked`) included."""
        names = ("should_log", "should_validate", "should_save", "should_rewind")
        return [name for name in names if getattr(self, name) or name in self.asked]

    def defer(self, on: bool) -> None:
        """With `on` (a run of several ranks), a hook's ``should_log``,
        ``should_validate`` or ``should_save`` set to True is kept in `asked` instead of
        set: the trainer agrees on the requests of every rank (`take_asks` on each, the
        maximum over ranks given back to `grant`) and every rank performs them at the
        same step. The library's schedule, identical on every rank, sets its flags with
        `request_alike`. Off: flags are set as they are asked (one process)."""
        object.__setattr__(self, "deferring", bool(on))
        dict.clear(self.asked)

    def request_alike(self, name: str) -> None:
        """Set the flag `name` (of `ASKED`) now, deferring or not: for a request that
        every rank makes at the same step (`hooks.flow.FlowHook`'s schedule, decided from
        `TrainerState`; the end's), which needs no agreement."""
        if name not in ASKED:
            raise ValueError(f"request_alike: {name!r} is not one of {ASKED}")
        object.__setattr__(self, name, True)

    def take_asks(self) -> tuple[int, int, int]:
        """This rank's requests kept since the last `take_asks`, one 0/1 per flag of
        `ASKED` (in its order), for the ranks' agreement; forgets them."""
        asks = tuple(int(name in self.asked) for name in ASKED)
        dict.clear(self.asked)
        return asks  # type: ignore[return-value]

    def grant(self, agreed: Sequence[int]) -> None:
        """Set the flags that the ranks' agreement on `take_asks` (the maximum over
        ranks, one number per flag of `ASKED`) says some rank asked for: performed at
        the next action point, which every rank then reaches at the same step."""
        for name, asked in zip(ASKED, agreed, strict=False):
            if asked:
                object.__setattr__(self, name, True)


#: the requests that start collectives, in the order of their agreement's numbers
ASKED = ("should_log", "should_validate", "should_save")


class AskedRequests(dict[str, str]):
    """`TrainerControl.asked`, read-only to everyone but `TrainerControl`'s methods
    (which change it through ``dict``'s own: ``dict.clear(asked)``).

    A hook's ``control.asked["should_save"] = ...`` (or ``del``, ``clear``, ``pop``,
    ``update``, ``|=``, ``setdefault``) changed this rank's requests alone, out of the
    ranks' agreement, as a hook's ``control.asked = {}`` did before it was refused:
    the ranks' collectives fell out of step. Each is a TypeError naming the flags to
    set instead. Copies and pickles as a dict does (`__reduce__`)."""

    def __reduce__(self) -> tuple[type[AskedRequests], tuple[dict[str, str]]]:
        # (not dict's way: it would set the items one by one, each refused)
        return (type(self), (dict(self),))


def _refuse_change(self: AskedRequests, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"control.asked cannot be changed in place: {_internal_field('asked')}")


# (set after the class: as methods in its body each would have to repeat dict's
# signature to type-check)
for _name in (
    "__setitem__",
    "__delitem__",
    "__ior__",
    "clear",
    "pop",
    "popitem",
    "setdefault",
    "update",
):
    setattr(AskedRequests, _name, _refuse_change)
del _name

#: the only attributes a `TrainerControl` takes (`__setattr__`)
_CONTROL_FIELDS = tuple(f.name for f in dataclasses.fields(TrainerControl))
#: its fields that are the trainer's, not flags: set by `__init__` (``clock=``), then
#: by `TrainerControl`'s methods only, never by a hook's ``control.NAME = ...``; each
#: with what it is and what a hook uses instead, for the error's words
_INTERNAL: dict[str, tuple[str, str]] = {
    "asked": (
        "the requests kept for the ranks' agreement",
        "set should_log, should_validate or should_save: under several ranks the "
        "trainer keeps the request here until the ranks agree on it",
    ),
    "deferring": (
        "whether requests wait for the ranks' agreement, set by the trainer for a run "
        "of several ranks with control.defer: on one rank alone it would put its "
        "collectives out of step",
        "set the flags: the trainer defers them when it must",
    ),
    "stop_reason": (
        "why should_stop was set, recorded by the trainer",
        "call control.request_stop(reason) to stop with your words",
    ),
    "stop_step": (
        "the step should_stop was first set at, dated by the trainer's state",
        "set should_stop or call control.request_stop(reason) to stop",
    ),
    "clock": (
        "the trainer's state that dates a stop",
        "set should_stop or call control.request_stop(reason) to stop",
    ),
}


def _internal_field(name: str) -> str:
    """Why a hook may not set `TrainerControl`'s internal field `name`, and what to
    use instead."""
    flags = ", ".join(n for n in _CONTROL_FIELDS if n.startswith("should_"))
    what, instead = _INTERNAL[name]
    return (
        f"TrainerControl's {name} is the trainer's, not a flag a hook sets ({what}): "
        f"{instead} (its flags: {flags})"
    )
