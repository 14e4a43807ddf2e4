"""`DirectCalls`: the trainer's own record of the collective calls user code made
directly (``trainer.log()``, ``evaluate()``, ``save_checkpoint()``, ``load_checkpoint()``)
under several ranks. One object, created with the trainer (`OnlineTrainer.__init__`),
read and written only by `actions` (a hook's call made a request) and `after_train` (a
call after `train()` checking in).

Thread-safety: the training thread only, as the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DirectCalls"]


@dataclass
class DirectCalls:
    """What the direct calls under several ranks left behind."""

    #: the number of calls after `train()` checked in so far: the next one's number, the
    #: same on every rank while every rank makes the same calls (`meet_after_train`)
    after_train: int = 0
    #: the calls whose "kept as a request" warning was said (`_hook_asks`): once each
    said: set[str] = field(default_factory=set)
