"""`Launcher.done` is never True for a study that failed, even in the moment between the
supervisor's thread moving the last simulation to failed (or abandoned), which leaves
nothing to run, and the study's error being stored for `check` to raise.

Before, `done` read only the stored error and the record: a loop ``while not
launcher.done: launcher.check()`` that polled in that moment ended as if the study had
completed, and never raised (CI, tests/launcher/test_srun_killed_rank.py: "DID NOT RAISE
LauncherError"); the end-of-study notice reads `done` too. Here the thread is held in
that moment (`FailurePolicy.reap_exited`, called just before the error is raised) while
the test reads `done`: no sleep, the order forced by events.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.failure_policy import FailurePolicy
from melissa_trainer.launcher.reports import LauncherError

pytestmark = pytest.mark.e2e  # (its solver runs as a process)

#: fails at once, every time, with the same last line
FAILING = [sys.executable, "-c", "import sys; print('no mesh file', flush=True); sys.exit(3)"]


def held_launcher(
    monkeypatch: pytest.MonkeyPatch, tuning: LauncherTuning, n: int, tmp_path: Path
) -> tuple[Launcher, threading.Event, threading.Event]:
    """A started launcher of `n` simulations of `FAILING` whose thread, once it judges the
    study failed, sets the first event and waits for the second before raising."""
    reached, release = threading.Event(), threading.Event()
    reap = FailurePolicy.reap_exited

    def held(self: FailurePolicy, when: str = "when the study failed") -> None:
        if when == "when the study failed":
            reached.set()
            release.wait(60)
        reap(self, when)

    monkeypatch.setattr(FailurePolicy, "reap_exited", held)
    launcher = Launcher(FAILING, [{"a": float(i)} for i in range(n)], n, job_limit=1,
                        log_dir=tmp_path / "logs", tuning=tuning)  # fmt: skip
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path)
    return launcher, reached, release


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "tuning, n",
    [
        # the policy: the one simulation given up is more than min_finished_fraction allows
        (
            LauncherTuning(
                max_restarts=0, on_failure="abandon", systematic_failures=None, poll_interval=0.01
            ),
            1,
        ),  # fmt: skip
        # a systematic failure (the same end twice before any data) at the last one: its
        # error raised by the systematic check; the policy judged the study failed too
        # (at the last simulation it always has: the systematic path's own mark of the
        # failure, in FailurePolicy.apply_policy, is a guard this case does not isolate)
        (
            LauncherTuning(
                max_restarts=0,
                on_failure="abandon",
                systematic_failures=2,
                min_finished_fraction=0.01,
                poll_interval=0.01,
            ),
            2,
        ),  # fmt: skip
    ],
    ids=["policy", "systematic"],
)
def test_a_failed_study_is_never_done(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tuning: LauncherTuning, n: int
) -> None:
    launcher, reached, release = held_launcher(monkeypatch, tuning, n, tmp_path)
    try:
        assert reached.wait(45), ("the study did not fail", launcher.summary())
        summary = launcher.summary()
        assert summary["pending"] + summary["running"] + summary["exited"] == 0, summary
        assert not launcher.done, "a failed study read as done before its error was stored"
        launcher.check()  # (its error not stored yet: nothing to raise)
        release.set()
        with pytest.raises(
            LauncherError,
            match=r"simulation 0 failed once|failed the same way before any simulation sent data",
        ):  # the loop users write: it ends by raising
            while not launcher.done:
                launcher.check()
                time.sleep(0.01)  # (a poll period; the test's timeout bounds the loop)
        assert not launcher.done
    finally:
        release.set()
        launcher.stop()
