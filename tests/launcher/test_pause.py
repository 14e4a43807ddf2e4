"""Pauses are not failures: a trainer stopped (SIGSTOP) and continued loses nothing.

A closing client waits for a receiver that keeps its connection open but does not read
(a stopped process), well past its bound on a receiver that is gone, and gives up on a
dead one within that bound, naming it. A study whose trainer is stopped for several
times the simulations' silence timeout and the clients' bound on a gone trainer
restarts nothing and trains on every (simulation, step) exactly once.
`benchmarks/pause.py` runs the same study with the defaults and a 120 s pause.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from held_ports import held_port, refused_endpoint

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.launcher.silence import SilenceClock

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and SIGSTOP")

DRIVER = Path(__file__).parents[1] / "scripts" / "paused_study.py"

#: a receiver in a process of its own, listening on port argv[1] (held by the test):
#: reads until the BYE, then prints the time steps
PEER = r"""
import json, sys, zmq
from melissa_trainer import wire as protocol
ctx = zmq.Context()
sock = ctx.socket(zmq.PULL)
sock.setsockopt(zmq.RCVHWM, 2)
sock.setsockopt(zmq.RCVBUF, 65536)
sock.bind(f"tcp://127.0.0.1:{sys.argv[1]}")  # (libzmq sets SO_REUSEADDR: see held_port)
print(sys.argv[1], flush=True)
steps = []
while True:
    frames = sock.recv_multipart()
    msg = protocol.decode(*frames[:2]) if len(frames) > 1 else protocol.decode(frames[0])
    if isinstance(msg, protocol.Data):
        steps.append(msg.time_step)
    elif isinstance(msg, protocol.Bye):
        print(json.dumps({"steps": steps, "bye": msg.steps_sent}), flush=True)
        break
"""

FIELDS = {"u": ((1 << 18,), "float32")}  # 1 MiB a step: more than the sockets buffer


def state(pid: int) -> str:
    """The process state letter in /proc (T: stopped)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def wait_until(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@contextlib.contextmanager
def peer() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The receiver's process and endpoint. Its port is held for the test
    (`held_port`): once the process is killed, the client's reconnections are refused,
    never accepted by another test's socket given the freed port."""
    port = held_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", PEER, str(port)], stdout=subprocess.PIPE, text=True, env=os.environ
    )
    try:
        assert proc.stdout is not None
        yield proc, f"tcp://127.0.0.1:{int(proc.stdout.readline())}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.communicate()


def stop(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: state(pid) == "T", 10, f"process {pid} did not stop")


def queue_steps(client: Client, first: int, n: int) -> None:
    """n steps, each a new array (queued without waiting for the receiver)."""
    for t in range(first, first + n):
        client.send(t, u=np.full(FIELDS["u"][0], t, np.float32))


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_close_waits_for_a_stopped_receiver_past_the_bound_on_a_gone_one() -> None:
    """The receiver is stopped for 3x `disconnected_timeout` while the client closes
    with 20 MiB queued: `close` waits, then delivers every step and the BYE."""
    bound, pause = 1.0, 3.0
    with peer() as (proc, endpoint):
        client = Client(
            FIELDS,
            simulation_id=1,
            endpoints=endpoint,
            array_reuse="never",
            tuning=ClientTuning(disconnected_timeout=bound, batch_bytes=0),
        )
        queue_steps(client, 0, 2)
        stop(proc.pid)
        queue_steps(client, 2, 18)
        resumed = threading.Event()  # (set once the receiver was sent SIGCONT)

        def resume_receiver() -> None:
            os.kill(proc.pid, signal.SIGCONT)
            resumed.set()

        resume = threading.Timer(pause, resume_receiver)  # the pause
        resume.start()
        try:
            client.close()  # (raised TimeoutError before: a bound on any wait, 60 s)
        finally:
            returned_resumed = resumed.is_set()
            resume.cancel()
        out, _ = proc.communicate(timeout=30)
    # it did wait for the receiver, which was stopped: it returned only once resumed (an
    # event, not a time)
    assert returned_resumed
    assert json.loads(out.splitlines()[-1]) == {"steps": list(range(20)), "bye": 20}


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_close_gives_up_on_a_dead_receiver_within_the_disconnected_timeout() -> None:
    """A receiver killed (its kernel closes the connection, reconnections are refused):
    `close` raises after about `disconnected_timeout`, not `close_timeout`, naming it."""
    with peer() as (proc, endpoint):
        client = Client(
            FIELDS,
            simulation_id=2,
            endpoints=endpoint,
            array_reuse="never",
            # (close_timeout an hour, far beyond this test's timeout: a close that waited
            # for it fails by the timeout marker; the words name the bound that ended it)
            tuning=ClientTuning(disconnected_timeout=1.0, close_timeout=3600.0, batch_bytes=0),
        )
        stop(proc.pid)  # (so that the steps stay queued)
        queue_steps(client, 0, 20)
        proc.kill()
        proc.wait()
        with pytest.raises(TimeoutError) as info:
            client.close()
    message = str(info.value)
    assert f"to {endpoint}: the receiver is unreachable, disconnected for" in message
    assert "simulation 2 rank 0: " in message and "disconnected_timeout=1.0 s" in message


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_error_in_a_solver_without_a_trainer_ends_it_at_once(tmp_path: Path) -> None:
    """A solver started by hand, no trainer listening, fails in its `with Client` block
    (a missing parameter): its own error comes out at once, not after the client's
    timeouts (here 300 s and 120 s, far beyond this test's own timeout)."""
    endpoint = refused_endpoint()  # (held: no other test's socket takes it)
    source = f"""
import numpy as np
from melissa_trainer.client import Client, ClientTuning
tuning = ClientTuning(close_timeout=300, disconnected_timeout=120)
with Client({{"u": ((4,), "float32")}}, simulation_id=0,
            endpoints="{endpoint}", tuning=tuning) as client:
    client.send(0, u=np.zeros(4, np.float32))
    client.parameters["diffusivity"]
"""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    env.pop("MELISSA_TRAINER_PARAMETERS", None)
    done = subprocess.run(
        [sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=45
    )
    assert done.returncode == 1
    assert "UnknownParameterError: this simulation has no parameter 'diffusivity'" in done.stderr


def test_a_pause_of_the_trainer_counts_as_no_ones_silence() -> None:
    """The silence clock: a tick counts at most `tick_cap` (2 poll intervals + 0.1 s)
    since the previous one, nothing at which the receiver waits for buffer room."""
    clock = SilenceClock(
        3.0, floor=1.0, factor=10.0, startup=5.0, poll_interval=0.2, heartbeat=True
    )
    assert clock.tick_cap == pytest.approx(0.5)
    assert clock.tick(100.0, reading=True) == 0.0  # (the first tick)
    assert clock.tick(100.2, reading=True) == pytest.approx(0.2)
    assert clock.tick(160.2, reading=True) == pytest.approx(0.5)  # a 60 s SIGSTOP
    assert clock.paused == pytest.approx(59.5)
    assert clock.tick(160.4, reading=False) == 0.0  # back-pressure
    assert clock.judge(3.5, sending=True) is not None and clock.judge(2.9, sending=True) is None


def test_a_starved_trainers_late_tick_is_not_the_simulations_silence() -> None:
    """The trainer's process not scheduled for 1.5 s (a loaded node): its receiver
    counted no message and its launcher's tick comes late. Before, a tick late by less
    than 2 s counted in full, and a simulation streaming every 0.1 s was killed past a
    1 s bound; now that tick counts `tick_cap`, and a real hang (ticks on time) is still
    killed once its silence passes the bound."""
    clock = SilenceClock(
        "auto", floor=1.0, factor=10.0, startup=60.0, poll_interval=0.05, heartbeat=True
    )
    clock.tick(100.0, reading=True)
    silent = clock.tick(100.05, reading=True)  # a message came just before this tick
    silent = clock.tick(101.55, reading=True)  # the late tick: no message counted since
    assert silent == pytest.approx(0.2) and clock.paused == pytest.approx(1.3)
    assert clock.judge(silent, sending=True) is None  # (killed before: 1.5 s > 1 s)
    now = 101.55
    while clock.judge(silent, sending=True) is None:  # a hang: ticks on time
        now += 0.05
        silent += clock.tick(now, reading=True)
    assert now == pytest.approx(101.55 + 0.85)  # 0.2 + 17 x 0.05 > 1 s


def test_the_derived_timeout_follows_the_longest_silence_seen() -> None:
    clock = SilenceClock(
        "auto", floor=1.0, factor=10.0, startup=5.0, poll_interval=0.05, heartbeat=True
    )
    assert clock.bound(sending=False) is not None and clock.bound(sending=False)[0] == 5.0
    # mid-stream with no silence between two messages seen yet: the floor, not the
    # start-up bound (a study whose solvers send all within one tick never sees one)
    assert clock.bound(sending=True)[0] == 1.0  # type: ignore[index]
    assert "seen, none yet" in clock.bound(sending=True)[1]  # type: ignore[index]
    clock.heard(0.8, first=True)  # a start-up
    clock.heard(0.05, first=False)
    assert clock.bound(sending=True)[0] == 1.0  # type: ignore[index]  # the floor
    clock.heard(0.3, first=False)
    bound = clock.bound(sending=True)
    assert bound is not None and bound[0] == pytest.approx(3.0)
    assert "the longest silence between two messages seen, 0.3 s" in bound[1]
    assert clock.bound(sending=False)[0] == pytest.approx(8.0)  # type: ignore[index]
    no_heartbeat = SilenceClock(
        "auto", floor=1.0, factor=10.0, startup=5.0, poll_interval=0.05, heartbeat=False
    )
    assert not no_heartbeat.enabled  # ("auto" needs a receiver's heartbeat)


SIMULATIONS, STEPS = 4, 12


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "launcher",
    [
        # (the start-up bounded apart, at 60 s: a solver's imports and connect took over
        # 2 s at load 16, and every attempt was killed before its first message; the
        # pause comes mid-stream, where the 2 s and the derived bounds apply)
        {"simulation_timeout": 2.0, "startup_timeout": 60.0},
        {"silence_floor": 1.0, "startup_timeout": 60.0},  # "auto"
    ],
    ids=["explicit-timeout", "derived-timeout"],
)
def test_a_trainer_stopped_then_continued_restarts_nothing(
    tmp_path: Path, launcher: dict[str, float]
) -> None:
    """The trainer is stopped for 8 s (4x the simulations' silence timeout and the
    solvers' `disconnected_timeout`) while two solvers stream 2 MiB steps, then wait in
    `close` with what they queued: no restart, every (simulation, step) trained on
    once, exit 0. (With the former bound, a 2 s `close_timeout`, this restarts them.)"""
    pause = 8.0
    options = {
        "simulations": SIMULATIONS,
        "steps": STEPS,
        "big": 1 << 19,  # 2 MiB a step
        "sample_sleep": 0.1,
        "delay": 0.2,
        "launcher": {"poll_interval": 0.05, "kill_grace": 1.0, **launcher},
        "client": {"disconnected_timeout": 2.0},
    }
    trained = tmp_path / "trained"
    proc = subprocess.Popen(
        [sys.executable, str(DRIVER), str(tmp_path), json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:

        def streaming() -> bool:
            assert proc.poll() is None, proc.communicate()[0][-3000:]
            return trained.exists() and len(trained.read_text().splitlines()) >= 3

        wait_until(streaming, 150, "the study never started training")
        stop(proc.pid)
        deadline = time.monotonic() + pause  # the pause itself
        while time.monotonic() < deadline:
            assert state(proc.pid) == "T"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGCONT)
        out, _ = proc.communicate(timeout=150)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGCONT)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == 0, out[-3000:]
    summary = json.loads(out.splitlines()[-1])
    assert (summary["finished"], summary["restarts"], summary["failed"]) == (SIMULATIONS, 0, 0)
    attempts = sorted(p.name for p in (tmp_path / "marks").iterdir())
    assert attempts == [f"{s}-0" for s in range(SIMULATIONS)], out[-3000:]
    seen = collections.Counter(
        tuple(map(int, line.split(":"))) for line in trained.read_text().split()
    )
    assert seen == collections.Counter((s, t) for s in range(SIMULATIONS) for t in range(STEPS))
    assert "silent for" not in out and "not delivered" not in out
