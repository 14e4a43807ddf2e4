"""A starved rank on several ranks: the launcher starts more simulations for it (its
bound on ended simulations awaiting their data raised while a rank starves and rank 0
is back-pressured), and a certain deadlock is said at once, not after `stall_timeout`
(`melissa_trainer.study.starvation`, `study.progress`, `launcher.supervisor`); a
`StreamSource` on its own (external mode) runs the watch too, with words for the
user's simulations (`melissa_trainer.stream.starvation_watch`).

The watch takes its clock; the e2e tests of the hang are
tests/trainer/test_starved_rank.py."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from data_reports import Quiet

from melissa_trainer import ReceiverConfig, StreamSource
from melissa_trainer.buffers import BufferStats, FIFOBuffer
from melissa_trainer.launcher import LauncherTuning, UniformSampler
from melissa_trainer.launcher.backends.base import Backend, Handle, Job
from melissa_trainer.launcher.jobs import Settings
from melissa_trainer.launcher.study_record import StudyRecord
from melissa_trainer.launcher.supervisor import Supervisor
from melissa_trainer.stream.starvation_watch import (
    REPORT_AFTER,
    StarvationWatch,
    StarvedRankError,
    external_watch,
)
from melissa_trainer.study.progress import (
    ProgressFile,
    clear_starving,
    read_progress,
    read_starving,
    report_starving,
)
from melissa_trainer.study.starvation import DEADLOCK_GRACE, DeadlockCheck

# -- the launcher's bound -------------------------------------------------------------------


@dataclass
class EndingHandle(Handle):
    job: Job


class Ending(Backend):
    """Jobs that end with exit 0 at their first poll."""

    name = "ending"

    def launch(self, job: Job) -> Handle:
        return EndingHandle(job)

    def poll(self, handle: Handle) -> int | None:
        return 0

    def kill(self, handle: Handle, grace: float = 5.0, reason: str | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class HeldBack(Quiet):
    """Rank 0's receiver, back-pressured: no simulation's data comes in."""

    def backpressured(self) -> bool:
        return True


def test_a_starved_rank_raises_the_bound_on_ended_simulations_awaiting_data(
    tmp_path: Path,
) -> None:
    """job_limit 2: simulations start while at most 2 ended ones await their data (2
    at a time: 4 await it) and then none starts; raised for a starved rank, 2 more
    start (6 await), then none: the data in flight stays bounded."""
    study = StudyRecord(
        UniformSampler({"a": (0.0, 1.0)}, seed=0), 20, max_restarts=0, on_failure="abandon",
        max_redraws=0, first_simulation_id=0,
    )  # fmt: skip
    study.data_reported = True
    settings = Settings(
        job_limit=2, ranks=1, tuning=LauncherTuning(), env={}, log_dir=tmp_path,
        rendezvous_dir="unused",
    )  # fmt: skip
    supervisor = Supervisor(
        settings, study, threading.Lock(), Ending(), lambda s, p: ["sim"], None, None,
        data=HeldBack(),
    )  # fmt: skip
    for _ in range(6):
        supervisor.tick()
    assert study.counts()["exited"] == 4 and not supervisor.jobs
    assert supervisor.held_by_data_bound() and supervisor.data_bound() == 2
    supervisor.bound_lifted = True
    assert not supervisor.held_by_data_bound() and supervisor.data_bound() == 4
    for _ in range(6):
        supervisor.tick()
    assert study.counts()["exited"] == 6 and not supervisor.jobs
    assert supervisor.held_by_data_bound()  # raised once, not without end


# -- what rank 0 publishes ------------------------------------------------------------------


class FakeLauncher:
    """Rank 0's launcher as `ProgressFile` reads it."""

    def __init__(self) -> None:
        self.held, self.lifted, self.by_bound = True, False, True
        self.counts = {"running": 0.0, "pending": 14.0, "exited": 3.0, "finished": 0.0}

    def data_backpressured(self) -> bool:
        return self.held

    def silence_explained(self, idle: float = 0.0) -> str | None:
        return None

    def jobs_alive(self) -> int:
        return 0

    def summary(self) -> dict[str, float]:
        return dict(self.counts)

    def lift_data_bound(self, lifted: bool) -> None:
        self.lifted = lifted

    def held_by_data_bound(self) -> tuple[bool, int]:
        return self.by_bound, 4 if self.lifted else 2


def test_rank_0_raises_its_bound_while_a_rank_reports_starving_and_it_is_held(
    tmp_path: Path,
) -> None:
    launcher: Any = FakeLauncher()
    progress = ProgressFile(tmp_path, "run1")
    progress.update(launcher, now=0.0)
    assert not launcher.lifted  # nobody starves
    report_starving(tmp_path, "run1", 1, 1000.0)
    report_starving(tmp_path, "run0", 2, 1000.0)  # another run's report: not read
    assert read_starving(tmp_path, "run1") == [1]
    assert progress.update(launcher, now=1.0)
    said = read_progress(tmp_path, "run1")
    assert launcher.lifted and said is not None
    assert said["starving"] == [1] and said["lifted"] and said["bound"] == 4
    assert said["held_by_bound"] and said["exited"] == 3 and said["running"] == 0
    launcher.held = False  # rank 0 takes data in again: the bound is restored
    progress.update(launcher, now=2.0)
    assert not launcher.lifted
    launcher.held = True
    clear_starving(tmp_path, 1)  # the wait is over
    progress.update(launcher, now=3.0)
    assert not launcher.lifted and read_starving(tmp_path, "run1") == []


# -- the certain deadlock -------------------------------------------------------------------


def stuck(written: float, **change: Any) -> dict[str, Any]:
    """Rank 0's progress in the deadlock (as `ProgressFile` writes it)."""
    said = {
        "run_id": "r", "explained": None, "jobs_alive": 0, "running": 0, "pending": 11,
        "exited": 5, "finished": 0, "starving": [1], "lifted": True, "held_by_bound": True,
        "bound": 4, "backpressured_for": 30.0, "written": written,
    }  # fmt: skip
    said.update(change)
    return said


def test_a_deadlock_is_said_once_two_writes_a_grace_apart_say_it() -> None:
    check = DeadlockCheck(1)
    assert check(stuck(100.0)) is None  # once: not yet
    assert check(stuck(100.0 + DEADLOCK_GRACE - 1)) is None
    words = check(stuck(100.0 + DEADLOCK_GRACE))
    assert words is not None
    assert "No simulation runs; rank 0's receiver has waited for room in its buffer" in words
    assert "its launcher starts none of the 11 simulations left: 5 that ended await" in words
    assert "more than its bound of 4 (2 x job_limit, raised for this starved rank" in words
    assert "A deadlock, stopped now rather than after stall_timeout" in words


@pytest.mark.parametrize(
    "change",
    [
        {"running": 1},  # a simulation runs: it may feed this rank
        {"held_by_bound": False},  # a simulation may start (or none is left: the end notice)
        {"pending": 0, "held_by_bound": False},  # the study's end: rank 0 tells the ranks
        {"backpressured_for": None},  # rank 0 takes data in
        {"starving": []},  # rank 0 has not seen this rank's report (nor raised its bound)
        {"lifted": False},
    ],
)
def test_no_deadlock_while_something_may_feed_the_rank(change: dict[str, Any]) -> None:
    check = DeadlockCheck(1)
    check(stuck(100.0))
    assert check(stuck(100.0 + DEADLOCK_GRACE, **change)) is None
    assert check(stuck(100.0 + 2 * DEADLOCK_GRACE)) is None  # (the grace from the start)


def test_a_count_that_moves_restarts_the_grace() -> None:
    check = DeadlockCheck(1)
    check(stuck(100.0))
    assert check(stuck(100.0 + DEADLOCK_GRACE, exited=4, finished=1)) is None  # took one in
    assert check(stuck(100.0 + 2 * DEADLOCK_GRACE - 1, exited=4, finished=1)) is None
    assert check(stuck(100.0 + 2 * DEADLOCK_GRACE, exited=4, finished=1)) is not None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_watch_reports_its_starvation_and_fails_at_once_on_a_deadlock() -> None:
    """stall_timeout 600: the deadlock is said within seconds of being known."""
    clock, put, reports = Clock(), [0], []
    progress = [stuck(100.0)]
    check = DeadlockCheck(1)
    w = StarvationWatch(
        1, 2, 600.0, lambda idle: "start-up", lambda: "", lambda: put[0],
        lambda: BufferStats(size=0, capacity=8, put=put[0], got=0, evicted=0), clock,
        report=reports.append, deadlock=lambda idle, wanted: check(progress[0]),
    )  # fmt: skip
    w.check(4, 0.0)
    w.check(4, 0.02)  # the wait starts
    clock.now += REPORT_AFTER - 0.5
    w.check(4, 0.02)
    assert reports == []
    clock.now += 0.5
    w.check(4, 0.02)
    assert reports == [REPORT_AFTER]  # told rank 0 (once)
    put[0] = 1  # a sample: the report is withdrawn, a new wait starts
    w.check(4, 0.02)
    assert reports == [REPORT_AFTER, None]
    clock.now += REPORT_AFTER
    w.check(4, 0.02)
    progress[0] = stuck(100.0 + DEADLOCK_GRACE)
    clock.now += 1.0
    with pytest.raises(StarvedRankError) as info:
        w.check(4, 0.02)
    said = str(info.value)
    assert said.startswith(
        "rank 1 of 2 cannot train, and nothing can change that: it waits for a batch of 4 "
        "samples, its buffer holds 0 samples, 1 received in all, none for 3 s. No simulation"
    )
    assert "Fix: a smaller batch_size" in said and "raise ReceiverConfig" not in said


# -- external mode --------------------------------------------------------------------------


class Receiving:
    """A receiver that gets messages (HELLOs, BYEs: its own watchdog's clock does not
    run) and no sample."""

    class ingest:  # noqa: N801 (the attribute's name)
        samples_put = 0

    def idle_seconds(self) -> float:
        return 0.0

    def backpressured(self) -> bool:
        return False


def test_external_mode_fails_a_starved_wait_with_words_for_the_users_simulations() -> None:
    clock = Clock()
    receiver: Any = Receiving()
    w = external_watch(receiver, lambda: None, FIFOBuffer(16), 1, 2, 5.0, clock)
    w.check(4, 0.0)
    w.check(4, 0.02)
    clock.now += 5.5
    with pytest.raises(StarvedRankError) as info:
        w.check(4, 0.02)
    said = str(info.value)
    assert said.startswith("rank 1 of 2 cannot train: it waits for a batch of 4 samples")
    assert "The other ranks' state is not known here (external mode)" in said
    assert "the simulations you start wait on that back-pressure (no launcher" in said
    assert "start more simulations (or more time steps each) that send this rank" in said


def test_a_stream_source_on_its_own_runs_the_external_watch(tmp_path: Path) -> None:
    """Before, a StreamSource had no starvation watch: a rank whose receiver gets
    messages and no sample waited for ever (its watchdog's clock reset by each)."""
    source = StreamSource(
        ReceiverConfig(bind="tcp://127.0.0.1:*", rendezvous_dir=str(tmp_path), stall_timeout=9)
    )
    source.start(FIFOBuffer(16), 1, 2)
    try:
        watch = source.starvation
        assert watch is not None and (watch.rank, watch.world, watch.stall_timeout) == (1, 2, 9)
        source.wait_for(4, 0.01)  # (runs it: no sample, not past the timeout)
    finally:
        source.stop()
    alone = StreamSource(ReceiverConfig(bind="tcp://127.0.0.1:*", rendezvous_dir=str(tmp_path)))
    alone.start(FIFOBuffer(16), 0, 1)
    try:
        assert alone.starvation is None  # one rank holds no other back
    finally:
        alone.stop()
