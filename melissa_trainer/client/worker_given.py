"""Which simulation this process's worker was last given by its launcher, and which
attempt of it (`given_attempt`): what a worker's `Client` reads to know that it runs a
launched simulation (`config.launched`, `rerun`) and what its give-ups say
(`gave_up.rerun_words`). `worker.WorkerClient` records each answer (`give`).

Standard library only, and importing nothing of the package: `gave_up`, which
`worker` imports, reads it too.
"""

from __future__ import annotations

__all__ = ["give", "given_attempt"]

#: (simulation id, attempt) of the simulation this process was last given (any
#: `worker.WorkerClient`), None before the first or after "nothing left"
_given: tuple[int, int] | None = None


def given_attempt(simulation_id: int) -> int | None:
    """The launcher's attempt (0 the first) of `simulation_id` when it is the simulation
    this process's worker was last given (`worker.WorkerClient.next_simulation`); None
    otherwise (not a worker, or another simulation)."""
    if _given is None or _given[0] != simulation_id:
        return None
    return _given[1]


def give(simulation_id: int | None, attempt: int | None) -> None:
    """Record the simulation this process's worker runs now and its attempt (None:
    none: asked again, or nothing left)."""
    global _given
    _given = None if simulation_id is None or attempt is None else (simulation_id, attempt)
