"""Whether an adaptive study's feedback reached its sampler before its last draw.

The per-simulation training losses reach the sampler every `simulation_loss_steps`
steps (a reduction, `melissa_trainer.core.loss_per_simulation`), and a sampler adapts
only once it holds `min_observations` of them (8 by default). A study that trains fewer
than about `simulation_loss_steps` steps while its simulations are still being drawn
(a FIFO buffer, short simulations, large batches: 48 simulations of 10 steps in batches
of 32 train 15 steps in all) draws every simulation by exploration alone, as a fixed
design would, and nothing said so: the user asked for active sampling and got none.

`FeedbackCheck` says it at the end, in the study's end-of-run account
(`melissa_trainer.launcher.account.log_account`, which makes the account a WARNING):
how many draws were steered (none) and how many explored, how many losses the sampler
held at its last draw and how many it needs, and what to change. It is certain then:
the sampler's `observed_at_draw` is what its last draw saw, and the observations kept
never shrink below `min_observations` (its window is at least that), so every earlier
draw saw fewer. A study whose sampler cannot steer any draw by its settings or its size
(`launcher.account.static_sampler`) was told so when it started, and is not told again;
a resumed study that drew nothing after its resume is not judged (its last draw's
count was not saved).
"""

from __future__ import annotations

from melissa_trainer.launcher.account import static_sampler
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.samplers import Sampler

__all__ = ["FeedbackCheck", "unfed_line"]


class FeedbackCheck:
    """Rank 0's check of an adaptive study's feedback (module docstring). Training
    thread only: `started` before the launcher starts, `lines` after it has stopped
    (both read the sampler, which the launcher's thread draws from meanwhile)."""

    def __init__(self) -> None:
        #: the reduction cadence (`simulation_loss_steps`, resolved), set by `Study.hooks`
        self.loss_steps: int | None = None
        self._static = False  # the launcher said at its start that no draw can adapt

    def started(self, sampler: Sampler, n_simulations: int) -> None:
        """Note, before the launcher starts (and warns the same: `warn_static_sampler`),
        whether `sampler` can steer any draw of a study of `n_simulations`."""
        self._static = static_sampler(sampler, n_simulations) is not None

    def lines(self, sampler: Sampler) -> list[str]:
        """The account's warning lines: `unfed_line`'s, unless the start said why no
        draw could adapt."""
        line = None if self._static else unfed_line(sampler, self.loss_steps)
        return [] if line is None else [line]


def unfed_line(sampler: Sampler, loss_steps: int | None) -> str | None:
    """Why no draw of `sampler` was steered by the training losses: it held fewer than
    it needs at its last draw (`AdaptiveSampler.observed_at_draw`; `min_observations`,
    1 for a sampler without one), with the fixes; None when some draw could adapt, for
    a fixed design, or when this process made no draw. `loss_steps`: the reduction
    cadence, named in the line when known."""
    if not isinstance(sampler, AdaptiveSampler) or sampler.observed_at_draw is None:
        return None
    held, least = sampler.observed_at_draw, getattr(sampler, "min_observations", 1)
    if held >= least:
        return None
    draws = sampler.position
    cadence = f"every {loss_steps} training steps" if loss_steps else "at each reduction"
    return (
        f"  the adaptive sampler steered none of its draws: of {draws} draws, 0 adaptive and "
        f"{draws} exploratory, as a fixed design would draw them. At its last draw it held "
        f"the training losses of {held} simulations, and it adapts from {least} on "
        f"(min_observations): the losses reach it {cadence} (simulation_loss_steps), and "
        f"the study drew its last simulation before enough had arrived. Lower "
        f"simulation_loss_steps (1: every step), let the buffer re-draw samples "
        f"(buffer='reservoir', sample_to_insert_ratio above 1) or give each simulation "
        f"more time steps, so that more steps are trained while the study still draws"
    )
