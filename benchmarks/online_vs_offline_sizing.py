"""How large and how long `online_vs_offline.py`'s cases run: the options ``--quick``
fills (`fill_defaults`, `quick_budget`), the cap on a budgeted study's simulations
(`study_cap`), and the pace each ``--placement_ab`` arm's study is sized from
(`arm_pace`, from the simulations' niceness); ``--quick``'s budget doubled when cases 2
and 3 had no offline run to measure (`doubling`, `TooShort`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, TypeVar

from melissa_trainer.launcher.backends.placement import Placement

#: the options that default otherwise under ``--quick`` (theirs: `QUICK`, `quick_budget`)
FULL = {"simulations": 128, "budget": 120.0, "splits": "0.25,0.5,0.75", "storage_fraction": 0.1}
QUICK = {"simulations": 6, "splits": "0.5", "storage_fraction": 0.5}
#: ``--quick``'s budget: at least this many seconds, and this many simulations' time
QUICK_BUDGET, QUICK_BUDGET_SIMULATIONS = 6.0, 5
#: ``--quick``'s runs of cases 2 and 3 at most, the budget doubled at each (when offline's
#: share or disk held no simulation: `doubling`, run by `online_vs_offline.main`)
QUICK_TRIES = 3


def fill_defaults(opts: argparse.Namespace) -> None:
    """Set each option of `FULL` left unset on the command line: ``--quick``'s tiny
    value (`QUICK`; its budget comes later, `quick_budget`) or the full run's."""
    for name, full in FULL.items():
        if getattr(opts, name) is None and not (opts.quick and name == "budget"):
            setattr(opts, name, QUICK.get(name, full) if opts.quick else full)


def quick_budget(seconds_per_simulation: float) -> float:
    """``--quick``'s budget for cases 2 and 3: `QUICK_BUDGET` s, or the time of
    `QUICK_BUDGET_SIMULATIONS` simulations at `seconds_per_simulation` (case 1's online
    wall time per simulation, its training included: an upper bound) if longer. A fixed
    budget left offline's share or disk without a complete simulation on a loaded
    machine, where a solver's start-up takes seconds: the script then stopped with an
    error naming the option to raise."""
    return max(QUICK_BUDGET, QUICK_BUDGET_SIMULATIONS * seconds_per_simulation)


def study_cap(budget: float, seconds_per_simulation: float) -> int:
    """A study larger than `budget` allows (twice what case 1's pace would run): the
    budget ends it. Not much larger: the launcher keeps a record per simulation."""
    return 2 * math.ceil(budget / seconds_per_simulation) + 16


#: the kernel's CPU weight of niceness n is 1024 / 1.25**n (CFS's table, to within 1%)
NICE_WEIGHT_STEP = 1.25


def simulation_nice(setup: dict[str, Any]) -> int:
    """The niceness relative to the trainer's that `setup`'s placement gives the
    simulations: ``sim_nice`` (None: the library's `Placement` default) with
    placement "default"; 0 with "none" (a session of their own, not niced)."""
    if setup.get("placement", "default") != "default":
        return 0
    nice = setup.get("sim_nice")
    return Placement().nice if nice is None else nice


def arm_pace(seconds_per_simulation: float, measured: dict[str, Any], arm: dict[str, Any]) -> float:
    """The seconds per simulation to size `arm`'s study with, from the pace
    `seconds_per_simulation` measured with setup `measured` (case 1's).

    An arm whose simulations are niced less than the measured ones can run faster: as
    much as the ratio of their CPU weights when the machine is loaded (an un-niced
    simulation against a +10 one: 1.25**10 = 9.3 times the share), not more while the
    load stays the same (on an idle machine, the same pace: then the study is larger than
    needed, which costs records, not time). So the pace is divided by that ratio: sized
    from case 1's niced pace, ``--placement_ab``'s un-niced arm ran out of simulations
    beside a loaded suite. An arm niced as much or more keeps the measured pace (never a
    smaller study than before)."""
    faster = NICE_WEIGHT_STEP ** max(0, simulation_nice(measured) - simulation_nice(arm))
    return seconds_per_simulation / faster


class TooShort(RuntimeError):
    """Case 2 or 3 has no offline run to measure: offline's share of the budget ended
    before a simulation was complete, or case 3's disk (a fraction of what online
    streamed) is smaller than one simulation's file. The message names the option to
    raise."""


T = TypeVar("T")


def doubling(run: Callable[[float, int], T], budget: float, tries: int) -> tuple[T, float]:
    """``run(budget, attempt)`` (attempt 1, 2, ...) and the budget it ran with; when it
    raises `TooShort` and `tries` allow, again with twice the budget, each retry said in
    a line. On a loaded machine online's simulations, niced beside its trainer,
    completed 2 in ``--quick``'s budget, and half of that is less than one simulation's
    file (case 3's disk): the tables and rows are of the last run, at its budget.

    Raises:
        TooShort: the last try had no offline run to measure.
    """
    for attempt in range(1, tries + 1):
        try:
            return run(budget, attempt), budget
        except TooShort as exc:
            if attempt == tries:
                raise
            print(f"{exc}; cases 2 and 3 again with a budget of {2 * budget:g} s "
                  f"(try {attempt + 1} of {tries})", flush=True)  # fmt: skip
            budget *= 2
    raise AssertionError("unreachable: the last try returns or raises")
