"""What an ingest tells other threads of its simulations (`IngestQueries`, a base of
`ingest_state.IngestState`): the launcher's heartbeat and start-up (`activity`,
`first_message_at`, `client_of`), a study's end-of-run account (`samples_of`, and
`held_samples` and `archived_samples`, another rank's share of it handed to rank 0), the
simulations still due (`unfinished`) and the words of error messages (`describe`).

Contract: every method reads and never changes the ingest's state; each may be called
from any thread while the ingester changes it (a best-effort read: a dict the ingester
changes is copied by `dict.copy` before it is iterated), and none blocks.

Why `dict.copy`, not ``list(d.items())``: the latter allocates a tuple per entry, an
allocation may start a garbage collection (Python 3.11), a finalizer it runs executes
Python code, and there the interpreter may switch to the ingester, whose new or archived
ledger changes the dict's size mid-copy: ``RuntimeError('dictionary changed size during
iteration')`` on the caller's thread (the launcher's, once, in
tests/launcher/test_scale.py). `dict.copy` allocates no object per entry: no collection
runs inside it (tests/stream/test_activity_copy_atomic.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover - the attributes `IngestState` sets
    from melissa_trainer.stream.archive import Archive
    from melissa_trainer.stream.nonfinite import NonFiniteGuard
    from melissa_trainer.stream.step_ledger import StepLedger

__all__ = ["IngestQueries"]


class IngestQueries:
    """The read-only queries of an `IngestState` (module docstring), on the attributes
    it sets (declared here; their meaning: `IngestState`)."""

    rank: int
    sims: dict[int, StepLedger]
    archive: Archive
    nonfinite: NonFiniteGuard
    abandoned: set[int]
    replaced: set[int]
    refused: list[tuple[int, str]]

    def activity(self) -> dict[int, int]:
        """Simulation id -> DATA messages received so far (the launcher's heartbeat).

        Safe to call from another thread: the dict is copied first (module docstring)."""
        return {sid: rec.messages for sid, rec in self.sims.copy().items()}

    def first_message_at(self, simulation_id: int) -> float | None:
        """`time.monotonic()` when the simulation's first DATA message arrived here in
        this process (None: none yet, or a ledger loaded from a checkpoint). Any thread:
        one attribute read."""
        sim = self.sims.get(simulation_id)
        return None if sim is None else sim.first_data_at

    def client_of(self, simulation_id: int) -> str | None:
        """The client library the simulation's HELLO named here (`Hello.client`: "python",
        "c"), None when unknown (no HELLO yet, it did not say, a ledger loaded from a
        checkpoint). Any thread: one attribute read."""
        sim = self.sims.get(simulation_id)
        return None if sim is None else sim.client

    def samples_of(self) -> dict[int, tuple[int, int]]:
        """Simulation id -> (its steps received here, of which refused for NaN or Inf
        in this run), for each simulation that said HELLO here: what each contributed
        (the study's end-of-run account). A best-effort read from any thread."""
        refused = dict(self.nonfinite.by_simulation)
        steps = dict(self.archive.steps)
        steps.update({sid: rec.completed for sid, rec in self.sims.copy().items()})
        return {sid: (n, refused.get(sid, 0)) for sid, n in steps.items()}

    def held_samples(self) -> dict[int, tuple[int, int]]:
        """`samples_of` for the simulations whose ledger is held here (not archived):
        what another rank hands rank 0 with its heartbeat (`stream.rank_activity`), in
        O(held), not O(study). A best-effort read from any thread."""
        refused = dict(self.nonfinite.by_simulation)
        return {sid: (rec.completed, refused.get(sid, 0)) for sid, rec in self.sims.copy().items()}

    def archived_samples(self, start: int) -> tuple[dict[int, tuple[int, int]], int]:
        """`samples_of` for the simulations archived here from the `start`-th on
        (`Archive.taken`), and where the next call starts: with `held_samples`, what
        another rank hands rank 0 (`stream.rank_activity`), so that a ledger archived
        between two of its writes is said too (before, its last steps never were: the
        account undercounted). A best-effort read from any thread: the count is read
        before the ids, each appended before its ledger leaves `sims`, so a reader that
        calls this before `held_samples` and starts the next call where this one ends
        misses none (one revived since: its ledger is held, said there)."""
        taken = self.archive.taken
        end = len(taken)
        steps, refused = self.archive.steps, dict(self.nonfinite.by_simulation)
        out = {}
        for sid in taken[start:end]:
            n = steps.get(sid)
            if n is not None:
                out[sid] = (n, refused.get(sid, 0))
        return out, end

    def unfinished(self) -> list[int]:
        """Ids of the simulations that said HELLO here and are neither finished nor
        given up, in id order."""
        given_up = self.abandoned | self.replaced
        # (a copy first: this may run in another thread while the ingester adds ledgers
        # and archives finished ones)
        ledgers = self.sims.copy()
        return sorted(s for s, r in ledgers.items() if not r.finished and s not in given_up)

    def describe(self, sid: int) -> str:
        """What this receiver has of a simulation, for error messages."""
        rec = self.sims.get(sid)
        where = f"rank {self.rank}'s receiver"
        archived = self.archive.steps.get(sid)  # (one read: another thread may ask)
        if archived is not None:
            return f"{where} has all its {archived} steps"
        if rec is None:
            refused = [why for s, why in self.refused if s == sid]
            if refused:
                return f"{where} refused its HELLO: {refused[-1]}"
            return f"{where} has no HELLO from it"
        if rec.finished:
            return f"{where} has all its {rec.completed} steps"
        announced = rec.steps_announced()  # (a BYE says how many steps its rank sent)
        of = "an unannounced number of" if announced is None else f"{announced}"
        byes = f"BYE from {len(rec.byes)} of {rec.client_count} client ranks"
        return f"{where} has {rec.completed} of {of} steps, {byes}"
