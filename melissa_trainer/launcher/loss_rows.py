"""Which observed losses get a ``loss`` row in ``draws.csv`` (`draw_log.DrawLog`):
`LossRows`, the rule, per simulation:

- its first loss gets a row; a later one when it moved by more than `LOSS_CHANGE` (10%)
  of the last one written (`loss_changed`): a loss that settles, or trends down (or
  up), writes few rows (a move of 10% at least each: about 24 rows per tenfold);
- once its loss swung (a row moved the other way than the one before it, s times so
  far), a row comes no sooner than ``2 ** (s - 1)`` draws after its last (`gap`). Each
  draw hands the sampler the newest loss of every simulation trained on since the last,
  so a loss swinging by more than 10% back and forth (a noisy loss of a few samples)
  wrote a row at every draw: a study of n simulations, about n * n / 2 rows. With the
  gap, a simulation's swings are at most about log2 of the study's draws, so its rows
  are too, times the trend rows between two swings.

A loss that moved by more than 10% but waits for its gap is held (`pending`), the
newest replacing it, dropped when a newer one is back within 10% of the last written;
a held loss is written when the simulation is given up (before its given-up row) and
when the file is closed (the study's end, the launcher's stop): so, at the end, each
simulation's last ``loss`` is within 10% of the last the sampler observed; while the
study runs, a swinging loss's row may lag by its gap.

The state is what the file's rows say (`replay`): a resume that keeps the rows up to its
checkpoint goes on as the killed run would have (a held loss is not in the file: it is
not kept; the resumed run observes newer ones).
"""

from __future__ import annotations

__all__ = ["LOSS_CHANGE", "LossRows", "gap", "loss_changed"]

#: a loss row is written when the loss moved by more than this share of the last written
LOSS_CHANGE = 0.1


def loss_changed(last: float | None, loss: float) -> bool:
    """Whether `loss` moved enough for a row after `last` (the last one written for its
    simulation; None: none yet): the first always, then one that moved by more than
    `LOSS_CHANGE` of ``|last|`` (after a 0, any other value)."""
    return last is None or abs(loss - last) > LOSS_CHANGE * abs(last)


def gap(swings: int) -> int:
    """The fewest draws between a simulation's last ``loss`` row and its next, once its
    rows swung `swings` times: none before any swing, then 1, 2, 4... draws."""
    return 0 if swings <= 0 else 2 ** (swings - 1)


class LossRows:
    """The rule's state: the draws written (`drew`), and per simulation the last loss
    written, the way it moved, its swings, the draw it was written at, and the loss
    held (`pending`)."""

    def __init__(self) -> None:
        #: the ``draw`` rows written so far (the clock of the gap)
        self.draws = 0
        #: simulation id -> (last loss written, its way: -1, 0, 1, swings, draws then)
        self._last: dict[int, tuple[float, int, int, int]] = {}
        #: simulation id -> the newest loss that moved enough but waits for its gap
        self.pending: dict[int, float] = {}

    def drew(self) -> None:
        """A ``draw`` row was written."""
        self.draws += 1

    def wrote(self, sid: int, loss: float) -> None:
        """A ``loss`` row of `loss` was written for `sid` (or kept from the file: `replay`)."""
        self.pending.pop(sid, None)
        last = self._last.get(sid)
        if last is None:
            self._last[sid] = (loss, 0, 0, self.draws)
            return
        value, way, swings, _ = last
        now = (loss > value) - (loss < value)
        self._last[sid] = (loss, now, swings + (way * now < 0), self.draws)

    def keep(self, sid: int, loss: float) -> bool:
        """Whether `loss`, observed for `sid` now, gets a row (the caller writes it and
        calls `wrote`); one that moved enough but waits for its gap is held instead."""
        last = self._last.get(sid)
        if last is None:
            return True
        value, way, swings, at = last
        if not loss_changed(value, loss):
            self.pending.pop(sid, None)  # (the file's last is within 10% of it)
            return False
        now = (loss > value) - (loss < value)
        if self.draws - at >= gap(swings + (way * now < 0)):
            return True
        self.pending[sid] = loss
        return False

    def held(self, sid: int | None = None) -> list[tuple[int, float]]:
        """The held losses (of `sid` only, when given), in id order, for their rows now
        (the caller writes each and calls `wrote`)."""
        sids = sorted(self.pending) if sid is None else [sid] if sid in self.pending else []
        return [(s, self.pending[s]) for s in sids]
