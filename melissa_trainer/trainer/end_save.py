"""Whether the checkpoint of the step a run ends at still holds the run's state.

A run that ends (a preemption, a source's failure) at a step whose checkpoint exists
(written at that step by a periodic save, or the one it resumed from) has not always
kept its state there: no training step changes the model, but the buffer keeps
receiving samples, the study's simulations finish, the receivers' records grow. A
preemption at the step a run resumed from, before its next step (a FIFO window not yet
full, a slow stream), kept the old checkpoint: the requeued run ran the simulations that
had finished since again, and a study preempted before each next step never kept its
progress.

So each save and each load records a digest of what changes without a step
(`fingerprint`: the buffer's counters, the source's record, the hooks' states), and at
the end `checkpoint_current` says whether the checkpoint of this step exists and its
digest is still the state's on every rank. A save too many is allowed, never one too
few. A save of a step whose checkpoint exists replaces it atomically
(`checkpoint.paths.commit`): never a second directory of the same step.
Such a rewrite writes the model and optimizer files again, with the bytes they had:
about 0.04 s on the heat example's model, 0.11-0.15 s on a 2.4 M-parameter FNO, once
per run (docs/measured.md, "Design choices, measured"): at that size not worth a second
write path beside Accelerate's `save_state` (hard links from the checkpoint replaced).

A save does not serialize the source's record a second time for its digest (at 10^5 ..
10^6 simulations, the study's account of each and the receivers' records, that cost
seconds per save: `benchmarks/end_save_digest.py`): it takes the buffer's counters and
the hooks' states before it writes (`before_save`), and the source's part from the
manifest's hash of the ``source.json`` it wrote (`saved`), which the save computes
anyway; the file is `checkpoint.files.record_text` of the record, and `fingerprint`
hashes the live record's same text. Equal digests at the end: the live record's text is
the written one's, and the buffer and hooks have not changed since before the write (a
sample put during the write makes the digest differ at the end: a save too many, never
one too few). A load and the end digest the live state (`fingerprint`), once each.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint import paths as ckpt
from melissa_trainer.checkpoint.files import record_text
from melissa_trainer.core.view import TrainerView
from melissa_trainer.sources.source import STATE_FILE as SOURCE_FILE
from melissa_trainer.trainer.rank_reports import agree

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.trainer.loop import OnlineTrainer

__all__ = ["before_save", "checkpoint_current", "fingerprint", "record", "saved", "saves"]

#: per trainer: (the step of its last save or load, the digest of its state then)
_RECORDED: weakref.WeakKeyDictionary[Any, tuple[int, str]] = weakref.WeakKeyDictionary()
#: per trainer: how many saves it recorded (`saves`)
_SAVES: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class _Parts(Protocol):
    """What the digest reads of a trainer (`TrainerView`'s)."""

    @property
    def buffer(self) -> Any: ...

    @property
    def source(self) -> Any: ...

    @property
    def hooks(self) -> Any: ...


def fingerprint(trainer: _Parts) -> str:
    """A digest of this rank's state that changes without a training step: the buffer's
    counters (a sample put, taken, evicted), the source's `state_dict` (the receivers'
    records, the study's account of its simulations), the hooks' states. Equal digests:
    nothing a checkpoint holds changed (the model, optimizer and trainer state change
    only with a step, which a new step's checkpoint holds). At a save, `saved` is this
    digest without serializing the record again."""
    # (default=repr: what JSON cannot hold, which a save would refuse; the same text else)
    text = record_text(trainer.source.state_dict(), default=repr)
    return _digest(before_save(trainer), hashlib.sha256(text.encode()).hexdigest())


def before_save(trainer: _Parts) -> str:
    """The buffer's counters and the hooks' states, as `fingerprint` digests them: taken
    by a save before it writes (`saved` adds the source's record as written)."""
    stats = trainer.buffer.stats()
    parts = {
        "buffer": [stats.size, stats.put, stats.got, stats.evicted],
        "hooks": trainer.hooks.state_dict(),
    }
    return json.dumps(parts, sort_keys=True, default=repr)


def saved(before: str, entries: Mapping[str, Mapping[str, Any]], rank: int) -> str:
    """`fingerprint` of the state a save wrote: `before` (`before_save`, taken before it
    wrote), and the source's record as rank `rank` wrote it, by the hash of its
    ``source.json`` in the save's manifest `entries` (`checkpoint.manifest.Hasher`'s,
    which hashed the file's bytes: `fingerprint` hashes the same text of the live
    record). A record the entries lack gets a digest no state has: a save too many at
    the end, never one too few."""
    entry = entries.get((ckpt.rank_path("", rank) / SOURCE_FILE).as_posix())
    source = str(entry[manifest.HASH]) if entry else f"unhashed {secrets.token_hex(16)}"
    return _digest(before, source)


def _digest(before: str, source: str) -> str:
    return hashlib.sha256(f"{before}\n{source}".encode()).hexdigest()


def record(trainer: TrainerView, step: int, digest: str | None = None) -> None:
    """After a load (or a save, with its `digest` taken before it wrote): the checkpoint
    of `step` holds the state of `digest` (default: the state now). A save that fails
    records nothing: the checkpoint that was there (the same step's, intact) still holds
    what was recorded of it."""
    _RECORDED[trainer] = (step, digest if digest is not None else fingerprint(trainer))
    if digest is not None:
        _SAVES[trainer] = _SAVES.get(trainer, 0) + 1


def saves(trainer: TrainerView) -> int:
    """How many checkpoints `trainer` has written (`record`ed with their digest)."""
    return _SAVES.get(trainer, 0)


def checkpoint_current(trainer: TrainerView) -> bool:
    """Whether the checkpoint of the current step was saved (or loaded) by this trainer
    and nothing it holds has changed since, on every rank. Collective (one all-gather:
    every rank calls it at the same step, as at the end)."""
    step = trainer.state.global_step
    recorded = _RECORDED.get(trainer)
    same = (
        trainer.state.last_save_step == step
        and recorded is not None
        and recorded[0] == step
        and recorded[1] == fingerprint(trainer)
    )
    at = f"the end's check of checkpoint-{step} (is it current on every rank?)"
    return all(agree(cast("OnlineTrainer", trainer), same, at))
