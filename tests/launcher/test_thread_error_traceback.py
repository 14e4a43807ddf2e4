"""An unexpected error on the launcher's thread is logged with its traceback.

`LauncherThread._run` keeps the error for `Launcher.check`, whose `LauncherError` a
`Study` raises ``from None`` (its report is not printed twice): the traceback of an
error that is no `LauncherError` (a bug: a ``RuntimeError('dictionary changed size
during iteration')`` seen once in tests/launcher/test_scale.py under load) was then in
no output, its repr alone logged, and the line that raised it unknown. Now the thread's
log line carries the traceback."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.base import Backend, Handle, Job
from melissa_trainer.launcher.reports import LauncherError


@dataclass(eq=False)
class _Handle(Handle):
    job: Job


class NeverEnds(Backend):
    """Jobs that start no process and never end."""

    name = "never-ends"

    def launch(self, job: Job) -> Handle:
        return _Handle(job)

    def poll(self, handle: Handle) -> int | None:
        return None

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> int | None:
        return None

    def close(self) -> None:
        pass


def broken_heartbeat() -> Mapping[int, int]:
    raise RuntimeError("dictionary changed size during iteration")


@pytest.mark.timeout(60)
def test_an_unexpected_error_of_the_launchers_thread_is_logged_with_its_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launcher = Launcher(
        ["sim"],
        UniformSampler({"x": (0.0, 1.0)}, seed=0),
        2,
        backend=NeverEnds(),
        tuning=LauncherTuning(poll_interval=0.01),
    )
    caplog.set_level(logging.ERROR, logger="melissa_trainer.launcher")
    launcher.start(tmp_path / "rendezvous", heartbeat=broken_heartbeat, study_dir=tmp_path)
    try:
        thread = launcher._thread
        assert thread is not None
        thread.join(30)  # (the error ends it at its first tick)
        assert not thread.is_alive()
        with pytest.raises(LauncherError, match="dictionary changed size"):
            launcher.check()
    finally:
        launcher.stop()
    [record] = [r for r in caplog.records if r.getMessage().startswith("launcher: RuntimeError")]
    assert record.exc_info is not None and record.exc_info[1] is not None
    assert "broken_heartbeat" in caplog.text  # the frame that raised, in the logged traceback
