"""A `Study`'s watermark check at start: the most samples a rank can ever receive, and a
warning when the buffer's `watermark` is above it (Melissa refuses its
``per_server_watermark`` above the samples per server at start).

What bounds a rank's samples in a study, by the launcher's and the receiver's rules:

* **Simulation ids.** The launcher runs `n_simulations` ids; a failed simulation run
  again keeps its id, and its re-sent steps are dropped as duplicates (one sample per
  (simulation, time step) per study); a simulation given up under ``on_failure="redraw"``
  is replaced by a new id, at most `max_redraws` times (``None``: `n_simulations`), and
  the steps it sent before may stay in the buffer. So at most ``n_simulations +
  max_redraws`` ids send data (``n_simulations`` under "abandon" or "raise").
* **Time steps.** A receiver refuses a step ``t >= max_time_step``, so a simulation has
  at most `max_time_step` steps; either routing (``t % W`` or ``(s + t) % W``) gives a
  rank one residue class of them modulo the W ranks: at most ``ceil(max_time_step / W)``.
* **One sample per step**: an ingest transform replaces a sample, or a block by one of
  as many samples (`IngestTransform`): it never adds one.
* **Only the launcher's simulations.** A client started by hand beside the study (its
  own id, no run id in its HELLO) would be received too and is not counted: the bound
  is of the study the launcher runs.
* **A resume**: the samples its buffer was restored with are added (`received`), not
  assumed among the bound's (the run before may have had more simulations).

The product is an upper bound, never below what a rank can receive: the warning says
only a watermark that is surely never reached. The number of steps a simulation sends
is not known at start (Melissa's ``nb_time_steps`` has no counterpart: each
``client.send(t, ...)`` names its step), so with the default `max_time_step` (2**24)
the bound is far above any watermark and nothing is said; a study that sets
``ReceiverConfig(max_time_step=...)`` to its steps gets the check. Otherwise the
end-of-run reuse line (`hooks.reuse`) says what the buffer held.
"""

from __future__ import annotations

import logging

from melissa_trainer.launcher import Launcher

__all__ = ["study_sample_bound", "warn_unreachable_study_watermark"]

logger = logging.getLogger(__name__)


def _redraws(launcher: Launcher) -> int:
    """The most new ids the launcher's failure policy can draw (module docstring)."""
    tuning = launcher.tuning
    if tuning.on_failure != "redraw":
        return 0
    return launcher.n_simulations if tuning.max_redraws is None else tuning.max_redraws


def study_sample_bound(launcher: Launcher, max_time_step: int, world_size: int) -> int:
    """The most samples one rank of `world_size` can receive from `launcher`'s study
    whose receivers refuse steps at or past `max_time_step` (module docstring)."""
    per_simulation = -(-max_time_step // world_size)  # ceil: one residue class of the steps
    return (launcher.n_simulations + _redraws(launcher)) * per_simulation


def warn_unreachable_study_watermark(
    launcher: Launcher,
    max_time_step: int,
    watermark: int,
    rank: int,
    world_size: int,
    received: int = 0,
) -> None:
    """Warn, once per rank as its source starts, when `watermark` is above
    `study_sample_bound` plus `received`, the samples the buffer already received (a
    resumed run's, restored: a run before may have had more simulations or a larger
    `max_time_step`, so they are added, not assumed among the bound's): no read would
    be served before the stream ends (training then drains each sample about once).
    Says nothing when the watermark can be reached."""
    bound = study_sample_bound(launcher, max_time_step, world_size) + received
    if watermark <= bound:
        return
    who = f"rank {rank}" if world_size > 1 else "the trainer"
    if received:
        who += f" ({received} of them already received)"
    logger.warning(
        "--watermark %d is above the %d samples %s can ever receive from this study "
        "(%d simulations, %d more if all redraws are used, at most max_time_step=%d steps "
        "each, 1 in %d of them per rank; a client started by hand is not counted): "
        "unless such clients bring the rest, the watermark is never reached, so training "
        "starts only when the stream ends and then drains each sample about once. Lower "
        "--watermark (to %d or fewer, well below to train while the study runs), or run "
        "more simulations (Launcher(n_simulations=...)); Melissa refuses its "
        "per_server_watermark above the samples per server",
        watermark,
        bound,
        who,
        launcher.n_simulations,
        _redraws(launcher),
        max_time_step,
        world_size,
        bound,
    )
