"""The launcher against real processes: limits, restarts, timeouts, redraws, workers,
callables, resume, and no orphan process after stop() or after the trainer is killed.

Simulations are small Python scripts written into each test's directory (no shell), and
record what they did (start/end times, attempts, pids) in files there.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.worker import WorkerClient
from melissa_trainer.launcher import (
    Launcher,
    LauncherError,
    LauncherTuning,
    ListSampler,
    LocalBackend,
    make_sampler,
)
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.exploration import Exploration
from melissa_trainer.launcher.study_record import records_of
from melissa_trainer.launcher.templates import CommandTemplate
from melissa_trainer.launcher.worker_mode import WorkerSupervisor
from melissa_trainer.stream.receiver import Receiver, ReceiverConfig

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")

FAST = LauncherTuning(poll_interval=0.05, kill_grace=2.0)

SIMULATION = r"""
import json, os, signal, subprocess, sys, time

mode, out = sys.argv[1], sys.argv[2]
options = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
with open(os.path.join(out, "runs.txt"), "a") as f:
    f.write(f"{sid} {attempt} {os.getpid()}\n")
first = attempt == 0

if mode == "overlap":  # its lifetime, on the system-wide monotonic clock
    start = time.monotonic()
    time.sleep(options["sleep"])
    with open(os.path.join(out, f"{sid}.span"), "w") as f:
        f.write(f"{start} {time.monotonic()}")
elif mode == "exit":
    if sid in options.get("fail", []):
        print(options.get("say", "").format(sid=sid), flush=True)  # its log's last line
        sys.exit(options.get("code", 1))
elif mode == "hang":  # silent forever on its first attempt
    if first and sid in options["hang"]:
        time.sleep(600)
elif mode == "family":  # a child of its own, and SIGTERM ignored: needs SIGKILL
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    path = os.path.join(out, f"{sid}.family")
    with open(path + ".tmp", "w") as f:
        f.write(f"{os.getpid()} {child.pid}")
    os.replace(path + ".tmp", path)  # never seen empty by the test
    time.sleep(600)
elif mode == "stream":
    import numpy as np
    from melissa_trainer.client import Client

    client = Client({"u": ((4,), "float32")})  # id, parameters, endpoints: from the launcher
    if options.get("ready"):  # its start-up done (see `ReadyBackend`)
        open(os.path.join(out, f"{sid}-{attempt}.ready"), "w").close()
    for t in range(options["steps"]):
        if first and sid in options.get("crash", []) and t == options["at"]:
            client.close(bye=False)  # deliver what was sent, then die
            sys.exit(1)
        if first and sid in options.get("stall", []) and t == options["at"]:
            time.sleep(600)
        client.send(t, u=np.full(4, 100 * sid + t, np.float32))
        time.sleep(options.get("period", {}).get(str(sid), 0.0))
    client.close()
"""

WORKER = r"""
import os, sys
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

out, name = sys.argv[1], os.environ["MELISSA_TRAINER_WORKER"]
done = 0
while (work := next_simulation(timeout=30)) is not None:
    sid, parameters = work
    with open(os.path.join(out, f"{name}.txt"), "a") as f:
        f.write(f"{sid}\n")
    client = Client({"u": ((4,), "float32")}, simulation_id=sid, parameters=parameters)
    for t in range(3):
        if done == 1 and t == 1:  # the first worker at its second simulation dies, once
            try:
                os.close(os.open(os.path.join(out, "crashed"), os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                client.close(bye=False)
                sys.exit(3)
        client.send(t, u=np.full(4, sid, np.float32))
    client.close()
    done += 1
"""


# -- helpers ------------------------------------------------------------------------------


def script(tmp_path: Path, source: str = SIMULATION, name: str = "sim.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return str(path)


def command(tmp_path: Path, mode: str, **options: Any) -> list[str]:
    """The simulation's command; a literal brace is doubled in a template (str.format)."""
    escaped = json.dumps(options).replace("{", "{{").replace("}", "}}")
    return [sys.executable, script(tmp_path), mode, str(tmp_path), escaped]


def launcher(
    sim: Any, n: int, sampler: Any = None, *, tuning: dict[str, Any] | None = None, **kwargs: Any
) -> Launcher:
    """A Launcher on a `LocalBackend` (unless `backend` says otherwise, a class is
    instantiated), tuned `FAST` with the fields of `tuning` changed."""
    backend = kwargs.pop("backend", LocalBackend)
    backend = backend() if isinstance(backend, type) else backend
    sampler = sampler if sampler is not None else make_sampler("uniform", {"x": (0, 1)})
    fast = dataclasses.replace(FAST, **(tuning or {}))
    return Launcher(sim, sampler, n, backend=backend, tuning=fast, **kwargs)


def stream_study(
    launch: Launcher,
    tmp_path: Path,
    receiver: Receiver,
    buffer: FIFOBuffer,
    after_start: Callable[[], None] = lambda: None,
    timeout: float = 40.0,
) -> list[dict[str, np.ndarray]]:
    """Start the study into `receiver`, take every sample it streams, wait for it to
    complete (`after_start` runs in between); stop both. The samples, in order.
    `timeout`: seconds, a bound on the stream and on the study's end, each."""
    try:
        launch.start(tmp_path / "rendezvous", heartbeat=receiver.activity)
        after_start()
        samples = drain(buffer, timeout=timeout)
        run_study(launch, timeout)
    finally:
        launch.stop()
        receiver.stop()
    return samples


def run_study(launch: Launcher, timeout: float = 30.0) -> None:
    """Wait for the study to complete, checking it; the caller stops the launcher."""

    def finished() -> bool:
        launch.check()
        return launch.done

    wait_until(finished, "the study to complete", timeout)


def failure(launch: Launcher, timeout: float = 20.0) -> LauncherError:
    """Wait for the study to fail; the error `check()` raises."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            launch.check()
        except LauncherError as exc:
            return exc
        time.sleep(0.02)
    raise AssertionError("the study did not fail")


def runs(tmp_path: Path) -> list[tuple[int, int, int]]:
    """(simulation id, attempt, pid) of every simulation process started."""
    path = tmp_path / "runs.txt"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [(int(a), int(b), int(c)) for a, b, c in (line.split() for line in lines)]


def alive(pid: int) -> bool:
    """A live process (a zombie, killed but not yet reaped by its parent, is dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def receive(tmp_path: Path, expected: int) -> tuple[Receiver, FIFOBuffer]:
    buffer = FIFOBuffer(1000)
    config = ReceiverConfig(expected_simulations=expected, rendezvous_dir=tmp_path / "rendezvous")
    receiver = Receiver(buffer, config=config)
    receiver.start()
    return receiver, buffer


def keys(samples: list[dict[str, np.ndarray]]) -> Counter[tuple[int, int]]:
    return Counter((int(s["simulation_id"]), int(s["time_step"])) for s in samples)


def statuses(launch: Launcher) -> dict[int, str]:
    return {int(k): v["status"] for k, v in records_of(launch.state_dict()).items()}


# -- configuration ------------------------------------------------------------------------


def test_command_templates_format_each_token_without_a_shell() -> None:
    template = CommandTemplate(
        "solver --id {simulation_id:03d} --out '{rendezvous_dir}/a b' {parameters} "
        "--x={x:.2f} --json {parameters_json}",
        ["x", "y"],
    )
    argv = template.format(7, {"x": 0.125, "y": 2.0}, "/tmp/my dir")
    assert argv == [
        "solver", "--id", "007", "--out", "/tmp/my dir/a b", "0.125", "2.0", "--x=0.12",
        "--json", '{"x": 0.125, "y": 2.0}',
    ]  # fmt: skip
    assert CommandTemplate(["run", "p={parameters}"], ["x", "y"]).format(
        1, {"x": 1.0, "y": 2.0}, "/r"
    ) == ["run", "p=1.0 2.0"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"simulation": "sim {nope}"}, r"unknown placeholder \{nope\}"),
        ({"simulation": "sim {0}"}, "bad placeholder"),
        ({"simulation": ""}, "empty"),
        ({"simulation": "sim {simulation_id}", "worker": True}, "worker"),
        ({"ranks_per_simulation": 2}, "MPI backend"),
        ({"job_limit": 0}, "job_limit"),
        ({"tuning": {"max_restarts": 1}}, "tuning must be a melissa_trainer.launcher.Launcher"),
        ({"n_simulations": 3, "sampler": [{"x": 1.0}, {"x": 2.0}]}, "fewer than"),
        ({"simulation": lambda sid: None}, "fn\\(simulation_id, parameters\\)"),
        ({"backend": "cloud"}, "unknown launcher backend"),
        ({"env": {"A": 1}}, "env"),
    ],
)
def test_bad_configuration_fails_at_construction(kwargs: dict[str, Any], match: str) -> None:
    arguments: dict[str, Any] = {
        "simulation": "sim {x}",
        "sampler": make_sampler("uniform", {"x": (0, 1)}),
        "n_simulations": 2,
        **kwargs,
    }
    with pytest.raises(ValueError, match=match):
        Launcher(arguments.pop("simulation"), arguments.pop("sampler"), **arguments)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("simulation_timeout", 0, r"simulation_timeout must be .* > 0 \(or 'auto', or None for"),
        ("simulation_timeout", "Auto", r"simulation_timeout must be .* > 0 \(or 'auto', or None"),
        ("simulation_timeout", float("inf"), "simulation_timeout must be a finite number"),
        ("silence_floor", 0, "silence_floor must be a finite number of seconds > 0"),
        ("silence_factor", 0.5, r"silence_factor must be a finite number >= 1"),
        ("startup_timeout", -1, r"startup_timeout must be .* > 0 \(or None for no bound\)"),
        ("max_restarts", -1, r"max_restarts must be an int >= 0"),
        ("max_restarts", 1.0, r"max_restarts must be an int >= 0"),
        ("on_failure", "retry", r"on_failure must be one of \['redraw', 'abandon', 'raise'\]"),
        ("max_redraws", True, "max_redraws must be an int >= 0"),
        ("min_finished_fraction", 0, r"min_finished_fraction must be a number in \(0, 1\]"),
        ("min_finished_fraction", 1.5, r"min_finished_fraction must be a number in \(0, 1\]"),
        ("poll_interval", 0, "poll_interval must be a finite number of seconds > 0"),
        ("poll_interval", "0.1", "poll_interval must be a finite number of seconds > 0"),
        ("kill_grace", -1, "kill_grace must be a finite number of seconds >= 0"),
    ],
)
def test_launcher_tuning_names_the_bad_field(field: str, value: Any, match: str) -> None:
    """Checked when made, and again by `dataclasses.replace`: the message starts with
    the field's full name."""
    with pytest.raises(ValueError, match=f"^LauncherTuning.{match}"):
        LauncherTuning(**{field: value})
    with pytest.raises(ValueError, match=f"^LauncherTuning.{match}"):
        dataclasses.replace(LauncherTuning(), **{field: value})


def test_launcher_tuning_is_frozen_and_holds_seconds_as_floats() -> None:
    tuning = LauncherTuning(simulation_timeout=3, kill_grace=0, poll_interval=1)
    assert (tuning.simulation_timeout, tuning.kill_grace, tuning.poll_interval) == (3.0, 0.0, 1.0)
    assert all(isinstance(v, float) for v in (tuning.simulation_timeout, tuning.kill_grace))
    with pytest.raises(dataclasses.FrozenInstanceError):
        tuning.max_restarts = 5  # type: ignore[misc]
    assert LauncherTuning(min_finished_fraction=1).min_finished_fraction == 1
    with pytest.raises(TypeError, match="poll_interval"):  # tuning is no Launcher argument
        Launcher("sim {x}", [{"x": 0.0}], 1, poll_interval=0.1)  # type: ignore[call-arg]


def test_an_unpicklable_callable_is_refused_at_construction() -> None:
    import threading

    lock = threading.Lock()
    with pytest.raises(ValueError, match="cannot be pickled"):
        Launcher(lambda sid, p: lock.acquire(), [{"x": 0.0}], 1)


@pytest.mark.e2e
def test_a_worker_imports_only_the_standard_library_and_pyzmq() -> None:
    code = (
        "import sys, melissa_trainer.client.worker\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numpy', 'scipy', 'torch', 'accelerate', 'cloudpickle'))\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_an_empty_study_is_refused(tmp_path: Path) -> None:
    # it ran, trained nothing and exited 0 silently (tests/launcher/test_n_simulations.py)
    with pytest.raises(ValueError, match="n_simulations must be an int >= 1"):
        launcher("sim {x}", 0)


# -- scheduling ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_job_limit_is_never_exceeded_and_is_reached(tmp_path: Path) -> None:
    launch = launcher(command(tmp_path, "overlap", sleep=0.4), 7, job_limit=3, backend="local")
    launch.start(tmp_path / "rendezvous")
    try:
        run_study(launch)
    finally:
        launch.stop()
    spans = [tuple(map(float, p.read_text().split())) for p in tmp_path.glob("*.span")]
    assert len(spans) == 7
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    alive_now, most = 0, 0
    for _, step in events:  # ends sort before starts at equal times
        alive_now += step
        most = max(most, alive_now)
    assert most == 3
    summary = launch.summary()
    assert summary["finished"] == 7 and summary["running"] == summary["pending"] == 0
    assert summary["simulation_seconds"] >= 7 * 0.4
    assert sorted(statuses(launch)) == list(range(7))
    logs = sorted(p.name for p in (tmp_path / "logs").iterdir())  # default: {study_dir}/logs
    assert logs == [f"sim-{i}.log" for i in range(7)]


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_crashed_simulation_is_restarted_and_its_data_arrives_exactly_once(
    tmp_path: Path,
) -> None:
    receiver, buffer = receive(tmp_path, expected=3)
    sampler = ListSampler([{"x": 0.5}, {"x": 1.5}, {"x": 2.5}])
    sim = command(tmp_path, "stream", steps=8, crash=[11], at=5)
    launch = launcher(sim, 3, sampler, job_limit=2, first_simulation_id=10)
    samples = stream_study(launch, tmp_path, receiver, buffer)
    sim_ids = [10, 11, 12]
    assert keys(samples) == Counter({(s, t): 1 for s in sim_ids for t in range(8)})
    for s in samples:
        sid = int(s["simulation_id"])
        assert float(s["parameters"][0]) == {10: 0.5, 11: 1.5, 12: 2.5}[sid]
        np.testing.assert_array_equal(s["u"], np.full(4, 100 * sid + int(s["time_step"])))
    record = records_of(launch.state_dict())
    assert record[11]["exit_codes"] == [1, 0] and record[11]["restarts"] == 1
    assert record[10]["exit_codes"] == [0] and record[12]["exit_codes"] == [0]
    assert sorted((sid, attempt) for sid, attempt, _ in runs(tmp_path)) == [
        (10, 0), (11, 0), (11, 1), (12, 0)
    ]  # fmt: skip
    assert launch.summary()["restarts"] == 1


class ReadyBackend(LocalBackend):
    """A job counts as started once its process has imported its modules and made its
    client (the ready file the simulation writes, option ``ready``), as a job a
    scheduler still queues is not started (`Backend.started`): the start-up of a Python
    importing numpy and ZeroMQ, 1 to 5 s on this machine under load (measured), is then
    not silence, and a test's timeout can be about the silences it is about."""

    def __init__(self, out: Path) -> None:
        super().__init__()
        self.out = out

    def started(self, handle: Any) -> bool:
        env = handle.job.env
        ready = f"{env['MELISSA_TRAINER_SIMULATION_ID']}-{env['MELISSA_TRAINER_ATTEMPT']}.ready"
        return (self.out / ready).exists()


@pytest.mark.e2e
@pytest.mark.timeout(400)  # (a bound: about 15 s, and 2 minutes at load 19)
def test_a_silent_simulation_is_killed_after_the_timeout_but_a_slow_one_is_not(
    tmp_path: Path,
) -> None:
    """Simulation 0 stalls after 2 steps; 1 sends a step every second for longer than
    the 6 s timeout (its heartbeat keeps it alive); 2 is quick. The clock of each attempt
    starts once its start-up is done (`ReadyBackend`): the start-up of a Python took
    longer than a timeout of 1.5 s on a loaded machine (load 18: 3 of 3 runs failed),
    which killed them all; the end of an attempt (BYE, close, exit: seconds there too)
    still counts, hence 6 s."""
    receiver, buffer = receive(tmp_path, expected=3)
    sim = command(tmp_path, "stream", steps=10, stall=[0], at=2, period={"1": 1.0}, ready=True)
    launch = launcher(
        sim,
        3,
        ListSampler([{"x": 0.0}, {"x": 1.0}, {"x": 2.0}]),
        job_limit=3,
        tuning={"simulation_timeout": 6.0, "max_restarts": 3},
        backend=ReadyBackend(tmp_path),
    )
    # (the bounds: a start-up took 30 s at load 19)
    samples = stream_study(launch, tmp_path, receiver, buffer, timeout=180)
    assert keys(samples) == Counter({(s, t): 1 for s in range(3) for t in range(10)})
    record = records_of(launch.state_dict())
    assert record[0]["exit_codes"] == ["timeout", 0]
    assert record[1]["exit_codes"] == [0]  # 10 s of work, never silent for 6 s
    stalled_pid = next(pid for sid, attempt, pid in runs(tmp_path) if (sid, attempt) == (0, 0))
    assert not alive(stalled_pid)


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_without_heartbeat_the_timeout_is_wall_time(tmp_path: Path) -> None:
    # (3 s: a restarted Python on a loaded machine may need more than 0.5 s to exit)
    launch = launcher(
        command(tmp_path, "hang", hang=[0]), 2, job_limit=2, tuning={"simulation_timeout": 3.0}
    )
    launch.start(tmp_path / "rendezvous")
    try:
        run_study(launch)
    finally:
        launch.stop()
    record = records_of(launch.state_dict())
    assert record[0]["exit_codes"] == ["timeout", 0] and record[1]["exit_codes"] == [0]


class QueuedBackend(LocalBackend):
    """A scheduler's queue: each job is reported not started for `QUEUED` s after its
    launch (its process runs at once; what is tested is that the time counts as
    waiting, not as silence)."""

    QUEUED = 4.0

    def __init__(self) -> None:
        super().__init__()
        self.launched: dict[str, float] = {}
        self.asked_while_queued = 0

    def launch(self, job: Any) -> Any:
        handle = super().launch(job)
        self.launched[job.name] = time.monotonic()
        return handle

    def started(self, handle: Any) -> bool:
        started = time.monotonic() - self.launched[handle.job.name] > self.QUEUED
        self.asked_while_queued += not started
        return started


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_time_in_a_schedulers_queue_is_not_silence(tmp_path: Path) -> None:
    backend = QueuedBackend()
    sim = command(tmp_path, "overlap", sleep=2.5)  # runs 2.5 s, all of it "queued"
    launch = launcher(sim, 2, job_limit=2, backend=backend, tuning={"simulation_timeout": 1.5})
    launch.start(tmp_path / "rendezvous")  # no receiver: silence is wall time once started
    try:
        run_study(launch)
    finally:
        launch.stop()
    record = records_of(launch.state_dict())
    assert [record[s]["exit_codes"] for s in (0, 1)] == [[0], [0]]  # 2.5 s > 1.5 s
    assert backend.asked_while_queued > 0


# -- failure policies ---------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_after_max_restarts_the_parameters_are_redrawn_under_a_new_id(tmp_path: Path) -> None:
    abandoned: list[int] = []
    sampler = make_sampler("halton", {"x": (0, 1)}, seed=1)
    launch = launcher(
        command(tmp_path, "exit", fail=[1]), 3, sampler, tuning={"max_restarts": 1}, job_limit=2
    )
    launch.start(tmp_path / "rendezvous", abandon=abandoned.append)
    try:
        run_study(launch)
    finally:
        launch.stop()
    assert abandoned == [1]
    assert statuses(launch) == {0: "finished", 1: "failed", 2: "finished", 3: "finished"}
    state = launch.state_dict()
    assert records_of(state)[1]["exit_codes"] == [1, 1] and state["redraws"] == 1
    reference = make_sampler("halton", {"x": (0, 1)}, seed=1)
    expected = [reference.draw() for _ in range(4)]
    assert [records_of(state)[i]["parameters"] for i in range(4)] == expected
    summary = launch.summary()
    assert (summary["finished"], summary["failed"], summary["redraws"]) == (3, 1, 1)


@pytest.mark.e2e
@pytest.mark.timeout(30)
@pytest.mark.parametrize("policy", ["raise", "redraw"])
def test_a_failure_beyond_the_policy_raises_a_clear_error_from_check(
    tmp_path: Path, policy: str
) -> None:
    sim = command(tmp_path, "exit", fail=[0, 1, 2, 3])
    tuning = {"on_failure": policy, "max_restarts": 1, "max_redraws": 1}
    tuning["systematic_failures"] = None  # (all fail alike: that would stop it first)
    launch = launcher(sim, 2, tuning=tuning, job_limit=1)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    failed = 0 if policy == "raise" else 1  # with "redraw", 0 is redrawn as 2, then 1 fails
    assert f"simulation {failed} failed 2 times" in message
    assert "exit codes [1, 1]" in message and f"sim-{failed}.log" in message
    assert ("on_failure='raise'" if policy == "raise" else "max_redraws=1") in message
    assert not launch.done
    launch.stop()  # idempotent
    with pytest.raises(LauncherError):
        launch.check()  # still reported


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_solver_that_cannot_run_stops_the_study_after_a_few_launches_with_one_report(
    tmp_path: Path,
) -> None:
    sim = command(tmp_path, "exit", fail=list(range(200)), say="ImportError: no module fipy")
    launch = launcher(sim, 64, job_limit=2)  # the default failure policy and budget
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    started = runs(tmp_path)
    assert 4 <= len(started) <= 6  # the 4 attempts, and what started meanwhile
    headline, *report = message.splitlines()
    assert headline.startswith("the study stopped: every one of the study's first 4 attempts")
    assert "exit code 1, last log line 'ImportError: no module fipy'" in headline
    assert "systematic_failures=4" in headline and len(report) < 15  # one short report
    assert report[0].startswith("study of 64 simulations: 0 finished, 0 abandoned, ")
    counted = [int(w) for w in report[0].split("(= ")[0].split() if w.isdigit()]
    assert sum(counted[1:]) == 64 and "(= 64)" in report[0]  # the places add up
    # the 4 ended, and those launched meanwhile (still running: counted launched)
    tried = report[0].rpartition("; ")[2]
    assert tried == "4 attempts in all" or (
        tried.endswith(" attempts launched in all, 4 of them ended")
        and int(tried.split()[0]) >= len(started)
    ), tried
    assert sum("failed alike" in line for line in report) == 1  # one block, not one each


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_failures_that_differ_or_follow_data_are_left_to_the_failure_policy(
    tmp_path: Path,
) -> None:
    # each simulation fails its own way (its parameters, not the solver): no early stop
    sim = command(tmp_path, "exit", fail=[0, 1, 2, 3, 4, 5], say="diverged in simulation {sid}")
    tuning = {"max_restarts": 1, "max_redraws": 2}
    launch = launcher(sim, 2, tuning=tuning, job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "failed 2 times" in message and "the study stopped" not in message
    # identical failures after a simulation finished: the solver can run
    (tmp_path / "b").mkdir()
    sim = command(tmp_path / "b", "exit", fail=[1, 2, 3, 4, 5, 6], say="same")
    launch = launcher(sim, 3, tuning={"max_restarts": 1, "max_redraws": 2}, job_limit=1)
    launch.start(tmp_path / "b" / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "failed 2 times" in message and "the study stopped" not in message


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_abandon_gives_up_the_simulation_and_goes_on(tmp_path: Path) -> None:
    abandoned: list[int] = []
    launch = launcher(
        command(tmp_path, "exit", fail=[1]), 3, tuning={"on_failure": "abandon", "max_restarts": 0}
    )
    launch.start(tmp_path / "rendezvous", abandon=abandoned.append)
    try:
        run_study(launch)
    finally:
        launch.stop()
    assert abandoned == [1]
    assert statuses(launch) == {0: "finished", 1: "abandoned", 2: "finished"}
    assert launch.state_dict()["next_id"] == 3  # nothing redrawn


@pytest.mark.timeout(30)
def test_a_job_that_cannot_start_fails_the_study(tmp_path: Path) -> None:
    launch = launcher([str(tmp_path / "missing-solver"), "{x}"], 1)
    launch.start(tmp_path / "rendezvous")
    try:
        assert "could not start job sim-0" in str(failure(launch))
    finally:
        launch.stop()


# -- callables and workers ----------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(60)
@pytest.mark.parametrize("worker", [False, True])
def test_a_callable_simulation_runs_in_a_subprocess_via_cloudpickle(
    tmp_path: Path, worker: bool
) -> None:
    steps = 3  # a local variable, captured by the closure: only cloudpickle ships that

    def simulation(simulation_id: int, parameters: dict[str, float]) -> None:
        import numpy as np

        from melissa_trainer.client import Client

        with Client({"u": ((4,), "float32")}) as client:
            for t in range(steps):
                client.send(t, u=np.full(4, parameters["x"], np.float32))

    receiver, buffer = receive(tmp_path, expected=3)
    sampler = ListSampler([{"x": 1.0}, {"x": 2.0}, {"x": 3.0}])
    launch = launcher(simulation, 3, sampler, job_limit=2, worker=worker)
    samples = stream_study(launch, tmp_path, receiver, buffer)
    assert keys(samples) == Counter({(s, t): 1 for s in range(3) for t in range(steps)})
    assert {int(s["simulation_id"]): float(s["u"][0]) for s in samples} == {0: 1, 1: 2, 2: 3}
    assert (tmp_path / "simulation.pkl").exists()


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_workers_run_several_simulations_and_a_dead_workers_one_is_reassigned(
    tmp_path: Path,
) -> None:
    receiver, buffer = receive(tmp_path, expected=6)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path)]
    launch = launcher(worker, 6, job_limit=2, worker=True)
    samples = stream_study(launch, tmp_path, receiver, buffer)
    assert keys(samples) == Counter({(s, t): 1 for s in range(6) for t in range(3)})
    assert (tmp_path / "crashed").exists()
    record = records_of(launch.state_dict())
    assert sorted(r["exit_codes"] for r in record.values()) == [[0]] * 5 + [[3, 0]]
    per_worker = {p.stem: p.read_text().split() for p in tmp_path.glob("worker-*.txt")}
    assert max(len(sims) for sims in per_worker.values()) >= 2  # one job, several simulations
    assert sum(len(sims) for sims in per_worker.values()) == 7  # 6 + the one run twice
    assert all(p.name.startswith("worker-") for p in (tmp_path / "logs").iterdir())


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_workers_reach_the_launcher_on_the_endpoint_it_advertises(tmp_path: Path) -> None:
    """worker_bind on every interface, the address given to workers advertised: the
    workers connect there (not to loopback) and the study completes."""
    receiver, buffer = receive(tmp_path, expected=2)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path)]
    launch = launcher(
        worker, 2, worker=True, worker_bind="tcp://0.0.0.0:*", advertise_host="127.0.0.1"
    )

    def check_endpoint() -> None:
        supervisor = launch._supervisor
        assert isinstance(supervisor, WorkerSupervisor)
        assert supervisor.endpoint.startswith("tcp://127.0.0.1:")
        assert supervisor.socket.getsockopt_string(zmq.LAST_ENDPOINT).startswith("tcp://0.0.0.0:")
        assert supervisor.curve_public_key is not None  # beyond loopback: CURVE
        assert no_answer_without_the_key(supervisor.endpoint)

    samples = stream_study(launch, tmp_path, receiver, buffer, check_endpoint)
    assert keys(samples) == Counter({(s, t): 1 for s in range(2) for t in range(3)})


def no_answer_without_the_key(endpoint: str) -> bool:
    """A plain REQ socket (no CURVE) gets no answer from `endpoint` within 1 s."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 1000)
    try:
        sock.connect(endpoint)
        sock.send(json.dumps({"version": 1, "worker": "intruder", "finished": None}).encode())
        sock.recv()
        return False
    except zmq.Again:
        return True
    finally:
        sock.close(linger=0)
        ctx.term()


def test_a_worker_refuses_a_malformed_launcher_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MELISSA_TRAINER_LAUNCHER", "tcp://127.0.0.1:5555")
    monkeypatch.setenv("MELISSA_TRAINER_WORKER", "worker-0")
    monkeypatch.setenv("MELISSA_TRAINER_LAUNCHER_KEY", "not-a-key")
    with pytest.raises(RuntimeError, match="40-character Z85 public key"):
        WorkerClient()


class OtherNodesBackend(LocalBackend):
    """Stands in for SlurmBackend, whose construction needs sbatch on PATH: the check
    below depends only on the backend's name, and must hold on machines without Slurm."""

    name = "slurm"


def test_worker_mode_on_slurm_needs_an_endpoint_the_nodes_reach() -> None:
    with pytest.raises(ValueError, match="worker_bind='tcp://127.0.0.1:\\*'.*tcp://\\*:\\*"):
        launcher(["sim"], 2, worker=True, backend=OtherNodesBackend)
    with pytest.raises(ValueError, match="worker_bind must be a ZeroMQ"):
        launcher(["sim"], 2, worker=True, worker_bind="localhost:5555")
    assert launcher(["sim"], 2, worker=True, backend=OtherNodesBackend, worker_bind="tcp://*:*")


# -- state --------------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_resumed_study_does_not_rerun_finished_simulations(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def make() -> Launcher:
        sampler = make_sampler("sobol", {"x": (0, 1)}, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), 4, sampler, job_limit=1)

    first = make()
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    assert {k: v["status"] for k, v in records_of(state).items()} == {
        0: "finished", 1: "finished", 2: "running"
    }  # fmt: skip
    second = make()
    second.load_state_dict(state)
    assert second.summary()["pending"] == 2  # 2 to relaunch, 3 not drawn yet
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    caplog.clear()
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    # its start and its end name the same attempt (trial F2: "started (attempt 1)", then
    # "attempt 0 finished": the attempt killed by the stop has no exit code)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("simulation 2 ")]
    assert any(m.startswith("simulation 2 started (attempt 1)") for m in said), said
    assert any(m.startswith("simulation 2 attempt 1 finished") for m in said), said
    assert sorted((sid, attempt) for sid, attempt, _ in runs(tmp_path)) == [
        (0, 0), (1, 0), (2, 0), (2, 1), (3, 0)
    ]  # fmt: skip
    uninterrupted = make_sampler("sobol", {"x": (0, 1)}, seed=4)
    expected = [uninterrupted.draw() for _ in range(4)]
    final = records_of(second.state_dict())
    assert [final[i]["parameters"] for i in range(4)] == expected
    assert all(final[i]["status"] == "finished" for i in range(4))
    with pytest.raises(RuntimeError, match="before start"):
        second.load_state_dict(state)


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_resumed_launcher_optimises_no_design_and_draws_the_uninterrupted_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Breed in 6 parameters explores the optimised Latin hypercube of the study: the
    resumed launcher takes it from the state (before: built, it optimised the design,
    which the state replaced, and its first draw optimised it again)."""
    box = {f"p{i}": (0.0, 1.0) for i in range(6)}

    def make() -> Launcher:
        sampler = BreedSampler(box, seed=4)
        return launcher(command(tmp_path, "hang", hang=[2]), 6, sampler, job_limit=1)

    first = make()
    first.start(tmp_path / "rendezvous")
    try:
        wait_until(lambda: len(runs(tmp_path)) == 3, "simulation 2 to hang", 60.0)
        state = json.loads(json.dumps(first.state_dict()))
    finally:
        first.stop()
    computed: list[int] = []
    block = Exploration._block
    monkeypatch.setattr(Exploration, "_block", lambda e, n: computed.append(n) or block(e, n))
    second = make()
    second.load_state_dict(state)
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
    finally:
        second.stop()
    assert computed == []  # built, loaded, started, drawn: the state held the design
    uninterrupted = BreedSampler(box, seed=4)
    uninterrupted.plan(6)
    expected = [uninterrupted.draw() for _ in range(6)]
    final = records_of(second.state_dict())
    assert [final[i]["parameters"] for i in range(6)] == expected
    assert second.sampler.state_dict() == uninterrupted.state_dict()


# -- no orphans ---------------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_stop_kills_every_job_and_its_children_even_if_they_ignore_sigterm(
    tmp_path: Path,
) -> None:
    launch = launcher(command(tmp_path, "family"), 3, job_limit=2, tuning={"kill_grace": 0.3})
    launch.start(tmp_path / "rendezvous")
    pids: list[int] = []
    try:
        wait_until(lambda: len(list(tmp_path.glob("*.family"))) == 2, "two families", 60.0)
        for path in tmp_path.glob("*.family"):
            pids += map(int, path.read_text().split())
        assert all(alive(pid) for pid in pids)
        launch.stop()
        assert [pid for pid in pids if alive(pid)] == []
        summary = launch.summary()  # killed, so not running: pending (run on resume)
        assert (summary["running"], summary["pending"]) == (0, 3)
        assert sorted(statuses(launch).values()) == ["pending", "pending"]
        launch.stop()  # idempotent
    finally:
        launch.stop()
        kill_all(pids)


DRIVER = r"""
import signal, sys, time
# Ctrl-C's KeyboardInterrupt even where SIGINT came ignored (a background job of a shell
# without job control: Python then installs no handler, and the SIGINT case timed out)
signal.signal(signal.SIGINT, signal.default_int_handler)
from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler
sim, out = sys.argv[1], sys.argv[2]
launcher = Launcher(
    [sys.executable, sim, "hang", out, '{{"hang": [0, 1]}}'],
    ListSampler([{"x": 0.0}, {"x": 1.0}]), 2, job_limit=2,
    tuning=LauncherTuning(poll_interval=0.05),
)
launcher.start(out + "/rendezvous")
time.sleep(600)
"""


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_trainer_leaves_no_simulation_running(tmp_path: Path, sig: int) -> None:
    """SIGKILL and SIGTERM: no cleanup code runs in the trainer (PDEATHSIG ends the
    simulations); SIGINT (Ctrl-C): the interpreter exits and `atexit` runs `stop()`."""
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, script(tmp_path), str(tmp_path)], cwd=tmp_path
    )
    pids: list[int] = []
    try:
        wait_until(lambda: len(runs(tmp_path)) == 2, "two simulations", 60.0)
        pids = [pid for _, _, pid in runs(tmp_path)]
        assert all(alive(pid) for pid in pids)
        driver.send_signal(sig)
        assert driver.wait(60) != 0
        wait_until(lambda: not any(alive(pid) for pid in pids), "PDEATHSIG to end them", 60)
    finally:
        driver.kill()
        driver.wait()
        kill_all(pids)


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_fresh_study_does_not_quote_an_earlier_runs_logs(tmp_path: Path) -> None:
    """A first run whose solver read a parameter the sampler lacks, then a fresh run in
    the same study directory whose solver fails without a word (the sampler now
    right): its report quoted the first run's last log line and blamed the sampler for
    a parameter the new one draws. The first run's logs are moved aside, kept."""
    first = command(tmp_path, "exit", fail=list(range(200)), say="KeyError: 'k'")
    launch = launcher(first, 8, job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        assert "the solver asked for parameter 'k'" in str(failure(launch))
    finally:
        launch.stop()
    silent = command(tmp_path, "exit", fail=list(range(200)), say="")
    launch = launcher(silent, 8, make_sampler("uniform", {"k": (0, 1)}), job_limit=2)
    launch.start(tmp_path / "rendezvous")
    try:
        message = str(failure(launch))
    finally:
        launch.stop()
    assert "KeyError" not in message and "sampler" not in message, message
    assert "last log line '(an empty log)'" in message.splitlines()[0], message
    (kept,) = (tmp_path / "logs").glob("previous-*")
    assert "KeyError: 'k'" in (kept / "sim-0.log").read_text()
