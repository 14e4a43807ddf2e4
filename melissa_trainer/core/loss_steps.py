"""The per-simulation losses' reduction cadence, ``simulation_loss_steps``: its default
and what an unset or zero value resolves to, for `SimulationLosses`' trackers
(`melissa_trainer.core.loss_per_simulation`) and a `Study` that
asks for the losses. Pure.
"""

from __future__ import annotations

__all__ = ["DEFAULT_SIMULATION_LOSS_STEPS", "resolve_loss_steps"]

#: `simulation_loss_steps` when left None and the source asks for the losses
DEFAULT_SIMULATION_LOSS_STEPS = 20


def resolve_loss_steps(steps: int | None, wanted: bool) -> int:
    """The reduction cadence in use: `steps` (`simulation_loss_steps`), or with None the
    default when the source asks for the losses (`wanted`: an adaptive study), else 0
    (off).

    Raises:
        ValueError: the source asks for them and `steps` is 0.
    """
    if steps is None:
        return DEFAULT_SIMULATION_LOSS_STEPS if wanted else 0
    if steps == 0 and wanted:
        raise ValueError(
            "simulation_loss_steps=0 turns per-simulation losses off, but the study's "
            "sampler is adaptive and is steered by them: set simulation_loss_steps > 0, "
            "leave it unset, or use a fixed design (make_sampler('lhs', ...))"
        )
    return int(steps)
