"""A user's own solver, told plainly (issue 44): real studies on a `LocalBackend`, with
solvers that fail, hang or start slowly on purpose (a sleep at start-up stands in for a
JIT), and what the launcher says of them."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import drain
from waiting import wait_until

from melissa_trainer import StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherError, LauncherTuning, make_sampler
from melissa_trainer.launcher.backends.local import LocalBackend
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]

FAST = LauncherTuning(poll_interval=0.05, kill_grace=2.0)

#: a solver with options: which parameters it reads, the shape it sends, a start-up
#: sleep, a hang on some ids
SOLVER = r"""
import json, os, sys, time
import numpy as np
from melissa_trainer.client import Client

options = json.loads(sys.argv[1])
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
time.sleep(options.get("startup", 0.0))  # (a JIT's compile time)
if sid in options.get("hang", []) and attempt in options.get("hang_at_start", []):
    time.sleep(600)  # this attempt stalls in its set-up, before its first message
if sid in options.get("fail", []):
    sys.exit("diverged before its first step")
shape = tuple(options.get("wrong_shape" if sid in options.get("wrong", []) else "shape", [4]))
client = Client({"u": ((shape), "float32")})
values = [client.parameters[name] for name in options.get("reads", ["x"])]
blown = sid in options.get("nan", [])  # blows up from its first step
for t in range(options.get("steps", 3)):
    client.send(t, u=np.full(shape, np.nan if blown else sum(values) + t, np.float32))
    time.sleep(options.get("step_time", 0.0))  # (a solver's time step)
    if sid in options.get("hang", []) and t + 1 >= options.get("hang_after", 1):
        time.sleep(600)  # stalls after its first step (or hang_after), whenever it runs
client.close()
"""


def solver(tmp_path: Path, **options: Any) -> list[str]:
    path = tmp_path / "solver.py"
    path.write_text(textwrap.dedent(SOLVER))
    escaped = json.dumps(options).replace("{", "{{").replace("}", "}}")
    return [sys.executable, str(path), escaped]


def study(
    tmp_path: Path,
    sim: list[str],
    n: int,
    bounds: dict[str, tuple[float, float]],
    *,
    fields: Any = "first",
    tuning: dict[str, Any] | None = None,
    **kwargs: Any,
) -> tuple[Launcher, Receiver, FIFOBuffer]:
    """A launcher and rank 0's receiver, started as a `Study` starts them."""
    buffer = FIFOBuffer(1000)
    config = ReceiverConfig(
        expected_simulations=n, rendezvous_dir=tmp_path / "rendezvous", fields=fields
    )
    receiver = Receiver(buffer, config=config)
    receiver.start()
    receiver.report_refusals_to_launcher()
    launch = Launcher(
        sim,
        make_sampler("uniform", bounds, seed=0),
        n,
        backend=LocalBackend(),
        tuning=dataclasses.replace(FAST, **(tuning or {})),
        **kwargs,
    )
    launch.start(
        tmp_path / "rendezvous",
        heartbeat=receiver.activity,
        abandon=lambda sid: None,
        data=receiver,
        study_dir=tmp_path / "study",
    )
    return launch, receiver, buffer


def failure(launch: Launcher, timeout: float = 60.0) -> LauncherError:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launch.check()
        except LauncherError as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError("the study did not fail")


# -- failures that are not the solver's ---------------------------------------------------


@pytest.mark.timeout(90)
def test_a_parameter_the_sampler_does_not_draw_names_both_sides(tmp_path: Path) -> None:
    sim = solver(tmp_path, reads=["D", "k"])  # the solver reads k; the bounds lack it
    launch, receiver, _ = study(tmp_path, sim, 8, {"D": (0.1, 1.0), "F": (0.0, 0.1)}, job_limit=2)
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    headline = message.splitlines()[0]
    assert "the solver asked for parameter 'k'" in headline and "at fault" not in headline
    assert "asked for parameter 'k'" in headline and "['D', 'F']" in headline
    assert "The solver or its environment is at fault" not in message


@pytest.mark.timeout(90)
def test_a_key_error_of_a_drawn_parameter_is_not_blamed_on_the_sampler(tmp_path: Path) -> None:
    # the solver's own KeyError (here of a name the sampler draws: its dict, not ours)
    path = tmp_path / "solver.py"
    path.write_text("import sys\nraise KeyError('x')\n")
    launch, receiver, _ = study(tmp_path, [sys.executable, str(path)], 8, {"x": (0, 1)})
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    assert "The solver or its environment is at fault" in message
    assert "sampler is at fault" not in message


@pytest.mark.timeout(90)
def test_a_study_whose_every_simulation_is_refused_says_why_in_its_headline(
    tmp_path: Path,
) -> None:
    sim = solver(tmp_path, shape=[47, 48])
    launch, receiver, _ = study(
        tmp_path, sim, 8, {"x": (0, 1)}, fields={"u": ((48, 48), "float32")}, job_limit=2
    )
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    headline = message.splitlines()[0]
    assert "the study stopped" in headline
    assert "(47, 48)" in headline and "(48, 48)" in headline  # the receiver's reason
    assert "an empty log" not in message and "ReceiverConfig(fields=...)" in headline


# -- deterministic failures ---------------------------------------------------------------


def advice(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "max_restarts=0" in r.getMessage()]


@pytest.mark.timeout(90)
def test_a_deterministic_hang_is_told_once_that_restarts_only_repeat_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[1, 2])  # these ids hang whenever they run
    # (a hang after the first message is killed after silence_floor; the start-up bound,
    # 600 s, leaves a slow start on a loaded machine alone)
    tuning = {"silence_floor": 1.0, "max_restarts": 2, "on_failure": "raise"}
    launch, receiver, _ = study(tmp_path, sim, 4, {"x": (0, 1)}, tuning=tuning, job_limit=4)
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
        receiver.stop()
    told = advice(caplog)
    assert len(told) == 1, told  # once per study, not once per restart
    assert "hung again on its restart" in told[0] and "['timeout', 'timeout']" in told[0]
    # the failed study's error says it too
    assert "failed the same way on every attempt" in message
    assert "LauncherTuning(max_restarts=0)" in message


@pytest.mark.timeout(90)
def test_a_hang_mid_run_is_told_how_to_catch_it_sooner_from_its_step_gaps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The kill line and the "hung again" advice say both directions: a higher
    silence_floor to wait longer, and (a user trial's hang cost 3 x 120 s with 0.6 s
    steps) the lower one that the simulation's own step gaps allow."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    step, floor = 0.1, 8.0
    sim = solver(tmp_path, hang=[1], hang_after=3, steps=5, step_time=step)
    tuning = {"silence_floor": floor, "max_restarts": 1, "on_failure": "raise"}
    launch, receiver, _ = study(tmp_path, sim, 2, {"x": (0, 1)}, tuning=tuning, job_limit=2)
    try:
        failure(launch)
    finally:
        launch.stop()
        receiver.stop()
    lines = [r.getMessage() for r in caplog.records]
    kills = [line for line in lines if line.startswith("simulation 1 (attempt")]
    assert len(kills) == 2, lines
    for attempt, kill in enumerate(kills):
        assert "needs a higher silence_floor" in kill  # waiting longer, as before
        told = re.search(
            r"the study has seen, of any simulation, was ([\d.]+) s \(this attempt's: "
            r"(?:([\d.]+) s|it sent one message)\): if no step takes longer, "
            r"LauncherTuning\(silence_floor=(\d+)\) "
            r".* catches a hang sooner, after (\d+) s instead of 8 s",
            kill,
        )
        assert told is not None, kill
        gap, tighter = float(told.group(1)), int(told.group(3))
        if attempt == 0:  # (the restart skips the steps held: its one message a sign of life)
            own = float(told.group(2))
            # its steps came `step` apart (the solver sleeps so), seen within a few ticks
            assert step <= own + 0.05 and own <= gap
        assert tighter < floor
        # silence_factor x the study's longest gap, rounded up; a floor above that
        # gives the bound it says
        assert tighter >= 10 * gap and int(told.group(4)) == tighter
    again = [line for line in lines if "hung again on its restart" in line]
    assert len(again) == 1 and "catches a hang sooner" in again[0], again


@pytest.mark.timeout(120)
def test_a_restart_that_hangs_at_start_up_is_not_told_the_previous_kills_hint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The "hung again on its restart" WARNING tells the way to catch a hang sooner of
    the restart's own kill: none for a kill before its first message, where a lower
    silence_floor changes nothing (before, the hint of the previous attempt's kill
    mid-run was repeated)."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[0], hang_after=3, steps=5, step_time=0.1, hang_at_start=[1])
    # (silence_factor 2: the restart's start-up is killed at startup_timeout, 10 s, unless
    # the first start-up took more than 5 s; the floor, 8 s, bounds the hang mid-run)
    tuning = {"silence_floor": 8.0, "silence_factor": 2.0, "startup_timeout": 10.0,
              "max_restarts": 1, "on_failure": "raise"}  # fmt: skip
    launch, receiver, _ = study(tmp_path, sim, 1, {"x": (0, 1)}, tuning=tuning)
    try:
        failure(launch, 100.0)
    finally:
        launch.stop()
        receiver.stop()
    lines = [r.getMessage() for r in caplog.records]
    mid_run, at_start = [line for line in lines if line.startswith("simulation 0 (attempt")]
    assert "since its last message" in mid_run and "catches a hang sooner" in mid_run
    assert "no message yet" in at_start and "catches a hang sooner" not in at_start
    (again,) = [line for line in lines if "hung again on its restart" in line]
    assert "catches a hang sooner" not in again, again


@pytest.mark.timeout(90)
def test_max_restarts_0_redraws_a_deterministic_hang_at_its_first_failure(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    sim = solver(tmp_path, hang=[1])  # id 1 hangs; its redraw (id 4) does not
    tuning = {"silence_floor": 1.0, "max_restarts": 0}
    launch, receiver, buffer = study(tmp_path, sim, 4, {"x": (0, 1)}, tuning=tuning, job_limit=4)
    try:
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        launch.stop()
        receiver.stop()
    complete = Counter(int(s["simulation_id"]) for s in samples)
    assert {sid for sid, n in complete.items() if n == 3} == {0, 2, 3, 4}  # 4 replaced 1
    assert complete[1] == 1  # its first step, then given up after one attempt
    summary = launch.summary()
    assert summary["restarts"] == 0 and summary["redraws"] == 1
    assert advice(caplog) == []  # nothing failed twice: nothing to advise


# -- start-up -----------------------------------------------------------------------------

WORKER = r"""
import json, sys, time
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

time.sleep(json.loads(sys.argv[1])["startup"])  # once per job
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    client = Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters)
    for t in range(3):
        client.send(t, u=np.full(4, parameters["x"] + t, np.float32))
    client.close()
"""


def startup_advice(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The start-up advice said (whatever its fix: it depends on the solver's client)."""
    return [r.getMessage() for r in caplog.records if "dominates its wall time" in r.getMessage()]


def run_to_end(launch: Launcher, receiver: Receiver, buffer: FIFOBuffer) -> int:
    """Take the study's samples until its end; stop it. The count of samples."""
    try:
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        launch.stop()
        receiver.stop()
    return len(samples)


@pytest.mark.timeout(90)
def test_a_start_up_that_dominates_is_told_once_with_worker_mode_as_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    startup = 3.0  # (a JIT's compile time), then 3 steps sent at once
    sim = solver(tmp_path, startup=startup)
    launch, receiver, buffer = study(tmp_path, sim, 3, {"x": (0, 1)}, job_limit=3)
    assert run_to_end(launch, receiver, buffer) == 9
    told = startup_advice(caplog)
    assert len(told) == 1, told  # once per study, not once per simulation
    assert "before its first message" in told[0] and "Launcher(..., worker=True)" in told[0]
    summary = launch.summary()  # the split: start-up within the simulations' wall time
    assert 0 < summary["startup_seconds"] <= summary["simulation_seconds"]


@pytest.mark.timeout(90)
def test_no_start_up_advice_for_a_quick_start_nor_in_worker_mode(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    # (time steps of 1.5 s: a start-up slowed by a loaded machine, its imports taking
    # seconds, is still not most of the run)
    quick = solver(tmp_path, step_time=1.5)
    launch, receiver, buffer = study(tmp_path, quick, 2, {"x": (0, 1)}, job_limit=2)
    assert run_to_end(launch, receiver, buffer) == 6
    assert startup_advice(caplog) == []
    assert launch.summary()["startup_seconds"] > 0  # measured all the same
    # worker mode: the same slow start-up, paid once per job: nothing to advise
    (tmp_path / "w").mkdir()
    path = tmp_path / "w" / "worker.py"
    path.write_text(textwrap.dedent(WORKER))
    argv = [
        sys.executable,
        str(path),
        json.dumps({"startup": 3.0}).replace("{", "{{").replace("}", "}}"),
    ]
    launch, receiver, buffer = study(tmp_path / "w", argv, 4, {"x": (0, 1)}, worker=True)
    assert run_to_end(launch, receiver, buffer) == 12
    assert startup_advice(caplog) == []


# -- the end-of-run account ---------------------------------------------------------------


def account(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "study account" in r.getMessage()]


@pytest.mark.timeout(90)
def test_the_end_of_a_study_says_which_simulations_contributed_nothing_and_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    options = {"nan": [1, 2], "fail": [3], "wrong": [4], "wrong_shape": [5]}
    tuning = dataclasses.replace(FAST, max_restarts=0, on_failure="abandon")
    launch = Launcher(
        solver(tmp_path, **options),
        make_sampler("uniform", {"x": (0, 1)}, seed=0),
        8,
        job_limit=2,
        backend=LocalBackend(),
        tuning=tuning,
    )
    config = ReceiverConfig(rendezvous_dir=tmp_path / "rendezvous", fields={"u": ((4,), "float32")})
    source = Study(launch, StreamSource(config))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        samples = drain(buffer, timeout=60)
        wait_until(lambda: launch.check() is None and launch.done, "the study")
    finally:
        source.stop()
    # an oracle of its own: the samples the buffer got, by simulation
    contributed = sorted({int(s["simulation_id"]) for s in samples})
    assert contributed == [0, 5, 6, 7]
    (text,) = account(caplog)
    lines = text.splitlines()
    assert lines[0] == (
        "study account: 8 simulations ended, 4 contributed samples; 4 (50% of the study) "
        "contributed none:"
    )
    assert "2 sent only NaN or Inf" in lines[1] and "simulations 1, 2;" in lines[1]
    assert "1 refused by the receiver: simulation 4:" in lines[2] and "(5,)" in lines[2]
    assert "1 failed with no sample received: simulation 3, exit codes" in lines[3]
    warned = [r for r in caplog.records if "study account" in r.getMessage()]
    assert warned[0].levelno == logging.WARNING


@contextlib.contextmanager
def whole_study(tmp_path: Path, sampler: str, n: int) -> Iterator[tuple[Launcher, Study]]:
    """A `Study` of `n` quick simulations drawn by `sampler`, run to its end (every
    sample drained) before the body, stopped after it."""
    launch = Launcher(
        solver(tmp_path),
        make_sampler(sampler, {"x": (0, 1)}, seed=0),
        n,
        job_limit=2,
        backend=LocalBackend(),
        tuning=FAST,
    )
    source = Study(launch, StreamSource(ReceiverConfig(rendezvous_dir=tmp_path / "rdv")))
    buffer = FIFOBuffer(1000)
    source.start(buffer, 0, 1)
    try:
        source.on_all_ranks_started()
        assert len(drain(buffer, timeout=60)) == 3 * n
        wait_until(lambda: launch.check() is None and launch.done, "the study")
        yield launch, source
    finally:
        source.stop()


@pytest.mark.timeout(60)
def test_a_study_whose_every_simulation_contributed_says_so_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    with whole_study(tmp_path, "uniform", 3):
        pass
    records = [r for r in caplog.records if "study account" in r.getMessage()]
    assert [r.getMessage() for r in records] == [
        "study account: 3 simulations ended, 3 contributed samples; every one contributed."
    ]
    assert records[0].levelno == logging.INFO


@pytest.mark.timeout(60)
def test_the_account_says_what_an_adaptive_sampler_drew_and_observed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    with whole_study(tmp_path, "breed", 4) as (launch, source):
        # (a trainer's tracker would feed these: two simulations' losses, after every
        # draw was made, so that each draw explored)
        assert launch.observe({0: 0.5, 1: 0.7}) == 2
    assert source.account_report == [
        "study account: 4 simulations ended, 4 contributed samples; every one contributed.",
        "adaptive sampler: of 4 draws, 4 explored, 0 bred from the worst-trained "
        "simulations (exploration=1.0, Breed's default: every draw explores, the losses "
        "steer none; exploration below 1 breeds that share of the draws); the training "
        "losses of 2 simulations observed (the last 100 kept), 0 of them by its last draw; "
        f"each draw, how it was drawn and its loss: {tmp_path / 'study' / 'draws.csv'}",
    ]


WORKER_MARKING = r"""
import os, sys, time
from pathlib import Path
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client import Client
import numpy as np

time.sleep(float(sys.argv[1]))  # the start-up, once per job
Path(sys.argv[2], os.environ["MELISSA_TRAINER_WORKER"]).write_text("")  # (asks next)
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters) as client:
        for t in range(3):
            client.send(t, u=np.full(4, parameters["x"] + t, np.float32))
"""


@pytest.mark.timeout(90)
def test_worker_mode_counts_each_workers_start_up(tmp_path: Path) -> None:
    """In worker mode the start-up is the worker's, paid once: `startup_seconds` holds
    each worker's launch-to-first-request (it was 0.0 however slow the solver's start).
    The oracle: every worker that asked slept `startup` s first (a marker file each)."""
    startup = 2.0
    path, marks = tmp_path / "worker.py", tmp_path / "marks"
    path.write_text(textwrap.dedent(WORKER_MARKING))
    marks.mkdir()
    argv = [sys.executable, str(path), str(startup), str(marks)]
    launch, receiver, buffer = study(tmp_path, argv, 4, {"x": (0, 1)}, worker=True, job_limit=2)
    assert run_to_end(launch, receiver, buffer) == 12
    workers = len(list(marks.iterdir()))
    assert workers >= 1
    summary = launch.summary()
    # (a lower bound on the workers' own sleeps, on the monotonic clock the launcher reads
    # at their launch and first request: deterministic however loaded the machine)
    assert summary["startup_seconds"] >= startup * workers, summary


WORKER_HALFWAY = r"""
import os, sys, time
from pathlib import Path
from melissa_trainer.client.worker import next_simulation
from melissa_trainer.client import Client
import numpy as np

name, half = os.environ["MELISSA_TRAINER_WORKER"], float(sys.argv[1]) / 2
time.sleep(half)
Path(sys.argv[2], name + ".half").write_text("")  # (its launch returns only now)
time.sleep(half)
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters) as client:
        client.send(0, u=np.full(4, parameters["x"], np.float32))
"""


@pytest.mark.timeout(90)
def test_a_worker_start_up_is_timed_from_before_its_launch_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend slow to return from its launch (or a launcher thread descheduled on a
    loaded node) hid that part of a worker's start-up: the clock started once the launch
    had returned. Here each launch returns only once its worker has slept half of its
    start-up (a marker file: an event, not a delay), so a clock read after the launch
    counts at most the other half."""
    startup = 2.0
    path, marks = tmp_path / "worker.py", tmp_path / "marks"
    path.write_text(textwrap.dedent(WORKER_HALFWAY))
    marks.mkdir()
    launch_first = LocalBackend.launch

    def launch_slowly(self: LocalBackend, job: Any) -> Any:
        handle = launch_first(self, job)
        half = marks / (job.env["MELISSA_TRAINER_WORKER"] + ".half")
        wait_until(half.exists, timeout=30)
        return handle

    monkeypatch.setattr(LocalBackend, "launch", launch_slowly)
    argv = [sys.executable, str(path), str(startup), str(marks)]
    launch, receiver, buffer = study(tmp_path, argv, 2, {"x": (0, 1)}, worker=True, job_limit=1)
    assert run_to_end(launch, receiver, buffer) == 2
    workers = len(list(marks.iterdir()))
    assert workers >= 1
    # (each worker slept `startup` s between its launch and its first request)
    assert launch.summary()["startup_seconds"] >= startup * workers, launch.summary()


@pytest.mark.parametrize(("load", "said"), [(9.0, True), (0.1, False)])
def test_the_start_up_advice_says_when_the_machine_is_loaded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, load: float, said: bool
) -> None:
    """On a loaded machine every start-up is slower: the advice says so, with the load,
    so that a user of the examples on a busy node does not rewrite a quick solver."""
    from melissa_trainer.launcher import advice

    monkeypatch.setattr(advice.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(advice.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    told = advice.Advice(worker_mode=False)
    told.first_message(7, startup=3.0, client="python")
    told.ended(7, 0, wall=4.0)
    (message,) = startup_advice(caplog)
    assert ("load average 9.0 on 2 usable cores" in message) is said, message
    assert message.endswith("Said once per study.")
