"""A study's end-of-run account: which simulations contributed no sample, and why.

A study can end "successfully" (exit 0, every simulation finished) with a third of its
simulations having contributed nothing: a solver that blows up to NaN sends samples the
receiver refuses (``nonfinite="refuse"``, the default), and the simulation still
finishes. `study_account` tells it at the end, in a few lines:

    study account: 16 simulations drawn, 11 contributed samples; 5 (31% of the study)
    contributed none:
      5 sent only NaN or Inf (all their samples refused, nonfinite='refuse'):
        simulations 3, 5, 9, 12, 14; e.g. simulation 3, parameters {...}
      ...

The reasons, in order: every sample non-finite (finished, all refused); every HELLO
refused (the fields were not the study's: the receiver's reason quoted); failed or
abandoned with no sample received (exit codes). A simulation that failed after sending
some samples contributed those (the receivers keep them, and the model trained on
them); it is listed apart, as given up part-way, with its exit codes and parameters:
a solver that crashes mid-run for part of the space (exit 1 at its 25th step) is told
at the end, not only in lines long scrolled past, and the account is a WARNING.

What a receiver saw is rank 0's (in a multi-rank run, a simulation's steps are shared
among the ranks: one whose rank-0 share was all refused is counted); the non-finite
counts are this run's (not saved in a checkpoint). Pure formatting: `Study.stop` feeds
it the launcher's records and rank 0's receiver's counts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.samplers import Sampler

__all__ = [
    "SimulationOutcome",
    "id_ranges",
    "log_account",
    "resume_lines",
    "sampler_line",
    "study_account",
]

logger = logging.getLogger("melissa_trainer.launcher")

#: ids listed per reason
_SHOWN = 10


class SimulationOutcome(NamedTuple):
    """A simulation of the study, as the account needs it (from its launcher record)."""

    simulation_id: int
    status: str  # `simulation_record.STATUSES`
    exit_codes: Sequence[int | str]
    reason: str
    parameters: Mapping[str, float]
    attempts: int = 0  # launches so far


def id_ranges(ids: Sequence[int], groups: int = 12) -> str:
    """Sorted ids as ranges: "0-11, 14, 16-18" (at most `groups` of them, then "...")."""
    out: list[str] = []
    ids = sorted(ids)
    i = 0
    while i < len(ids) and len(out) < groups:
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out) + (", ..." if i < len(ids) else "")


def resume_lines(outcomes: Sequence[SimulationOutcome], n_simulations: int) -> list[str]:
    """What a resumed study does with its simulations (after `Launcher.reconcile`):
    those done (finished: their data is in the checkpoint), those that run again
    (running at the checkpoint, or their data not all in it), those given up, those
    not started yet."""
    done = [o.simulation_id for o in outcomes if o.status == "finished"]
    again = [o.simulation_id for o in outcomes if o.status == "pending" and o.attempts > 0]
    queued = [o for o in outcomes if o.status == "pending" and o.attempts == 0]
    given_up = [o.simulation_id for o in outcomes if o.status in ("failed", "abandoned")]
    active = sum(o.status != "failed" for o in outcomes)
    not_started = len(queued) + max(0, n_simulations - active)
    line = (
        f"study resumed: {len(done)} of its {n_simulations} simulations are done and do "
        f"not run again" + (f" ({id_ranges(done)})" if done else "")
    )
    line += f"; {len(again)} run again" + (
        f" ({id_ranges(again)}: running at the checkpoint, or their data not all in it)"
        if again
        else ""
    )
    line += f"; {not_started} not started yet"
    if given_up:
        line += f"; {len(given_up)} given up before ({id_ranges(given_up)})"
    return [line]


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids[:_SHOWN])) + (", ..." if len(ids) > _SHOWN else "")


def study_account(
    outcomes: Sequence[SimulationOutcome], samples: Mapping[int, tuple[int, int]]
) -> tuple[list[str], bool]:
    """The account's lines, and whether some simulation contributed no sample (then
    the caller logs it as a WARNING).

    Args:
        outcomes: every simulation drawn in the study, ended or not (those pending or
            running are left out of the account).
        samples: id -> (steps received, of which refused for NaN or Inf), as rank 0's
            receiver has them (`IngestState.samples_of`).
    """
    ended = [o for o in outcomes if o.status in ("finished", "failed", "abandoned")]
    nonfinite: list[SimulationOutcome] = []
    refused: list[SimulationOutcome] = []
    failed: list[SimulationOutcome] = []
    partway: list[SimulationOutcome] = []  # given up after sending some samples
    for o in ended:
        steps, bad = samples.get(o.simulation_id, (0, 0))
        if steps - bad > 0:
            if o.status != "finished":
                partway.append(o)
            continue  # contributed
        if bad > 0:
            nonfinite.append(o)
        elif o.status == "finished":
            continue  # (no step here: its share went to other ranks, or it sent none)
        elif o.exit_codes and all(c == "refused" for c in o.exit_codes):
            refused.append(o)
        else:
            failed.append(o)
    none = len(nonfinite) + len(refused) + len(failed)
    contributed = len(ended) - none
    noun = "simulation" if len(ended) == 1 else "simulations"
    head = f"study account: {len(ended)} {noun} ended, {contributed} contributed samples"
    if not none and not partway:
        return [f"{head}; every one contributed."], False
    if none:
        lines = [f"{head}; {none} ({none / len(ended):.0%} of the study) contributed none:"]
    else:
        share = len(partway) / len(ended)
        lines = [f"{head}; {len(partway)} ({share:.0%} of the study) failed part-way:"]
    if nonfinite:
        first = nonfinite[0]
        lines.append(
            f"  {len(nonfinite)} sent only NaN or Inf (all their samples refused, "
            f"nonfinite='refuse'): simulations {_ids([o.simulation_id for o in nonfinite])}; "
            f"e.g. simulation {first.simulation_id}, parameters {dict(first.parameters)}. "
            f"The solver blows up there: check its time step or stability for these "
            f"parameters, or narrow the sampler's bounds"
        )
    if refused:
        lines.append(
            f"  {len(refused)} refused by the receiver: simulations "
            f"{_ids([o.simulation_id for o in refused])}: {refused[0].reason or 'see the log'}"
        )
    if failed:
        first = failed[0]
        lines.append(
            f"  {len(failed)} failed with no sample received: simulations "
            f"{_ids([o.simulation_id for o in failed])}; e.g. simulation "
            f"{first.simulation_id}, exit codes {list(first.exit_codes)}"
            + (f" ({first.reason})" if first.reason else "")
        )
    if partway:
        lines.append(_partway_line(partway))
    return lines, True


def _partway_line(partway: Sequence[SimulationOutcome]) -> str:
    """The account's line for simulations given up after sending some samples: their
    ids, one's exit codes and parameters (the parameter set to look at), what became of
    their samples, and what to do if the failures are the solver's."""
    first = partway[0]
    what = "redrawn" if first.status == "failed" else "abandoned"
    return (
        f"  {len(partway)} given up part-way ({what}), after sending some samples: simulations "
        f"{_ids([o.simulation_id for o in partway])}; e.g. simulation {first.simulation_id}, "
        f"exit codes {list(first.exit_codes)}, parameters {dict(first.parameters)}"
        + (f" ({first.reason})" if first.reason else "")
        + ". The samples they sent before failing were trained on; if the solver fails "
        "there for these parameters, narrow the sampler's bounds (each simulation's log, "
        "and Launcher.outcomes(), have the rest)"
    )


def sampler_line(sampler: Sampler) -> str | None:
    """What an adaptive sampler did: its draws, how many explored and how many bred
    (a `BreedSampler`), how many simulations' losses it holds; None for a fixed
    design, or before any draw."""
    if not isinstance(sampler, AdaptiveSampler) or sampler.position == 0:
        return None
    draws, observed = sampler.position, len(sampler.observations)
    explored = getattr(sampler, "explored", None)  # (a BreedSampler's)
    what = (
        f"{draws} draws"
        if explored is None
        else f"of {draws} draws, {explored} explored, {draws - explored} bred from the "
        f"worst-trained simulations"
    )
    window = "" if sampler.window is None else f" (the last {sampler.window} kept)"
    return (
        f"adaptive sampler: {what}; the training losses of {observed} simulations observed{window}"
    )


def log_account(
    outcomes: Sequence[SimulationOutcome],
    samples: Mapping[int, tuple[int, int]],
    sampler: Sampler | None = None,
) -> tuple[list[str], bool]:
    """Log `study_account` (and `sampler_line`): a WARNING (shown by Python's default
    logging) when some simulation contributed no sample, else INFO. Returns the lines
    and whether they were a WARNING."""
    lines, some_none = study_account(outcomes, samples)
    extra = None if sampler is None else sampler_line(sampler)
    if extra is not None:
        lines.append(extra)
    logger.log(logging.WARNING if some_none else logging.INFO, "%s", "\n".join(lines))
    return lines, some_none
