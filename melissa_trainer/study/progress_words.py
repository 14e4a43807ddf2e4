"""What another rank says of rank 0's state, from what rank 0 published in its progress
file (`study.progress`), for the starvation watch of a `Study` (`study.starvation`):
rank 0's state, said as of how long ago when older than a rewrite's period
(`rank0_words`); what excuses a silence (`rank0_excuse`); the study's failure, in its
launcher's words (`failed_words`); and, on rank 0, its own launcher (`launcher_words`),
and the error its study raises when its launcher failed (`study_failed`).
`seconds` and `counted` read the file's values (absent, or of an older rank 0).
"""

from __future__ import annotations

import time
from typing import Any

from melissa_trainer.common.words import plural
from melissa_trainer.sources.source import SourceError
from melissa_trainer.stream.watchdog import SilenceExcuse
from melissa_trainer.study.progress import EXCUSE_AGE, REFRESH

__all__ = [
    "counted",
    "failed_words",
    "launcher_words",
    "rank0_excuse",
    "rank0_words",
    "seconds",
    "study_failed",
]

#: what a resume does after the study failed (its checkpoint's record keeps what
#: `study_record` says: the simulations given up, and the failures counted)
RESUME_NOTE = (
    "a resume keeps the simulations given up (they do not run again; those the failure "
    "interrupted do), and what failed the study holds: one more simulation failing for "
    "good fails it again, so fix the solver first, or raise LauncherTuning.max_restarts "
    "or lower min_finished_fraction (docs/how-to/own-solver.md, When a solver fails)"
)


def study_failed(error: BaseException) -> SourceError:
    """The `SourceError` of a study whose launcher failed with `error` (`Launcher.check`),
    its `resume_note` saying what a resume does (`RESUME_NOTE`)."""
    failed = SourceError(f"the simulation study failed: {error}")
    failed.resume_note = RESUME_NOTE
    return failed


def seconds(value: Any) -> float | None:
    """A value of rank 0's progress file, `value`, as seconds, or None when it is no
    number (None, or a bool)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _age(progress: dict[str, Any], now: float | None = None, key: str = "written") -> float | None:
    """Seconds since rank 0 wrote `progress` (its ``written``, or the time `key` names:
    wall-clock), as of `now` (default: now); None when the file gives no time."""
    written = seconds(progress.get(key))
    return None if written is None else max(0.0, (time.time() if now is None else now) - written)


def failed_words(
    progress: dict[str, Any] | None, rank: int, world: int, wanted: int, now: float | None = None
) -> str | None:
    """The message of a rank other than 0 whose wait for a batch of `wanted` samples
    ends because rank 0 published the study's failure (``failed``, `study.progress`),
    led by the launcher's words as rank 0's own error says them ("the simulation study
    failed: ..."), or None when it did not. `now`: wall-clock seconds (default: now)."""
    failure = None if progress is None else progress.get("failed")
    if not isinstance(failure, str) or not failure:
        return None
    assert progress is not None
    age = _age(progress, now)
    when = "" if age is None else f", {age:.0f} s ago"
    return (
        f"the simulation study failed: {failure}\n(rank {rank} of {world} was told by rank "
        f"0's progress file{when}, while it waited for a batch of {wanted} samples that the "
        f"failed study will not send; rank 0, which waits for this rank in the step "
        f"agreement, stops with it)"
    )


def rank0_excuse(
    progress: dict[str, Any] | None,
    idle: float,
    fallback: SilenceExcuse | None,
    now: float | None = None,
) -> str | None:
    """What explains another rank's silence of `idle` s, from what rank 0 published
    (`study.progress`), or None: rank 0's ``explained`` while at most `EXCUSE_AGE` old
    by its ``alive`` (rank 0 beats it every `REFRESH` s while set, whatever its poll:
    `ProgressFile.beat`; ``written`` in an older rank 0's file); a file not known
    (None), or one without a time or older than that (a rank 0 that stopped beating,
    an earlier run's file), is answered by `fallback` (the
    launcher's start-up allowance, bounded by `idle`; None: nothing explains it). `now`:
    wall-clock seconds (default: now)."""
    if progress is not None:
        beat = "alive" if seconds(progress.get("alive")) is not None else "written"
        age = _age(progress, now, beat)
        if age is not None and age <= EXCUSE_AGE:
            explained = progress.get("explained")
            return f"rank 0's launcher says: {explained}" if explained else None
    return None if fallback is None else fallback(idle)


def rank0_words(progress: dict[str, Any] | None, rank: int, now: float | None = None) -> str:
    """What rank 0 published (`study.progress`), as a sentence for another rank's
    message ("" on rank 0 itself, whose own launcher `launcher_words` says), said as of
    how long ago when older than a rewrite's period (`REFRESH` + 1 s: rank 0 rewrites
    it that often while held back or a silence is explained, else at each change; a
    failed or stuck rank 0's last word may be minutes old). `now`: wall-clock seconds
    (default: now)."""
    if progress is None:
        return "Rank 0's state is not known here. "
    age = _age(progress, now)
    if age is not None and age > REFRESH + 1.0:
        return f"As rank 0 last published it, {age:.0f} s ago: {_state_words(progress, rank)}"
    return _state_words(progress, rank)


def counted(value: Any, noun: str) -> str:
    """`plural` of a count of rank 0's file; else as read (absent: "?"), nouns plural."""
    return plural(value, noun) if type(value) is int else f"{value} {noun}s"


def _state_words(progress: dict[str, Any], rank: int) -> str:
    """What `rank0_words` says of rank 0's state, as of its file's ``written``."""
    held = progress.get("backpressured_for")
    counts = (
        f"{counted(progress.get('jobs_alive', '?'), 'job')} alive, "
        f"{counted(progress.get('pending', '?'), 'simulation')} pending, "
        f"{progress.get('finished', '?')} finished"
    )
    own = seconds(progress.get("own_work_for"))
    busy = (
        ""
        if own is None
        else f"Rank 0's training has been in a hook or an action (a log, a validation, a "
        f"save) for {own:.0f} s. "
    )
    if held is None:
        return f"Rank 0's launcher: {counts}. {busy}"
    return (
        f"Rank 0's receiver has waited for room in its buffer for {float(held):.0f} s "
        f"(back-pressure: it waits for rank {rank}, in the step agreement), and its launcher "
        f"starts no more: {counts}. {busy}"
    )


def launcher_words(summary: dict[str, float], jobs_alive: int, backpressured: bool) -> str:
    """Rank 0's own launcher, as a sentence for its message."""
    held = "its receiver waits for room in its buffer; " if backpressured else ""
    return (
        f"Rank 0's launcher: {held}{plural(jobs_alive, 'job')} alive, "
        f"{plural(int(summary.get('pending', 0)), 'simulation')} pending, "
        f"{int(summary.get('finished', 0))} finished (the other ranks' "
        f"state is not known here: one whose buffer is full waits for this one in the step "
        f"agreement). "
    )
