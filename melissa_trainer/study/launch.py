"""What a study's start joins between its launcher and its receivers, on rank 0 (and,
on resume, on every rank): the simulations complete on every training rank
(`complete_on_every_rank`, a collective), and the notices that tell every rank's
receiver of a simulation given up or redrawn (`receiver_notices`), so that no rank
waits for it (and of the study's stop: `stream.connections`).
`Study.on_all_ranks_started` calls both; each is called once per start. And what the
other ranks' stall watchdogs excuse, having no launcher to ask (`other_rank_excuse`,
set by `Study.start`). And a receiver bind that a backend's jobs cannot reach
(`warn_unreachable_receivers`), said as the study starts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.core.wait_words import RESUME_GATHER_USUAL
from melissa_trainer.launcher.backends.base import Backend
from melissa_trainer.launcher.tuning import LauncherTuning
from melissa_trainer.stream.activity_file import clear_activity_files
from melissa_trainer.stream.control import send_abandon
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.nonfinite_handoff import clear_nonfinite_handoffs
from melissa_trainer.stream.nonfinite_kills import clear_nonfinite_kills
from melissa_trainer.stream.receiver_address import is_loopback
from melissa_trainer.stream.study_stops import clear_study_stops
from melissa_trainer.stream.watchdog import SilenceExcuse

__all__ = [
    "complete_on_every_rank",
    "other_rank_excuse",
    "receiver_notices",
    "warn_unreachable_receivers",
]

logger = logging.getLogger(__name__)


def warn_unreachable_receivers(backend: Backend, bind: str) -> bool:
    """Rank 0, as a study starts: a WARNING (and True) when the receivers' `bind` is
    loopback (this host only) while `backend` may run the simulations on other machines
    (`Backend.other_hosts`: Slurm's compute nodes, an ``mpiexec`` told of hosts), which
    cannot reach it: each simulation there would find no receiver and give up after
    its client's timeout, attempt after attempt, and the study would train on nothing.
    Warned, not refused: on a one-node cluster every job runs on this host, where
    loopback is right."""
    if not backend.other_hosts or not is_loopback(bind):
        return False
    where = (
        "compute nodes"
        if backend.name == "slurm"
        else "other hosts (those it is told of, or its Slurm allocation's nodes)"
    )
    logger.warning(
        "the %s backend runs the simulations on %s, which cannot reach the receivers' "
        "bind %r (loopback: this host only); unless every job runs on this host (a "
        "one-node cluster), each simulation finds no receiver and gives up: bind an "
        "interface they reach, StreamSource(ReceiverConfig(bind='tcp://*:*')) (keep it "
        "behind a firewall; advertise_host=... when they know this host by another name)",
        backend.name,
        where,
        bind,
    )
    return True


def complete_on_every_rank(mine: Sequence[int], watch: WaitWatch | None = None) -> set[int]:
    """The simulations complete on every training rank (a collective when a process
    group is up: all ranks call it), from each rank's list; the all-gather inside
    `watch`'s wait when given (the trainer's: a rank held there warns)."""
    import torch.distributed as dist  # the trainer's process group, if any

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return set(mine)
    gathered: list[Any] = [None] * dist.get_world_size()
    what = "the other ranks at a resumed study's start (the all-gather of its complete simulations)"
    with nullcontext() if watch is None else watch.waiting(what, RESUME_GATHER_USUAL):
        dist.all_gather_object(gathered, sorted(mine))
    complete = set(gathered[0])
    for other in gathered[1:]:
        complete &= set(other)
    return complete


def receiver_notices(
    rendezvous: Path,
) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """The launcher's `abandon` and `redrawn` callbacks: each sends an ABANDON of the
    simulation to every rank's receiver (``replaced`` for one redrawn: its replacement
    is waited for instead), at the endpoints and with the CURVE keys the rendezvous
    publishes (the nodes may use different ones). Called from the launcher's thread;
    blocks up to 60 s for the rendezvous.

    The third notice, that the study stops (`Receiver.study_stops` with ``announce``,
    a file in `rendezvous`), is cleared here of an earlier run's (`clear_study_stops`:
    its run id tells it apart, but a study outside a trainer has none), before this
    run launches anything; so is the fourth, rank 0's receiver's failures for NaN or
    Inf (`stream.nonfinite_kills`), the other ranks' hand-offs of theirs to rank 0
    (`stream.nonfinite_handoff`), and their heartbeats (`stream.rank_activity`: written
    once a message came, so after this)."""
    clear_study_stops(rendezvous)
    clear_nonfinite_kills(rendezvous)
    clear_nonfinite_handoffs(rendezvous)
    clear_activity_files(rendezvous)

    def tell(simulation_id: int, replaced: bool) -> None:
        entries = fetch_rendezvous(rendezvous, timeout=60.0)
        endpoints = [str(e["endpoint"]) for e in entries]
        keys = [e.get("curve_public_key") for e in entries]
        send_abandon(endpoints, simulation_id, curve_public_key=keys, replaced=replaced)

    def abandon(simulation_id: int) -> None:
        tell(simulation_id, replaced=False)

    def redrawn(simulation_id: int) -> None:
        tell(simulation_id, replaced=True)

    return abandon, redrawn


def other_rank_excuse(tuning: LauncherTuning) -> SilenceExcuse | None:
    """A rank other than 0's answer to its stall watchdog: a silence of at most the
    launcher's start-up allowance (`LauncherTuning.startup_allowance`) is explained,
    since rank 0's
    launcher kills a solver silent that long; None when the allowance is unbounded
    (the watchdog applies as before: rank 0 alone knows of queued jobs)."""
    allowance = tuning.startup_allowance()
    if allowance is None:
        return None
    seconds = float(allowance)

    def excuse(idle: float) -> str | None:
        if idle > seconds:
            return None
        return (
            f"the simulations may still be starting up: rank 0's launcher allows "
            f"{seconds:g} s before a first message (LauncherTuning)"
        )

    return excuse
