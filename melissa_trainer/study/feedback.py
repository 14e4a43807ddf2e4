"""Whether an adaptive study's feedback reached its sampler in time for its draws.

The per-simulation training losses reach the sampler every `simulation_loss_steps`
steps (a reduction, `melissa_trainer.core.loss_per_simulation`), and a sampler adapts
only once it holds `min_observations` of them (8 by default). A study that trains fewer
than about `simulation_loss_steps` steps while its simulations are still being drawn
(a FIFO buffer, short simulations, large batches: 48 simulations of 10 steps in batches
of 32 train 15 steps in all) draws every simulation by exploration alone, as a fixed
design would, and nothing said so: the user asked for active sampling and got none.

`FeedbackCheck` says it at the end, in the study's end-of-run account
(`melissa_trainer.launcher.account.log_account`, which makes the account a WARNING),
in one of two lines, each with the counts and what to change:

- **none adapted** (`unfed_line`): the sampler held fewer than `min_observations`
  losses at its last draw. It is certain then: the sampler's `observed_at_draw` is what
  its last draw saw, and the observations kept never shrink below `min_observations`
  (its window is at least that), so every earlier draw saw fewer.
- **few adapted** (`few_line`): some draws adapted, but fewer than `FEW_SHARE` (half)
  of those that could have (`AdaptiveSampler.adaptive_draws`, the draws made holding
  at least `min_observations` losses). Why that bound: draw `i` (from 0) can hold the
  losses of the `i` simulations drawn before it at most, so at least `min_observations`
  draws of any study explore, and ``n - min_observations`` of `n` draws is the most
  that can adapt. Judged against that most, a study whose size alone forbids more
  (16 draws with `min_observations` 8 adapt at most 8, half of them) is not warned
  whatever its settings, which a share of all the draws would do; and a study whose
  losses came late lost more than half of the adaptation its size allowed: it is
  closer to a fixed design than to an adaptive one (only its last draws adapted).

A study whose sampler cannot steer any draw by its settings or its size
(`launcher.sampler_account.static_sampler`) was told so when it started, and is not told
again. Nor is a study stopped before its sampler drew its last simulation (a SIGTERM,
a preemption, `max_steps`): its draws to come would have held more losses, so its
settings are not judged on the early draws alone (the account's counts show how far
it drew). Both counts are in the sampler's state: a resumed study is judged on all its
draws, those before its resume included; one resumed from a checkpoint written before
they were saved is judged on its last draw alone (`adaptive_draws` unknown), and not
at all if it drew nothing after its resume.
"""

from __future__ import annotations

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.sampler_account import static_sampler
from melissa_trainer.launcher.sampler_base import Sampler

__all__ = ["FEW_SHARE", "FeedbackCheck", "few_line", "unfed_line"]

#: `few_line`: a study warns when fewer than this share of the draws that could adapt
#: (all but the first `min_observations`) did (module docstring: why)
FEW_SHARE = 0.5


class FeedbackCheck:
    """Rank 0's check of an adaptive study's feedback (module docstring). Training
    thread only: `started` before the launcher starts, `lines` after it has stopped
    (both read the sampler, which the launcher's thread draws from meanwhile)."""

    def __init__(self) -> None:
        #: the reduction cadence (`simulation_loss_steps`, resolved), set by `Study.hooks`
        self.loss_steps: int | None = None
        self._static = False  # the launcher said at its start that no draw can adapt
        self._n_simulations: int | None = None  # the study's draws (`started`)

    def started(self, sampler: Sampler, n_simulations: int) -> None:
        """Note, before the launcher starts (and warns the same: `warn_static_sampler`),
        whether `sampler` can steer any draw of a study of `n_simulations`."""
        self._static = static_sampler(sampler, n_simulations) is not None
        self._n_simulations = n_simulations

    def lines(self, sampler: Sampler) -> list[str]:
        """The account's warning lines: `unfed_line`'s or `few_line`'s, unless the
        start said why no draw could adapt or the study stopped before its last draw."""
        if self._static:
            return []
        n, steps = self._n_simulations, self.loss_steps
        line = unfed_line(sampler, steps, n) or few_line(sampler, steps, n)
        return [] if line is None else [line]


def _stopped_early(sampler: AdaptiveSampler, n_simulations: int | None) -> bool:
    """The study stopped before its sampler drew the last of its `n_simulations` (None:
    unknown, judged as drawn): its settings are not judged (module docstring)."""
    return n_simulations is not None and sampler.position < n_simulations


def unfed_line(
    sampler: Sampler, loss_steps: int | None, n_simulations: int | None = None
) -> str | None:
    """Why no draw of `sampler` was steered by the training losses: it held fewer than
    it needs at its last draw (`AdaptiveSampler.observed_at_draw`; `min_observations`,
    1 for a sampler without one), with the fixes; None when some draw could adapt, for
    a fixed design, when this process made no draw, or when the study stopped before
    drawing its `n_simulations` (None: not known). `loss_steps`: the reduction cadence,
    named in the line when known."""
    if not isinstance(sampler, AdaptiveSampler) or sampler.observed_at_draw is None:
        return None
    if _stopped_early(sampler, n_simulations):
        return None
    held, least = sampler.observed_at_draw, sampler.min_losses
    if held >= least:
        return None
    draws = sampler.position
    return (
        f"  the adaptive sampler steered none of its draws: of {plural(draws, 'draw')}, 0 "
        f"adaptive and {draws} exploratory, as a fixed design would draw them. At its last "
        f"draw it held the training losses of {plural(held, 'simulation')}, and it adapts "
        f"from {least} on "
        f"(min_observations): the losses reach it {_cadence(loss_steps)} "
        f"(simulation_loss_steps), and the study drew its last simulation before enough "
        f"had arrived. {_FIXES}"
    )


def few_line(
    sampler: Sampler, loss_steps: int | None, n_simulations: int | None = None
) -> str | None:
    """Why few draws of `sampler` were steered by the training losses: some were, but
    fewer than `FEW_SHARE` of those its size allowed (all but its first
    `min_observations`: module docstring), with the counts and the fixes; None
    otherwise, for a fixed design, when none was (`unfed_line`'s), when the count
    is unknown (resumed from a checkpoint that did not save it), or when the study
    stopped before drawing its `n_simulations` (None: not known)."""
    if not isinstance(sampler, AdaptiveSampler) or not sampler.adaptive_draws:
        return None
    if _stopped_early(sampler, n_simulations):
        return None
    adaptive, draws, least = sampler.adaptive_draws, sampler.position, sampler.min_losses
    most = draws - least
    if adaptive >= FEW_SHARE * most:
        return None
    return (
        f"  the adaptive sampler steered few of its draws: of {draws} draws, {adaptive} "
        f"adaptive (drawn holding the training losses of at least {plural(least, 'simulation')}, "
        f"min_observations) and {draws - adaptive} exploratory (drawn before, as a fixed "
        f"design would), where {most} could have adapted (a draw holds the losses of the "
        f"simulations drawn before it at most): fewer than {FEW_SHARE:.0%} of them, only the "
        f"study's last draws. The losses reach it {_cadence(loss_steps)} "
        f"(simulation_loss_steps) and the study drew most of its simulations before enough "
        f"had arrived. {_FIXES}, or lower job_limit (the first job_limit draws are made "
        f"at the start, before any loss)"
    )


#: what a study changes for its losses to reach its sampler before its draws
_FIXES = (
    "Lower simulation_loss_steps (1: every step), let the buffer re-draw samples "
    "(buffer='reservoir', sample_to_insert_ratio above 1) or give each simulation more "
    "time steps, so that more steps are trained while the study still draws"
)


def _cadence(loss_steps: int | None) -> str:
    return f"every {loss_steps} training steps" if loss_steps else "at each reduction"
