"""What a failed attempt of a simulation becomes (`AttemptPolicy`, the base of
`StudyRecord`, whose module docstring tells the states): restarted, given up and
redrawn, abandoned, or the study fails (`failure` says why), by
`LauncherTuning.max_restarts`, `on_failure` (`ON_FAILURE`), `max_redraws`,
`min_finished_fraction` and `final_exit_codes` (an exit code that is never restarted).

Not thread-safe, as `StudyRecord`: the launcher serializes every call with its lock.
"""

from __future__ import annotations

from collections.abc import Sequence

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.study_record_state import StudyRecordState

__all__ = ["ON_FAILURE", "AttemptPolicy"]

#: What happens to a simulation that failed `max_restarts` + 1 times.
ON_FAILURE = ("redraw", "abandon", "raise")


class AttemptPolicy(StudyRecordState):
    """The failure policy half of `StudyRecord` (module docstring); `StudyRecord.__init__`
    sets the attributes."""

    max_restarts: int
    on_failure: str
    max_redraws: int
    min_finished_fraction: float
    final_exit_codes: frozenset[int]
    max_given_up: int
    failure: str

    def final_exit(
        self, codes: Sequence[int | str], own: tuple[int, str] | None = None
    ) -> str | None:
        """Why an attempt whose exit codes so far are `codes` is not restarted, when its
        last is one of `final_exit_codes` (the words its record and the log give); else
        None. `own`: the exit code of the task whose failure ended the attempt and how
        srun said it, when srun's status is another task's (`exit_cause.own_exit`: its
        SIGTERM of the others reads 143): that code is the one looked up. Pure: reads
        the codes given and the study's fixed setting."""
        code = own[0] if own is not None else codes[-1] if codes else None
        if isinstance(code, int) and code in self.final_exit_codes:
            said = f"exit {code} is one of LauncherTuning.final_exit_codes: not restarted"
            if own is not None and own[0] != codes[-1]:
                said += f" ({own[1]}, first; srun's status {codes[-1]}: it ended the others)"
            return said
        return None

    def attempt_failed(self, sid: int, own: tuple[int, str] | None = None) -> str:
        """Apply the failure policy to an ended, failed attempt (`own`: `final_exit`'s);
        returns "restart" (queued again), "redraw" (given up, a replacement will be
        drawn), "abandon" or "raise" (the study fails: `failure` says why)."""
        record = self.records[sid]
        if (final := self.final_exit(record.exit_codes, own)) is not None:
            # the solver said its failure will repeat: restarts would cost as long again
            record.reason = final
        elif record.restarts < self.max_restarts:
            self._index.restarted(record)
            self._move(sid, "pending")
            self.queue.appendleft(sid)  # before new draws: its data is partly there
            return "restart"
        given_up = self._index.count("failed", "abandoned")
        self._move(sid, "failed")
        if self.on_failure == "raise":
            self.failure = "with LauncherTuning.on_failure='raise'"
        elif self.on_failure == "redraw" and self.redraws >= self.max_redraws:
            self.failure = (
                f"and the LauncherTuning.max_redraws={self.max_redraws} redraws are used up"
            )
        elif given_up >= self.max_given_up:
            self.failure = (
                f"and {plural(given_up + 1, 'simulation')} failed for good, more than the "
                f"{self.max_given_up} that LauncherTuning.min_finished_fraction="
                f"{self.min_finished_fraction} allows in a study of {self.n_simulations}"
            )
            if self.on_failure == "abandon":
                # never replaced: counted abandoned, as its study's error and account say
                self._move(sid, "abandoned")
        elif self.on_failure == "abandon":
            self._move(sid, "abandoned")
            self.given_up(sid, "abandoned")
            return "abandon"
        else:
            self.redraws += 1
            self.given_up(sid, "redrawn")  # before its replacement's draw
            return "redraw"
        if record.status == "failed":  # it failed the study: not replaced
            self.not_replaced += 1
            self.not_replaced_ids.add(sid)
        if self.draw_log is not None:  # (not `given_up`: the study ends, the sampler draws no more)
            self.draw_log.gave_up(sid, record.status if record.status == "abandoned" else "failed")
        return "raise"
