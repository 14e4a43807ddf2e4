"""The study account's lines on samples refused as NaN or Inf by simulations that also
sent finite ones: a solver that blows up part-way through its run.

Under ``nonfinite="refuse"`` (the default) such a simulation still finishes, and its
first steps are trained on: it "contributed". A user trial's solver sent NaN from its
5th step of 20 in every simulation: 60 of its 80 samples were refused, and the account
said "every one contributed". `partway_line` gives those simulations a line of their
own (how many, the share of their samples refused, from which time step each turned,
one's parameters), and `most_refused_line` a line more when at least half of all the
samples received were refused (`MOST_REFUSED`): the run still exits 0, as that policy
promises (docs/concepts/stream.md: the simulation "goes on"), so the account, a
WARNING, is where it shows, and the line names the settings that stop such a study.

Pure formatting of `launcher.account.study_account`'s buckets; what a receiver saw is
rank 0's (its share of each simulation's steps, its first refused step among them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from melissa_trainer.common.words import plural

__all__ = ["MOST_REFUSED", "most_refused_line", "partway_line"]

#: the share of the samples received refused as NaN or Inf from which the account says
#: that most of the study's samples were refused
MOST_REFUSED = 0.5

_SHOWN = 10  # ids listed per time step


def _simulations(ids: Sequence[int]) -> str:
    """ "simulation 3" or "simulations 1, 3" (at most `_SHOWN` ids, then "...")."""
    shown = ", ".join(map(str, ids[:_SHOWN])) + (", ..." if len(ids) > _SHOWN else "")
    return f"{'simulation' if len(ids) == 1 else 'simulations'} {shown}"


def partway_line(
    ids: Sequence[int],
    samples: Mapping[int, tuple[int, int]],
    first_refused: Mapping[int, int],
    parameters: Mapping[str, float],
) -> str:
    """The account's line on the simulations `ids` (in the account's order) that sent
    both finite samples and samples refused as NaN or Inf: their number, their samples
    refused of those received (`samples`: id -> (steps received, of which refused)),
    the first time step refused of each (`first_refused`, grouped by step; an id
    missing there is left out of it), and `parameters`, the first one's."""
    bad = sum(samples[s][1] for s in ids)
    steps = sum(samples[s][0] for s in ids)
    by_step: dict[int, list[int]] = {}
    for sid in ids:
        if sid in first_refused:
            by_step.setdefault(first_refused[sid], []).append(sid)
    starts = ", ".join(f"{t} ({_simulations(group)})" for t, group in sorted(by_step.items()))
    many = len(ids) > 1
    return (
        f"  {len(ids)} turned NaN or Inf part-way (their samples from then on refused, "
        f"nonfinite='refuse'): {bad} of {'their' if many else 'its'} {plural(steps, 'sample')} "
        f"refused ({bad / steps:.0%})"
        + (f", from time step {starts}" if starts else "")
        + (f"; e.g. simulation {ids[0]}" if many else f": simulation {ids[0]}")
        + f", parameters {dict(parameters)}. The samples before were trained on; the "
        f"solver blows up there: check its time step or stability for "
        f"{'these' if many else 'its'} parameters, or narrow the sampler's bounds"
    )


def most_refused_line(samples: Mapping[int, tuple[int, int]], ended: Sequence[int]) -> str | None:
    """The account's line when at least `MOST_REFUSED` of the samples received of the
    simulations `ended` were refused as NaN or Inf, else None."""
    steps = sum(samples.get(s, (0, 0))[0] for s in ended)
    bad = sum(samples.get(s, (0, 0))[1] for s in ended)
    if not steps or bad / steps < MOST_REFUSED:
        return None
    return (
        f"  most of the study's samples were refused as NaN or Inf: {bad} of {steps} "
        f"({bad / steps:.0%}), so training had {steps - bad}. The run goes on and exits 0 "
        "all the same (nonfinite='refuse' drops such samples); to stop a study whose "
        "solver blows up instead, ReceiverConfig(nonfinite='fail') fails each simulation "
        "at its first such sample, and LauncherTuning(on_failure='raise') stops the "
        "study at the first that fails for good"
    )
