"""Whether an adaptive sampler's losses steered any of its draws, in its own terms
(`steered_draws`), and the end-of-study line when they steered none though they could
have (`unsteered_line`, which `launcher.account.log_account` makes a WARNING).

Why: `AdaptiveSampler.adaptive_draws` counts the draws that held `min_observations`
losses, those the losses *could* steer (`melissa_trainer.study.feedback` warns when
too few did, the losses having come late). What they did steer is the sampler's own
matter: Breed breeds a draw with probability ``1 - exploration`` (16 simulations with
the examples' 0.7 bred none of the 7 draws that could breed), and the density sampler
bends a draw only where some parameter has the `evidence` (the heat example's loss,
which grows with the temperatures' spread, bent none of 55 draws at its defaults). Both
ended with an INFO account before, which read as adaptive sampling.
"""

from __future__ import annotations

from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.density import DensitySampler
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.surrogate import SurrogateSampler

__all__ = ["steered_draws", "unsteered_line"]


def steered_draws(sampler: Sampler) -> int | None:
    """How many of an adaptive `sampler`'s draws the losses steered, in its own terms:
    Breed's bred draws, the surrogate acquisition's acquired ones, the density
    sampler's draws the loss bent (`DensitySampler.bent`); None for another sampler, or
    when unknown (a density state saved before it was counted)."""
    if isinstance(sampler, DensitySampler):
        return sampler.bent
    if isinstance(sampler, BreedSampler | SurrogateSampler):
        return sampler.position - sampler.explored
    return None


def unsteered_line(sampler: Sampler) -> str | None:
    """Why the losses steered none of the draws of an adaptive `sampler` that held
    enough of them to (Breed: some draws held `min_observations` losses and none was
    bred, each breeding with probability ``1 - exploration``; the density sampler: some
    draws had its warp on and the loss bent none, no parameter having the `evidence`),
    or None: some draw was steered, none could be (the feedback's lines and
    `static_sampler` say those), or the count is unknown (a resumed state saved
    before it was kept)."""
    if isinstance(sampler, BreedSampler):
        could, bred = sampler.adaptive_draws, sampler.position - sampler.explored
        final = sampler.exploration_final
        if not could or bred or (sampler.exploration == 1.0 and final in (None, 1.0)):
            return None
        return (
            f"  the adaptive sampler steered none of its draws: of the {could} drawn holding "
            f"at least min_observations={sampler.min_observations} losses, none was bred "
            f"(each with probability 1 - exploration = {1 - sampler.exploration:.2g}"
            f"{', rising as the share decays' if final is not None else ''}): a fixed "
            f"design's draws. A larger study, a lower exploration or a lower "
            f"min_observations breeds more"
        )
    if isinstance(sampler, DensitySampler):
        if not sampler.warped or sampler.bent is None or sampler.bent:
            return None
        return (
            f"  the adaptive sampler steered none of its draws: the loss bent none of the "
            f"{sampler.warped} drawn with the high-loss warp on, no parameter having the "
            f"evidence={sampler.evidence:g} it needs (above): the draws are the design's"
        )
    return None
