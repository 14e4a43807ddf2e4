"""A study's end-of-run account: which simulations contributed no sample, and why.

A study can end "successfully" with a third of its simulations having contributed
nothing: a solver blown up to NaN sends samples the receiver refuses (``nonfinite=
"refuse"``, the default), and still finishes. `study_account` tells it, in a few lines:

    study account: 16 simulations ended, 11 contributed samples; 5 (31% of the study)
    contributed none:
      5 sent only NaN or Inf (all their samples refused, nonfinite='refuse'): ...

The reasons, in order: every sample non-finite (finished, all refused); every HELLO
refused (the receiver's reason quoted); failed or abandoned with no sample received
(exit codes). Those that sent finite samples, then NaN or Inf (refused), get a line
of their own (`account_nonfinite`), and one more when most samples were refused: a
study that "contributed" yet lost them. One that failed after sending some samples
(kept and trained on) is listed apart, given up part-way (redrawn or abandoned), or
"failed, not replaced" when the study stopped on it, with its exit codes and parameters
(a WARNING). Last, those that exited 0 with their data not all in when the run stopped:
a resume reruns them.

What a receiver saw is rank 0's (a simulation's steps are shared among the ranks: one
whose rank-0 share was all refused is counted); non-finite counts are this run's. Pure
formatting: `Study.stop` feeds it the launcher's records and rank 0's receiver's counts
(after the launcher's thread has stopped: `sampler_line` reads the sampler, the density
sampler's current warp included, computed if its observations changed since its draw).

The sampler's lines are `launcher.sampler_account`'s (`sampler_line`, `drawn_by`,
`static_sampler`, `warn_static_sampler`), and the unsteered one `launcher.steering`'s:
this module gives them under its own name too.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.account_exited import besides_exited, exited_line, id_ranges
from melissa_trainer.launcher.account_nonfinite import most_refused_line, partway_line
from melissa_trainer.launcher.exit_cause import codes_text
from melissa_trainer.launcher.sampler_account import sampler_line
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.steering import unsteered_line
from melissa_trainer.launcher.study_record_state import resumed_status

__all__ = [
    "SimulationOutcome",
    "log_account",
    "resume_lines",
    "stop_resume_lines",
    "stopped_line",
    "study_account",
]

logger = logging.getLogger("melissa_trainer.launcher")

_SHOWN = 10  # ids listed per reason


class SimulationOutcome(NamedTuple):
    """A simulation of the study, as the account needs it (from its launcher record)."""

    simulation_id: int
    status: str  # `simulation_record.STATUSES`
    exit_codes: Sequence[int | str]
    reason: str
    parameters: Mapping[str, float]
    attempts: int = 0  # launches so far
    #: failed for good and not replaced: the failure the study stopped on (status
    #: "failed", as a redrawn one's: `StudyRecord.not_replaced_ids` tells them apart)
    not_replaced: bool = False


def resume_lines(
    outcomes: Sequence[SimulationOutcome], n_simulations: int, head: str = "study resumed"
) -> list[str]:
    """What a resumed study does with its simulations (after `Launcher.reconcile`):
    those done (finished: their data is in the checkpoint), those that run again
    (running at the checkpoint, or their data not all in it), those given up, those
    not started yet. `head` begins the line (`stop_resume_lines` gives its own)."""
    done = [o.simulation_id for o in outcomes if o.status == "finished"]
    again = [o.simulation_id for o in outcomes if o.status == "pending" and o.attempts > 0]
    queued = [o for o in outcomes if o.status == "pending" and o.attempts == 0]
    given_up = [o.simulation_id for o in outcomes if o.status in ("failed", "abandoned")]
    active = sum(o.status != "failed" for o in outcomes)
    not_started = len(queued) + max(0, n_simulations - active)
    line = (
        f"{head}: {len(done)} of its {plural(n_simulations, 'simulation')} are done and do "
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


def stop_resume_lines(
    saved: Sequence[SimulationOutcome], complete: set[int], n_simulations: int, checkpoint: str
) -> list[str]:
    """The stop's words on what a run resumed from `checkpoint` will do, the resume's
    own line (`resume_lines`) but for its head: `saved` are the launcher's records as
    that checkpoint holds them (`LauncherRecord.saved_outcomes`), `complete` the ids
    whose data every rank's checkpointed receiver holds complete (what the resume's
    `reconcile` is given), and each status is the one the resume gives it
    (`study_record_state.resumed_status`). Rank 0's own records alone cannot say it: a
    simulation it counts finished may lack steps in another rank's checkpoint, and runs
    again (true for a resume on as many ranks and simulations as this run). None when
    that resume would have nothing to do (every simulation done or given up): a study
    that ended says nothing of a resume."""
    resumed = [
        SimulationOutcome(
            o.simulation_id,
            resumed_status(o.status, o.simulation_id in complete),
            o.exit_codes,
            o.reason,
            o.parameters,
            o.attempts,
        )
        for o in saved
    ]
    counted = sum(o.status != "failed" for o in resumed)  # (as `resume_lines` counts)
    if counted >= n_simulations and all(o.status != "pending" for o in resumed):
        return []
    return resume_lines(resumed, n_simulations, head=f"a run resumed from {checkpoint}")


def stopped_line(stopped: Sequence[int], saved: Sequence[SimulationOutcome] | None) -> str:
    """The stop's line on the simulations it killed as they ran (`stopped`, ids), in the
    words of a run resumed from the last checkpoint, whose launcher records are `saved`
    (`LauncherRecord.saved_outcomes`; None: none saved this run, the line says "runs them
    again"). One launched after that checkpoint (no record there, or no launch yet) is not
    started for the resume (`resume_lines` counts it so: it starts it as new): said apart,
    not as one run again (a user trial read "running ... a resumed run runs them again
    (9-10)" then the resume's "1 run again (9); 14 not started yet")."""
    n = len(stopped)
    ids, s = id_ranges(stopped), "s" if n > 1 else ""
    line = (
        f"study: {n} simulation{s} still running when training stopped "
        f"{'were' if n > 1 else 'was'} stopped (simulation{s} {ids})"
    )
    begun = {o.simulation_id for o in saved or () if o.attempts > 0}
    new = [] if saved is None else sorted(set(stopped) - begun)
    again = sorted(set(stopped) - set(new))
    if not new:
        return f"{line}: a resumed run runs {'them' if n > 1 else 'it'} again"
    if again:
        line += f": a resumed run runs {id_ranges(again)} again; {id_ranges(new)}"
    else:
        line += ": " + ("they" if len(new) > 1 else "it")
    one = len(new) == 1
    return (
        f"{line} {'was' if one else 'were'} launched after the last checkpoint, which counts "
        f"{'it' if one else 'them'} not started: a resumed run starts "
        f"{'it' if one else 'them'} as new"
    )


def _ids(ids: Sequence[int]) -> str:
    """ "simulation 3" or "simulations 1, 3" (at most `_SHOWN` ids, then "...")."""
    shown = ", ".join(map(str, ids[:_SHOWN])) + (", ..." if len(ids) > _SHOWN else "")
    return f"{'simulation' if len(ids) == 1 else 'simulations'} {shown}"


def study_account(
    outcomes: Sequence[SimulationOutcome],
    samples: Mapping[int, tuple[int, int]],
    n_simulations: int | None = None,
    first_refused: Mapping[int, int] | None = None,
    draws: Path | None = None,
) -> tuple[list[str], bool]:
    """The account's lines, and whether some simulation contributed no sample, failed
    part-way or had samples refused as NaN or Inf (then the caller logs it as a
    WARNING). The head's percentage names its denominator
    (`_share_of`): "of the study" when the simulations ended are the study's, each
    place once; "of the N drawn" when all drawn have ended but the run stopped before
    drawing the rest; "of the M ended" otherwise (some drawn had not ended: a study
    stopped part-way; or more ended than the study has places: those redrawn). A
    simulation the study stopped on is said "failed, not replaced" (its `not_replaced`),
    one given up and redrawn or abandoned "given up".

    Args:
        outcomes: every simulation drawn in the study, ended or not (those pending or
            running are left out; those "exited", data not all in, get a line last).
        samples: id -> (steps received, of which refused for NaN or Inf), every
            rank's summed (`EveryRankReport.samples_of`: rank 0's `IngestState.samples_of`
            and the other ranks' handed over by `stream.rank_activity`).
        n_simulations: the study's size (`Launcher.n_simulations`): the simulations it
            runs, redraws not counted; None: `outcomes` are the whole study.
        first_refused: id -> the first time step refused for NaN or Inf, the least over
            every rank's receiver (`EveryRankReport.first_refused`: rank 0's
            `NonFiniteGuard.first_step` and the other ranks' handed over): the line on
            those that turned non-finite part-way (`account_nonfinite`) says from which
            step on.
    """
    ended = [o for o in outcomes if o.status in ("finished", "failed", "abandoned")]
    nonfinite: list[SimulationOutcome] = []
    refused: list[SimulationOutcome] = []
    failed: list[SimulationOutcome] = []
    partway: list[SimulationOutcome] = []  # given up after sending some samples
    tainted: list[SimulationOutcome] = []  # some samples finite, some refused
    for o in ended:
        steps, bad = samples.get(o.simulation_id, (0, 0))
        if steps - bad > 0:
            if bad > 0:
                tainted.append(o)
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
    exited_ids = [o.simulation_id for o in outcomes if o.status == "exited"]
    besides = besides_exited(len(exited_ids), more=True)
    head = f"study account: {len(ended)} {noun} ended{besides}, {contributed} contributed samples"
    exited = exited_line(exited_ids)
    if not none and not partway and not tainted:  # ("every one" of none ended: say that)
        if ended:
            return [f"{head}; every one contributed.", *exited], False
        # (a user trial read a bare "none ended." above the line on 2 that exited: the
        # process of each had ended, its data had not all come in)
        still = f" with its data in{besides_exited(len(exited_ids))}" if exited_ids else ""
        return [f"study account: none ended{still}.", *exited], False
    of = _share_of(outcomes, len(ended), n_simulations)
    if none:
        lines = [f"{head}; {none} ({none / len(ended):.0%} {of}) contributed none:"]
    elif partway:
        share = len(partway) / len(ended)
        lines = [f"{head}; {len(partway)} ({share:.0%} {of}) failed part-way:"]
    else:  # (they contributed, but not all they sent: never "every one contributed")
        share = len(tainted) / len(ended)
        lines = [f"{head}; {len(tainted)} ({share:.0%} {of}) turned NaN or Inf part-way:"]
    if nonfinite:
        first = nonfinite[0]
        lines.append(
            f"  {len(nonfinite)} sent only NaN or Inf (all "
            f"{'their' if len(nonfinite) > 1 else 'its'} samples refused, nonfinite='refuse'): "
            f"{_first_of(nonfinite)}, parameters {dict(first.parameters)}. "
            f"The solver blows up there: check its time step or stability for these "
            f"parameters, or narrow the sampler's bounds"
        )
    if tainted:
        ids = [o.simulation_id for o in tainted]
        lines.append(partway_line(ids, samples, first_refused or {}, tainted[0].parameters))
    if refused:
        lines.append(
            f"  {len(refused)} refused by the receiver: "
            f"{_ids([o.simulation_id for o in refused])}: {refused[0].reason or 'see the log'}"
        )
    if failed:
        first = failed[0]
        kept = [o.simulation_id for o in failed if o.not_replaced]
        lines.append(
            f"  {len(failed)} failed with no sample received: {_first_of(failed)}, exit codes "
            f"{codes_text(first.exit_codes)}"
            + (f" ({first.reason})" if first.reason else "")
            + (f"; failed, not replaced ({_stopped_on(len(kept))}): {_ids(kept)}" if kept else "")
        )
    given_up = [o for o in partway if not o.not_replaced]
    stopped_on = [o for o in partway if o.not_replaced]
    if given_up:  # (the advice once, on the last of the two lines)
        lines.append(_partway_line(given_up, 0 if stopped_on else len(partway)))
    if stopped_on:
        lines.append(_partway_line(stopped_on, len(partway)))
    most = most_refused_line(samples, [o.simulation_id for o in ended])
    return [*lines, *([] if most is None else [most]), *exited], True


def _share_of(outcomes: Sequence[SimulationOutcome], ended: int, n_simulations: int | None) -> str:
    """What the account's percentage is of (`study_account`): a run stopped before the
    end of its study (max_steps, a hook) has not drawn it all, or not seen it all end.
    Undrawn, as `resume_lines` counts them: the study's size less the simulations drawn
    that count towards it (all but those given up and redrawn: "failed", unless not
    replaced). "Of the study" only when each simulation ended holds one of its places:
    a redraw's replacement ended too (a user trial's redraw study of 8 read "3 (27% of
    the study)" of its 11 ended)."""
    if ended < len(outcomes):
        return f"of the {ended} ended"
    counted = sum(o.status != "failed" or o.not_replaced for o in outcomes)
    if n_simulations is not None and counted < n_simulations:
        return f"of the {ended} drawn"
    if ended > counted:  # (some redrawn: their places ended twice)
        return f"of the {ended} ended"
    return "of the study"


def _first_of(group: Sequence[SimulationOutcome]) -> str:
    """A bucket's ids, then the one its example is of: "simulation 3" alone, or
    "simulations 1, 3; e.g. simulation 1"."""
    ids = _ids([o.simulation_id for o in group])
    return ids if len(group) == 1 else f"{ids}; e.g. simulation {group[0].simulation_id}"


def _stopped_on(count: int) -> str:
    """Why a simulation that failed for good was not replaced, in its number."""
    return f"the study stopped on {'them' if count > 1 else 'it'}"


def _partway_line(partway: Sequence[SimulationOutcome], advised: int) -> str:
    """The account's line for simulations that failed after sending some samples, all
    given up (redrawn or abandoned) or all not replaced (the study stopped on them):
    their ids, one's exit codes and parameters (the parameter set to look at); then,
    when `advised` (the part-way ones it speaks for; 0: none, another line says it),
    what became of their samples and what to do if the failures are the solver's."""
    first = partway[0]
    if first.not_replaced:
        heading = f"failed, not replaced ({_stopped_on(len(partway))})"
    else:
        # each one's own fate (a study may hold both: its policy changed on a resume)
        fates = Counter("redrawn" if o.status == "failed" else "abandoned" for o in partway)
        what = ", ".join(k if len(fates) == 1 else f"{n} {k}" for k, n in sorted(fates.items()))
        heading = f"given up part-way ({what})"
    line = (
        f"  {len(partway)} {heading}, after sending some samples: {_first_of(partway)}, "
        f"exit codes {codes_text(first.exit_codes)}, parameters {dict(first.parameters)}"
        + (f" ({first.reason})" if first.reason else "")
    )
    if not advised:
        return line
    them, these = ("them", "these") if advised > 1 else ("it", "its")
    # ("received", not "sent": a C or Fortran solver that exits or calls mt_client_abort
    # drops the steps its client still batched, which never reached a receiver)
    return line + (
        f". The samples the trainer received from {them} were trained on; if the solver fails "
        f"there for {these} parameters, narrow the sampler's bounds (each simulation's log, "
        "and Launcher.outcomes(), have the rest)"
    )


def log_account(
    outcomes: Sequence[SimulationOutcome],
    samples: Mapping[int, tuple[int, int]],
    sampler: Sampler | None = None,
    warnings: Sequence[str] = (),
    n_simulations: int | None = None,
    first_refused: Mapping[int, int] | None = None,
    draws: Path | None = None,
) -> tuple[list[str], bool]:
    """Log `study_account` (and `sampler_line`, then the caller's `warnings` lines: an
    adaptive sampler that steered none or few of its draws because its losses came
    late, `melissa_trainer.study.feedback`; then `unsteered_line`: one whose losses
    came in time and steered none all the same), as one record: a WARNING (shown by
    Python's default logging) when `study_account` says so or there are such lines,
    else INFO (`n_simulations`, `first_refused`: see `study_account`; `draws`: the
    study's draws.csv, which the sampler's line names).
    Returns the lines and whether they were a WARNING."""
    lines, some_none = study_account(outcomes, samples, n_simulations, first_refused)
    extra = None if sampler is None else sampler_line(sampler, draws)
    if extra is not None:
        lines.append(extra)
    # (after the feedback's lines, which say why few or none could be steered: not twice)
    unsteered = None if sampler is None or warnings else unsteered_line(sampler)
    lines.extend([*warnings, *([] if unsteered is None else [unsteered])])
    warned = some_none or bool(warnings) or unsteered is not None
    logger.log(logging.WARNING if warned else logging.INFO, "%s", "\n".join(lines))
    return lines, warned
