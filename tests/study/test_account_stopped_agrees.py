"""The stop's line on the simulations it killed as they ran agrees with the resume's line.

A user trial (htrial17 out_b4.run2.log, SIGTERM at step 16, checkpoint-16 written at the
stop) read "2 simulations still running when training stopped were stopped (simulations
9-10): a resumed run runs them again", then "a run resumed from ...checkpoint-16: 9 ...
done (0-8); 1 run again (9 ...); 14 not started yet": simulation 10 was launched after the
checkpoint's launcher records were saved, which hold it not started, so the resume starts
it as new (`resume_lines`). The stop's line now says which the resume runs again and which
it starts as new, from the same records (`LauncherRecord.saved_outcomes`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from melissa_trainer.launcher.account import SimulationOutcome, stop_resume_lines, stopped_line
from melissa_trainer.study.closing import LastExits

N = 24


def outcome(sid: int, status: str, attempts: int) -> SimulationOutcome:
    return SimulationOutcome(sid, status, [], "", {}, attempts)


@dataclass
class Launcher:
    """What `LastExits.stop` reads of a launcher: 0-8 finished, 9 and 10 running at the
    stop, killed (pending again); the checkpoint saved before 10 was launched."""

    killed: bool = False
    saved_outcomes: list[SimulationOutcome] = field(
        default_factory=lambda: [
            *(outcome(i, "finished", 1) for i in range(9)),
            outcome(9, "running", 1),  # (10: no record yet, drawn after the save)
        ]
    )

    def outcomes(self) -> list[SimulationOutcome]:
        running = "pending" if self.killed else "running"
        return [
            *(outcome(i, "finished", 1) for i in range(9)),
            outcome(9, running, 1),
            outcome(10, running, 1),
        ]

    def stop(self, wait: float, before_kill: Callable[[], None]) -> None:
        before_kill()
        self.killed = True


def again_of(resume: str) -> str:
    found = re.search(r"; \d+ run again \(([-0-9, ]+):", resume)
    assert found, resume
    return found.group(1)


def test_the_stop_line_names_only_what_the_resume_runs_again() -> None:
    launcher = Launcher()
    exits = LastExits()
    exits.stop(launcher, 0.0, closing=False, told=None)  # type: ignore[arg-type]
    (line,) = exits.stopped_lines()
    (resume,) = stop_resume_lines(launcher.saved_outcomes, set(range(9)), N, "ckpt")
    assert "1 run again (9: " in resume and "14 not started yet" in resume  # (the trial's)
    assert again_of(resume) == "9"
    assert line == (
        "study: 2 simulations still running when training stopped were stopped "
        "(simulations 9-10): a resumed run runs 9 again; 10 was launched after the last "
        "checkpoint, which counts it not started: a resumed run starts it as new"
    )


def test_the_stop_line_for_each_mix_of_begun_and_new() -> None:
    saved = [outcome(3, "running", 1), outcome(4, "pending", 2), outcome(5, "pending", 0)]
    # (4: a restart queued at the save; 5: drawn, not launched; 6: not drawn)
    assert stopped_line([3, 4], saved).endswith(": a resumed run runs them again")
    assert stopped_line([5], saved) == (
        "study: 1 simulation still running when training stopped was stopped (simulation "
        "5): it was launched after the last checkpoint, which counts it not started: a "
        "resumed run starts it as new"
    )
    assert stopped_line([5, 6], saved).endswith(
        "(simulations 5-6): they were launched after the last checkpoint, which counts "
        "them not started: a resumed run starts them as new"
    )
    assert stopped_line([3, 6], saved).endswith(
        ": a resumed run runs 3 again; 6 was launched after the last checkpoint, which "
        "counts it not started: a resumed run starts it as new"
    )
    # (no records saved this run: the words as they were)
    assert stopped_line([5, 6], None).endswith("(simulations 5-6): a resumed run runs them again")
