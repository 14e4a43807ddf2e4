"""A study's silence that its launcher explains is not a stall.

Found by a user trial: with `LauncherTuning(startup_timeout=60)` and the stream's
`ReceiverConfig(stall_timeout=8)`, a solver that took 20 s to start stopped the study
at ~8 s as "stalled", although the launcher would have waited 60 s. The stall watchdog
now asks the launcher (`StreamSource.excuse_silence`, `Launcher.silence_explained`):
a silence while every job is within its start-up allowance (or queued) is logged once
and waited for; anything else still fails as before. Real `Study`, real subprocess
solvers and sockets; the solvers wait for a file that the test writes on an event (the
watchdog's log line), never for a time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import read_source

from melissa_trainer import (
    FIFOBuffer,
    Launcher,
    LauncherTuning,
    ReceiverConfig,
    SourceError,
    StreamSource,
    Study,
)
from melissa_trainer.launcher import LocalBackend
from melissa_trainer.launcher.expected_silence import explain_silence
from melissa_trainer.launcher.jobs import RunningJob
from melissa_trainer.launcher.silence import SilenceClock
from melissa_trainer.study.launch import other_rank_excuse

#: a solver whose start-up ends when the file GO exists (the test's event), bounded so
#: that no solver outlives a failed test; sends 3 steps, or nothing with SILENT set.
#: The solver whose parameter `a` is LATE waits for GO + "2" instead (`Release`).
#: Its imports come before GO: after it, a solver that still imported for a second (a
#: loaded machine) opens a second silence once the other has sent everything (the
#: watchdog rightly says each silence once: the tests tell silences apart by the
#: messages received, `Release`).
SLOW_START = r"""
import json, os, sys, time
import numpy as np

from melissa_trainer.client import Client  # (imported in the start-up: see below)

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
late = os.environ.get("LATE")
go = os.environ["GO"] + ("2" if late is not None and a == float(late) else "")
deadline = time.monotonic() + 90
while not os.path.exists(go):  # the start-up: no HELLO before it ends
    if time.monotonic() > deadline:
        sys.exit(7)
    time.sleep(0.05)
if os.environ.get("SILENT"):
    time.sleep(90)
    sys.exit(8)
with Client({"x": ((2,), "float32")}) as client:
    for t in range(3):
        client.send(t, x=np.array([a, t], np.float32))
"""

#: worker mode: each worker's start-up ends with GO, then it runs simulations
SLOW_WORKER = r"""
import os, sys, time
import numpy as np

from melissa_trainer.client import Client  # (imported in the start-up: see below)
from melissa_trainer.client.worker import next_simulation

go = os.environ["GO"]
deadline = time.monotonic() + 90
while not os.path.exists(go):  # a start-up paid once per worker, before any request
    if time.monotonic() > deadline:
        sys.exit(7)
    time.sleep(0.05)

while (work := next_simulation()) is not None:
    simulation_id, parameters = work
    with Client({"x": ((2,), "float32")}, simulation_id=simulation_id,
                parameters=parameters) as client:
        for t in range(3):
            client.send(t, x=np.array([parameters["a"], t], np.float32))
"""

EXCUSED = "not a stall"

#: the stream's stall_timeout: past it a silence is excused (or a stall). The start-up
#: silence lasts until the excuse (the solvers wait for it), whatever this is; 3 s, not
#: 1, so that a solver starved mid-stream on a loaded machine (a job that has sent, then
#: silent: not excused) is not a stall
STALL = 3.0


class Release(logging.Handler):
    """Writes `go` when the stall watchdog says it excuses a silence (the solvers'
    start-up then ends), and ``go2`` (the LATE solver's) at an excuse once simulation 0
    finished (`zero_done`). Each excuse is kept with the messages the receiver had then
    (`messages`): one silence is one count, since any message ends it."""

    def __init__(
        self, go: Path, messages: Callable[[], float], zero_done: Callable[[], bool]
    ) -> None:
        super().__init__()
        self.go, self.messages, self.zero_done = go, messages, zero_done
        self.excused: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if EXCUSED in record.getMessage():
            self.excused.append((self.messages(), record.getMessage()))
            self.go.touch()
            if self.zero_done():
                self.go.with_name("go2").touch()

    def first(self) -> str:
        """The first excuse (the start-up's: no message before it), having checked that
        each silence was said once: a count per excuse, never twice the same."""
        counts = [n for n, _ in self.excused]
        assert counts and counts[0] == 0, self.excused
        assert counts == sorted(set(counts)), f"a silence said twice: {self.excused}"
        return self.excused[0][1]


def study(
    tmp_path: Path,
    n: int,
    stall: float,
    env: dict[str, str],
    worker: bool = False,
    **tuning: Any,
) -> Study:
    script = tmp_path / "sim.py"
    script.write_text(SLOW_WORKER if worker else SLOW_START)
    launcher = Launcher(
        [sys.executable, str(script)],
        [{"a": float(i)} for i in range(n)],
        n,
        job_limit=n,
        backend=LocalBackend(),
        env={"GO": str(tmp_path / "go"), **env},
        worker=worker,
        tuning=LauncherTuning(
            **{"poll_interval": 0.05, "kill_grace": 2.0, "max_restarts": 0, **tuning}
        ),
    )
    return Study(launcher, StreamSource(ReceiverConfig(stall_timeout=stall)))


def messages_of(source: Study) -> Callable[[], float]:
    """The messages `source`'s receiver has taken in (read by `Release` in the
    ingesting thread, where the watchdog logs)."""
    return lambda: source.stream.telemetry()["messages"]


def run(source: Study, tmp_path: Path) -> tuple[list[dict[str, np.ndarray]], Release]:
    """Read `source` to its end as a trainer would, releasing the solvers once the
    watchdog has excused their silence."""
    release = Release(
        tmp_path / "go", messages_of(source), lambda: 0 in source.stream.finished_simulations()
    )
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    receiver_log.addHandler(release)
    buffer = FIFOBuffer(64)
    source.configure(str(tmp_path / "out"))
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        return read_source(source, buffer), release
    finally:
        receiver_log.removeHandler(release)
        source.stop()


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_start_up_within_the_launchers_allowance_is_not_a_stall(tmp_path: Path) -> None:
    """The trial's repro: the silence outlasts stall_timeout, the launcher allows 60 s
    of start-up: the study waits (and says why, once), then trains on every step."""
    source = study(tmp_path, 2, stall=STALL, env={}, startup_timeout=60)
    samples, release = run(source, tmp_path)
    got = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert got == [(s, t) for s in range(2) for t in range(3)]
    said = release.first()  # (and once per silence)
    assert f"past stall_timeout={STALL:g}" in said
    assert "2 simulations before their first message, within their start-up allowance" in said
    assert "60 s" in said and "startup_timeout=60" in said


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_second_start_up_silence_is_excused_once_more(tmp_path: Path) -> None:
    """Forced: solver 1 starts only at an excuse after simulation 0 finished (on a
    loaded machine, a solver's HELLO more than `stall_timeout` after the other's last
    message). Each silence is excused, once; the study trains on every step. (The
    earlier tests expected exactly one excuse: this interleaving failed them.)"""
    source = study(tmp_path, 2, stall=STALL, env={"LATE": "1"}, startup_timeout=60)
    samples, release = run(source, tmp_path)
    got = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert got == [(s, t) for s in range(2) for t in range(3)]
    assert "2 simulations before their first message" in release.first()
    later = [said for _, said in release.excused[1:]]
    assert any("1 simulation before its first message" in said for said in later), later


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_workers_starting_up_within_the_allowance_are_not_a_stall(tmp_path: Path) -> None:
    """Worker mode: the workers' start-up (before their first request) is excused
    within the launcher's start-up allowance, then they run every simulation."""
    source = study(tmp_path, 3, stall=STALL, env={}, worker=True, startup_timeout=60)
    samples, release = run(source, tmp_path)
    got = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert got == [(s, t) for s in range(3) for t in range(3)]
    said = release.first()
    assert "3 workers starting up (allowed 60 s each)" in said, said


@pytest.mark.e2e
@pytest.mark.timeout(90)
def test_a_solver_past_its_allowance_still_ends_the_study(tmp_path: Path) -> None:
    """A solver that never sends: excused while within its start-up allowance (2 s),
    killed as hung past it, and the study ends with the error naming it."""
    source = study(
        tmp_path, 1, stall=1.0, env={"SILENT": "1"}, startup_timeout=2, on_failure="raise"
    )
    with pytest.raises(SourceError) as info:
        run(source, tmp_path)
    message = str(info.value)
    # the launcher killed it (its failure report), and the stream stalled or the
    # study failed: either way simulation 0's silence is named
    assert "simulation 0" in message, message
    assert "exit codes ['timeout']" in message, message
    assert (tmp_path / "go").exists()  # the silence was excused first (the log's event)


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_external_mode_keeps_the_stall(tmp_path: Path) -> None:
    """No launcher, no excuse: a silence past stall_timeout fails as before."""
    source = StreamSource(
        ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path, stall_timeout=1.0)
    )
    buffer = FIFOBuffer(8)
    source.start(buffer, 0, 1)
    try:
        with pytest.raises(SourceError, match=r"stall_timeout=1\.0"):
            read_source(source, buffer)
    finally:
        source.stop()


# -- what the launcher explains (its rule, without processes) ------------------------------


def clock(startup: float | None = 10.0, timeout: float | str | None = "auto") -> SilenceClock:
    return SilenceClock(
        timeout, floor=120.0, factor=3.0, startup=startup, poll_interval=0.05, heartbeat=True
    )


def job(sid: int | None, silent: float = 0.0, sending: bool = False) -> RunningJob:
    out = RunningJob(handle=sid, simulation_id=sid, log_path=Path("x.log"))  # type: ignore[arg-type]
    out.silent, out.sending = silent, sending
    return out


def always(_: Any) -> bool:
    return True


def test_the_launcher_explains_only_start_ups_it_bounds_and_queued_jobs() -> None:
    starting = {"a": job(0, silent=9.0), "b": job(1, silent=1.0)}
    why = explain_silence(starting, clock(), always, {}, now=0.0)
    assert why is not None and "2 simulations before their first message" in why
    assert "10 s" in why
    # one past its allowance (about to be killed), one sending: not explained
    assert explain_silence({"a": job(0, silent=10.5)}, clock(), always, {}, 0.0) is None
    assert (
        explain_silence({"a": job(0), "b": job(1, sending=True)}, clock(), always, {}, 0.0) is None
    )
    assert explain_silence({}, clock(), always, {}, 0.0) is None  # no job alive
    # a start-up with no bound: nothing would end that silence but the watchdog
    assert explain_silence({"a": job(0)}, clock(startup=None), always, {}, 0.0) is None
    assert explain_silence({"a": job(0)}, clock(timeout=None), always, {}, 0.0) is None
    # a numeric simulation_timeout bounds a start-up too
    assert explain_silence({"a": job(0, silent=4.0)}, clock(timeout=5.0), always, {}, 0.0)
    # queued by a scheduler (startup_timeout=None on Slurm): the scheduler bounds it
    queued = explain_silence({"a": job(0)}, clock(startup=None), lambda h: False, {}, 0.0)
    assert queued is not None and "1 job queued by the scheduler" in queued
    # worker mode: a worker not heard from yet, within the allowance from its launch
    workers = {"w": job(None)}
    why = explain_silence(workers, clock(), always, {"w": 100.0}, now=105.0)
    assert why is not None and "1 worker starting up" in why
    assert explain_silence(workers, clock(), always, {"w": 100.0}, now=111.0) is None
    assert explain_silence(workers, clock(), always, {}, now=105.0) is None  # between two


def test_other_ranks_excuse_up_to_the_launchers_start_up_allowance() -> None:
    excuse = other_rank_excuse(LauncherTuning(startup_timeout=60))
    assert excuse is not None and excuse(59.0) is not None and excuse(61.0) is None
    assert other_rank_excuse(LauncherTuning(startup_timeout=None)) is None
    numeric = other_rank_excuse(LauncherTuning(simulation_timeout=30))
    assert numeric is not None and numeric(29.0) is not None and numeric(31.0) is None
