"""`Study` as a `Source`: the launcher composed with a `StreamSource`, used without a
trainer (the trainer's path is `test_study.py`), and the contracts between the two:
the fill-ins, the checkpoint layout, the errors."""

from __future__ import annotations

import logging
import sys
import time
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
from melissa_trainer.launcher.simulation_record import records_of
from melissa_trainer.study.study_stop import STOP_WAIT

SIMULATION = r"""
import json, os
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
with Client({"x": ((2,), "float32")}) as client:
    for t in range(int(os.environ["SIM_STEPS"])):
        client.send(t, x=np.array([a, t], np.float32))
"""


def launcher(
    tmp_path: Path,
    n: int,
    steps: int = 3,
    script: str = SIMULATION,
    spares: int = 0,
    **tuning: Any,
) -> Launcher:
    path = tmp_path / "sim.py"
    path.write_text(script)
    return Launcher(
        [sys.executable, str(path)],
        [{"a": float(i)} for i in range(n + spares)],  # spares: for redraws
        n,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_STEPS": str(steps)},
        tuning=LauncherTuning(
            **{"poll_interval": 0.05, "kill_grace": 2.0, "max_restarts": 0, **tuning}
        ),
    )


def keys(samples: list[dict[str, np.ndarray]]) -> list[tuple[int, int]]:
    return [(int(s["simulation_id"]), int(s["time_step"])) for s in samples]


def run_to_error(study: Study, tmp_path: Path) -> str:
    """Run `study` outside a trainer, reading as a trainer would; the `SourceError`'s text."""
    buffer = FIFOBuffer(8)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    try:
        study.on_all_ranks_started()
        with pytest.raises(SourceError) as info:
            read_source(study, buffer)
    finally:
        study.stop()
    return str(info.value)


def test_the_study_fills_in_what_the_stream_left_open(tmp_path: Path) -> None:
    study = Study(launcher(tmp_path, 3))
    assert study.stream.config.expected_simulations == 3  # the launcher's count
    assert study.stream.config.rendezvous_dir is None
    study.configure(str(tmp_path / "out"))
    assert study.stream.config.rendezvous_dir == tmp_path / "out" / "rendezvous"

    mine = StreamSource(ReceiverConfig(expected_simulations=5, rendezvous_dir=tmp_path / "r"))
    study = Study(launcher(tmp_path, 3), mine)
    study.configure(str(tmp_path / "out"))
    assert study.stream is mine  # what the user set is kept
    assert (mine.config.expected_simulations, mine.config.rendezvous_dir) == (5, tmp_path / "r")


def test_bad_parts_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="takes a melissa_trainer.Launcher, not StreamSource"):
        Study(StreamSource())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="StreamSource as stream, not ReceiverConfig"):
        Study(launcher(tmp_path, 1), ReceiverConfig())  # type: ignore[arg-type]


@pytest.mark.timeout(30)
def test_outside_a_trainer_the_rendezvous_must_be_given(tmp_path: Path) -> None:
    study = Study(launcher(tmp_path, 1))
    with pytest.raises(ValueError, match=r"rendezvous_dir=...\)\) outside an OnlineTrainer"):
        study.start(FIFOBuffer(8), 0, 1)
    study.stop()  # nothing started: nothing to stop, no error


@pytest.mark.timeout(30)
def test_fill_in_after_start_is_an_error(tmp_path: Path) -> None:
    stream = StreamSource(ReceiverConfig(expected_simulations=1))
    stream.start(FIFOBuffer(8), 0, 1)
    try:
        with pytest.raises(RuntimeError, match="before start"):
            stream.fill_in(expected_simulations=2)
    finally:
        stream.stop()


def test_a_study_checkpoint_is_not_resumed_by_a_stream_alone(tmp_path: Path) -> None:
    """Rank 0's state of a study holds the launcher's record: a `StreamSource` alone
    would drop it (the study would start over), so it says what to use."""
    state = {"simulations": {}, "launcher": {"version": 2}}
    with pytest.raises(ValueError, match=r"resume it with Study\(launcher"):
        StreamSource().load_state_dict(state)


def test_a_loaded_launcher_record_survives_a_checkpoint_before_start(tmp_path: Path) -> None:
    """A checkpoint written before the launcher starts (or on a rank that never starts
    it) keeps what was loaded, so that a second crash loses nothing."""
    study = Study(launcher(tmp_path, 2))
    # (a launcher's own record: a state it cannot resume is refused at load)
    state = {"simulations": {}, "version": 3, "launcher": launcher(tmp_path, 2).state_dict()}
    study.load_state_dict(state)
    assert study.state_dict() == state
    assert "launcher" not in study.stream.state_dict()  # the stream keeps its own part


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_study_outside_a_trainer_delivers_every_step_once_and_stops_clean(
    tmp_path: Path,
) -> None:
    study = Study(launcher(tmp_path, 4, steps=5))
    buffer = FIFOBuffer(64)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    try:
        study.on_all_ranks_started()
        seen = keys(read_source(study, buffer))
    finally:
        study.stop()
    assert sorted(seen) == [(s, t) for s in range(4) for t in range(5)]
    figures = study.telemetry()
    assert figures["launcher_finished"] == 4 and figures["launcher_running"] == 0
    assert figures["simulations_finished"] == 4
    assert records_of(study.state_dict()["launcher"])[3]["status"] == "finished"
    assert (tmp_path / "out" / "study" / "logs").is_dir()  # the launcher's logs


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_failed_study_names_its_failures_in_the_error(tmp_path: Path) -> None:
    """Every simulation fails: the error says the study failed and shows the log's tail."""
    failing = "import sys\nprint('no module named mysolver', file=sys.stderr)\nsys.exit(3)\n"
    # (spares: a redraw drawn before the second failure is seen must find parameters,
    # or the error would be "no parameters left", depending on timing)
    message = run_to_error(Study(launcher(tmp_path, 2, script=failing, spares=2)), tmp_path)
    assert message.startswith("the simulation study failed: ")
    assert "min_finished_fraction=0.5" in message
    assert "no module named mysolver" in message and "exit codes [3]" in message


STALLING = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
if a == 0:
    print("no module named mysolver", file=sys.stderr)
    sys.exit(3)
with Client({"x": ((2,), "float32")}) as client:
    client.send(0, x=np.array([a, 0], np.float32))
    if a == 1:
        time.sleep(3600)  # silent, alive
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_stream_error_carries_the_studys_failures(tmp_path: Path) -> None:
    """Simulation 0 fails for good (abandoned), 1 hangs: the stream's stall error says
    which simulation it waits for, and the study's part says what failed and why."""
    # 8 s, not 3 (nor 1): the stall clock runs from the receiver's start, through solver
    # start-ups (first HELLO ~0.6 s at load 5 on 2 cores, but past 3 s at load 12-14: two
    # helpers' runs failed so, with no HELLO at all); the test waits this long once
    stream = StreamSource(ReceiverConfig(stall_timeout=8.0))
    study = Study(launcher(tmp_path, 3, script=STALLING, on_failure="abandon"), stream)
    message = run_to_error(study, tmp_path)
    assert "stall_timeout=8.0" in message and "simulation 1:" in message  # the stream's
    assert (
        "study of 3 simulations: 1 finished, 1 abandoned, 1 running, 0 exited, 0 pending (= 3);"
        " besides, 0 failed for good" in message
    )  # the study's
    assert "no module named mysolver" in message


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("events", "wait"),
    [((), 0.0), (("on_end_of_stream",), STOP_WAIT), (("on_preempted",), 0.0),
     (("on_end_of_stream", "on_preempted"), 0.0)],
)  # fmt: skip
def test_stop_waits_for_the_last_simulations_only_at_the_end_of_the_stream(
    tmp_path: Path, events: tuple[str, ...], wait: float
) -> None:
    """Every simulation launched (nothing pending): a run stopped by `max_steps` or a
    hook (no END_OF_STREAM) kills them at once, as they may be blocked on a full buffer
    (it waited `STOP_WAIT` for nothing before); at the end of the stream, on any rank,
    they are closing and get `STOP_WAIT` for their data; once preempted, nothing will
    be trained on: no wait (a user's SIGTERM exited after 11.4 s, its checkpoint
    written after 0.1 s)."""
    hanging = "import time\ntime.sleep(3600)\n"
    study = Study(launcher(tmp_path, 2, script=hanging))
    study.configure(str(tmp_path / "out"))
    study.start(FIFOBuffer(8), 0, 1)
    waits: list[float] = []
    stop = study.launcher.stop

    def spy(wait: float = 0.0, before_kill: Callable[[], None] | None = None) -> None:
        waits.append(wait)
        stop(0.0, before_kill)  # (the hanging simulations would use up the wait)

    study.launcher.stop = spy  # type: ignore[method-assign]
    try:
        study.on_all_ranks_started()
        deadline = time.monotonic() + 30
        while study.launcher.summary()["running"] < 2:  # both launched: nothing pending
            assert time.monotonic() < deadline
            time.sleep(0.05)
        for event in events:
            getattr(study, event)()
    finally:
        study.stop()
    assert waits == [wait]


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_checkpoint_at_the_end_of_the_stream_records_every_complete_simulation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launcher's thread applies the receivers' reports of complete data once per
    `poll_interval`: a checkpoint taken at the end of the stream, before its next tick,
    recorded the last simulations as still running or exited (a CI failure of
    tests/launcher/test_scale.py). `state_dict` applies the pending reports first."""
    monkeypatch.setattr("melissa_trainer.study.study_stop.STOP_WAIT", 0.1)  # the thread sleeps on
    study = Study(launcher(tmp_path, 2, poll_interval=3600.0))  # one tick, then asleep
    buffer = FIFOBuffer(64)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    try:
        study.on_all_ranks_started()
        assert len(read_source(study, buffer)) == 2 * 3  # to the end of the stream
        records = records_of(study.state_dict()["launcher"])
    finally:
        study.stop()
    assert {r["status"] for r in records.values()} <= {"complete", "finished"}, records


SLOW_START = r"""
import json, os, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client

a = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["a"]
go = Path(GO_PATH)
while not go.exists():  # a slow start-up (a JIT compilation): sends nothing meanwhile
    time.sleep(0.02)
with Client({"x": ((2,), "float32")}) as client:
    for t in range(int(os.environ["SIM_STEPS"])):
        client.send(t, x=np.array([a, t], np.float32))
"""


def start_with_a_quick_notice(
    study: Study, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> FIFOBuffer:
    """Start `study` on rank 0 of 1 into a new buffer (returned), its first-data notice
    due after 0.2 s and the study's warnings captured."""
    study.first_data.after = 0.2
    buffer = FIFOBuffer(64)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.study")
    return buffer


def wait_for_the_notice(study: Study, caplog: pytest.LogCaptureFixture, deadline: float) -> None:
    """Wait for data as the trainer's reader does until the first-data notice is logged
    (fails past `deadline`, a `time.monotonic()`)."""
    while "no data yet" not in caplog.text:
        assert time.monotonic() < deadline, "no notice while waiting for the first data"
        study.wait_for(8, 0.05)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_training_that_waits_for_a_slow_start_up_says_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Solvers with a slow start-up send nothing for a while: the progress bar stays at
    ``0step`` and the run looked hung, without a word. Rank 0 now says once that it
    waits, how many simulations run and how long one may stay silent before it is
    killed as hung (the solvers here wait for a file the test writes once the line is
    seen)."""
    go = tmp_path / "go"
    study = Study(
        launcher(tmp_path, 2, steps=3, script=SLOW_START.replace("GO_PATH", repr(str(go))))
    )
    buffer = start_with_a_quick_notice(study, tmp_path, caplog)
    try:
        study.on_all_ranks_started()
        deadline = time.monotonic() + 30
        wait_for_the_notice(study, caplog, deadline)
        go.touch()
        seen = keys(read_source(study, buffer))
    finally:
        study.stop()
    assert sorted(seen) == [(s, t) for s in range(2) for t in range(3)]
    notices = [r.getMessage() for r in caplog.records if "no data yet" in r.getMessage()]
    assert len(notices) == 1, notices  # once per study
    (notice,) = notices
    assert "2 running" in notice and "training waits for their first samples" in notice
    assert "sends nothing for 600 s is killed as hung" in notice
    assert "startup_timeout" in notice and str(tmp_path / "out" / "study" / "logs") in notice
    assert "the stream's stall_timeout waits as long" in notice  # (the launcher explains)


SLOW_WORKER = r"""
import os, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

go = Path(GO_PATH)
while not go.exists():  # a slow start-up, paid once per worker, before any request
    time.sleep(0.02)
while (work := next_simulation()) is not None:
    simulation_id, parameters = work
    with Client({"x": ((2,), "float32")}, simulation_id=simulation_id,
                parameters=parameters) as client:
        for t in range(int(os.environ["SIM_STEPS"])):
            client.send(t, x=np.array([parameters["a"], t], np.float32))
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_the_notice_in_worker_mode_counts_workers_and_does_not_promise_a_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In worker mode the workers' start-up comes before they take a simulation, and the
    launcher times simulations only once taken (`worker_mode`'s contract): the notice
    said "0 running" while 2 workers started, and that a silent simulation is killed
    after 600 s, raise startup_timeout, which does nothing for a worker's start-up (the
    user trial of the own-solver how-to's worker). It now counts the workers started
    and says that no timeout bounds their start-up."""
    go = tmp_path / "go"
    path = tmp_path / "worker.py"
    path.write_text(SLOW_WORKER.replace("GO_PATH", repr(str(go))))
    launcher = Launcher(
        [sys.executable, str(path)],
        [{"a": float(i)} for i in range(3)],
        3,
        job_limit=2,
        backend=LocalBackend(),
        env={"SIM_STEPS": "3"},
        worker=True,
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    study = Study(launcher)
    buffer = start_with_a_quick_notice(study, tmp_path, caplog)
    try:
        study.on_all_ranks_started()
        deadline = time.monotonic() + 30
        while launcher.jobs_alive() < 2:  # both workers started (they wait for `go`)
            assert time.monotonic() < deadline, "the workers were not started"
            time.sleep(0.02)
        wait_for_the_notice(study, caplog, deadline)
        go.touch()
        seen = keys(read_source(study, buffer))
    finally:
        study.stop()
    assert sorted(seen) == [(s, t) for s in range(3) for t in range(3)]
    (notice,) = [r.getMessage() for r in caplog.records if "no data yet" in r.getMessage()]
    assert "(worker mode): 2 workers started, 0 simulations taken and running" in notice, notice
    assert "no timeout of the launcher bounds it" in notice and "killed as hung" not in notice
    assert "stall_timeout" in notice and "startup_timeout" in notice, notice
    assert str(tmp_path / "out" / "study" / "logs") in notice
