"""The finished simulations a receiver no longer needs a ledger for: a few bytes each.

A running simulation needs its whole `StepLedger` (its declaration, the bit of
every step, its BYEs, its heartbeat); a finished one needs only to answer "is this step
a duplicate?" — every step of a finished simulation is — and, on resume, to be
forgotten step by step if the buffer's snapshot did not hold its last samples. That
second need lasts as long as its keys are in the ingest's ``recent`` list; once
as many more samples as that list holds (`keep`, which grows with it:
`IngestState.keep_recent`) have been put after it finished, none are, and its ledger
is dropped here for an entry of one integer: the number of steps it completed. A study
of 10^5 simulations then keeps 10^5 small entries, not 10^5 ledgers (about 1.8 KB each
with their bit arrays, more with longer simulations), and its checkpoint two arrays
instead of 10^5 JSON objects.

Contract:

* Only a *canonical* ledger is archived: finished, no lost step, and its completed
  steps exactly ``0 .. n-1`` here (what a client sending its steps in order gives).
  Any other finished ledger (sparse step numbers, a dropped partial sample) is kept
  whole: correct, only larger.
* A DATA of an archived simulation is a duplicate. A HELLO of one (the simulation runs
  again after a resume because another rank lacked its data) `revive`\\ s its ledger from
  that HELLO, finished, with steps ``0 .. n-1`` done: it then behaves exactly as a
  ledger never archived (the HELLO takes the path of any HELLO of a known ledger, its
  attempt counted by the `NonFiniteGuard`; duplicates counted, its messages are the
  launcher's heartbeat), and is archived again later.
* Not thread-safe: used by the ingester alone (like `Ingest`).
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from melissa_trainer.stream.step_ledger import StepLedger
from melissa_trainer.wire import Hello

__all__ = ["Archive"]


class Archive:
    """Finished simulations as (id -> steps completed); see the module docstring.

    Args:
        keep: how many samples must be put after a simulation finished before its
            ledger may be archived (the length of the ingest's ``recent`` list; the
            ingest raises it as the list grows).
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.steps: dict[int, int] = {}  # id -> steps 0 .. n-1 completed here
        #: every id archived, in order (a checkpoint's first), appended before its ledger
        #: leaves the ingest: a reader in another thread slices what it has not read yet
        #: (`IngestQueries.archived_samples`); one pointer per entry, its id shared
        self.taken: list[int] = []
        #: (the ingest's `marked` when it finished, id), in finishing order
        self._finishing: deque[tuple[int, int]] = deque()

    def __contains__(self, simulation_id: int) -> bool:
        return simulation_id in self.steps

    def __len__(self) -> int:
        return len(self.steps)

    def finished(self, simulation_id: int, marked: int) -> None:
        """A ledger finished when the ingest had marked `marked` samples: archive it
        once `keep` more have been (see `due`)."""
        self._finishing.append((marked, simulation_id))

    def due(self, marked: int) -> Iterator[int]:
        """The ids that finished at least `keep` samples before `marked`, oldest first
        (each once): their keys have left the ``recent`` list."""
        queue = self._finishing
        while queue and marked - queue[0][0] >= self.keep:
            yield queue.popleft()[1]

    def take(self, ledger: StepLedger) -> bool:
        """Archive `ledger` if it is canonical (see the module docstring); True if it
        was (the caller then drops it)."""
        n = ledger.completed
        if not ledger.finished or ledger.lost or ledger.frontier != n:
            return False  # frontier == completed: the n steps done are exactly 0 .. n-1
        self.steps[ledger.simulation_id] = n
        self.taken.append(ledger.simulation_id)
        return True

    def revive(self, hello: Hello) -> StepLedger:
        """The ledger of an archived simulation that says HELLO again (removed from the
        archive): declared by `hello`, finished, steps ``0 .. n-1`` done."""
        n = self.steps.pop(hello.simulation_id)
        ledger = StepLedger.from_hello(hello)
        if n:
            ledger.mark_range(0, n)
        ledger.finished = True
        return ledger

    # -- checkpoint ------------------------------------------------------------------------

    def to_state(self) -> dict[str, str]:
        """Two base64 arrays, little-endian: ids (uint64) and steps (int64), by id."""
        ids = np.fromiter(self.steps.keys(), np.uint64, len(self.steps))
        steps = np.fromiter(self.steps.values(), np.int64, len(self.steps))
        order = np.argsort(ids, kind="stable")
        return {
            "ids": base64.b64encode(ids[order].astype("<u8").tobytes()).decode("ascii"),
            "steps": base64.b64encode(steps[order].astype("<i8").tobytes()).decode("ascii"),
        }

    def load_state(self, state: dict[str, Any] | None) -> None:
        """Restore `to_state()` (None: nothing archived, as in checkpoints before it).

        Raises:
            ValueError: "invalid receiver archive: ...": a key missing, an array that is
                not base64 of whole 8-byte numbers, arrays of different lengths, an id
                listed twice, or a negative count.
        """
        self.steps.clear()
        self._finishing.clear()
        self.taken = []
        if not state:
            return
        try:
            ids = np.frombuffer(base64.b64decode(state["ids"], validate=True), "<u8")
            steps = np.frombuffer(base64.b64decode(state["steps"], validate=True), "<i8")
        except (KeyError, TypeError, ValueError) as exc:  # binascii.Error is a ValueError
            raise ValueError(f"invalid receiver archive: {exc!r}") from exc
        if ids.shape != steps.shape:
            raise ValueError(
                f"invalid receiver archive: {ids.size} ids and {steps.size} step counts"
            )
        if steps.size and int(steps.min()) < 0:
            raise ValueError(f"invalid receiver archive: a negative step count {steps.min()}")
        self.steps = dict(zip(ids.tolist(), steps.tolist(), strict=True))
        if len(self.steps) != ids.size:
            self.steps.clear()
            raise ValueError("invalid receiver archive: an id is listed twice")
        self.taken = list(self.steps)  # (said once after a resume, as archived now)
