"""A solver started by hand against the rendezvous of a trainer killed with ``kill -9``
(its ``rank_N.json`` files stay, not marked stopped) is refused at its start, naming the
dead trainer's pid, the rendezvous and the fix (`trainer_process`), as for a trainer
that ended (it waits `rendezvous_timeout` for a trainer to publish there again). Before,
it took the files: every send went into the void and its close failed 180 s later (a
user trial, htrial3). A trainer alive is taken, and so is a file whose process cannot be
checked (another machine's pid namespace) whose endpoint accepts a connection. A trainer
killed on another machine (or in another pid namespace: `as_elsewhere`) is found by
its endpoint, which refuses the connection (`trainer_listens`): refused at the start as
well, naming the endpoint; a live one there, busy or stopped (SIGSTOP: its kernel
accepts the connection), is taken.

The stand-in trainer is a real process publishing with the receiver's own writer,
SIGKILLed (tests/killed_trainer.py); the client is a real process, waited on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import zmq
from killed_trainer import as_elsewhere, kill_9, start_stand_in, stop, taken_after_restart

from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous

pytestmark = pytest.mark.timeout(120)

SOLVER = """
import sys
import numpy as np
from melissa_trainer.client import Client, ClientTuning
client = Client({"u": ((2,), np.float64)}, simulation_id=1,
                tuning=ClientTuning(rendezvous_timeout=float(sys.argv[1])))
print("started", client.endpoints, flush=True)  # (the files taken: not refused)
client.close(bye=False)
"""


def by_hand(rendezvous: Path) -> dict[str, str]:
    """The environment of a solver started by hand: `MELISSA_TRAINER_RENDEZVOUS` only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    return {**env, "MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)}


def solver(rendezvous: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """A Python solver started by hand, run to its end."""
    env = by_hand(rendezvous)
    return subprocess.run(
        [sys.executable, "-c", SOLVER, str(timeout)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def gone_words(pid: int) -> str:
    return f"its trainer (pid {pid}, on this machine) is gone without marking it stopped"


@pytest.mark.e2e
def test_a_solver_against_a_killed_trainer_is_refused_at_start(tmp_path: Path) -> None:
    rv = tmp_path / "output" / "rendezvous"
    trainer = start_stand_in(rv)
    kill_9(trainer)
    assert {p.name for p in rv.iterdir()} >= {"rank_0.json", "rank_1.json"}  # (left behind)
    done = solver(rv, 1.0)
    assert done.returncode != 0, done.stdout
    assert "started" not in done.stdout
    for rank in (0, 1):
        assert f"rank_{rank}.json: {gone_words(trainer.pid)}" in done.stderr, done.stderr
    assert f"rendezvous directory '{rv}' incomplete after 1.0 s" in done.stderr, done.stderr
    assert "start the trainer first" in done.stderr
    assert "point MELISSA_TRAINER_RENDEZVOUS at the running trainer's" in done.stderr


@pytest.mark.e2e
def test_a_solver_against_a_trainer_alive_is_not_refused(tmp_path: Path) -> None:
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    try:
        done = solver(rv, 1.0)
    finally:
        stop(trainer)
    assert done.stdout.startswith("started ['tcp://127.0.0.1:"), (done.stdout, done.stderr)
    assert "is gone" not in done.stderr, done.stderr


@pytest.mark.e2e
def test_a_solver_waiting_takes_a_trainer_started_again(tmp_path: Path) -> None:
    """A solver started while the killed trainer is being resumed is not refused."""
    rv = tmp_path / "rendezvous"
    kill_9(start_stand_in(rv))
    argv = [sys.executable, "-c", SOLVER, "60"]
    out = taken_after_restart(argv, by_hand(rv), rv)
    assert out.startswith("started ['tcp://127.0.0.1:"), out


def test_a_reused_pid_is_not_taken_for_the_trainer(tmp_path: Path) -> None:
    """This process's pid, alive, with another start time: another process's now."""
    write_rendezvous(tmp_path, 0, 1, "tcp://127.0.0.1:9")
    path = tmp_path / "rank_0.json"
    entry = json.loads(path.read_text())
    assert entry["pid"] == os.getpid()
    assert fetch_rendezvous(tmp_path, timeout=0.0, alive_only=True)[0]["pid"] == os.getpid()
    path.write_text(json.dumps({**entry, "pid_start": entry["pid_start"] + 1}))
    with pytest.raises(TimeoutError, match=rf"rank_0\.json: its trainer \(pid {os.getpid()}"):
        fetch_rendezvous(tmp_path, timeout=0.0, alive_only=True)
    assert fetch_rendezvous(tmp_path, timeout=0.0)  # (only a client's start checks)
    other = {**entry, "pid_start": 1, "pid_scope": "another-boot pid:[1]"}
    path.write_text(json.dumps(other))  # (another machine: not checkable; nothing on port 9)
    with pytest.raises(TimeoutError, match=r"nothing accepts connections at tcp://127\.0\.0\.1:9 "):
        fetch_rendezvous(tmp_path, timeout=0.0, alive_only=True)
    context = zmq.Context()
    listening = context.socket(zmq.PULL)
    try:
        listening.bind("tcp://127.0.0.1:*")
        there = listening.getsockopt_string(zmq.LAST_ENDPOINT)
        path.write_text(json.dumps({**other, "endpoint": there}))  # (listened on: taken)
        assert fetch_rendezvous(tmp_path, timeout=0.0, alive_only=True)[0]["endpoint"] == there
    finally:
        context.destroy(linger=0)


@pytest.mark.e2e
def test_a_solver_against_a_trainer_killed_elsewhere_is_refused_at_start(tmp_path: Path) -> None:
    """Its pid not checkable here: its endpoints refuse the connection (before: taken,
    the close failed 180 s later)."""
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    kill_9(trainer)
    endpoints = as_elsewhere(rv)
    done = solver(rv, 1.0)
    assert done.returncode != 0, done.stdout
    assert "started" not in done.stdout
    for rank, endpoint in endpoints.items():
        said = (
            f"rank_{rank}.json: nothing accepts connections at {endpoint} (refused, or its "
            f"host unreachable): its trainer (pid {trainer.pid} on {os.uname().nodename}) is "
            "gone without marking it stopped"
        )
        assert said in done.stderr, done.stderr
    assert f"rendezvous directory '{rv}' incomplete after 1.0 s" in done.stderr, done.stderr
    assert "start the trainer first" in done.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("paused", [False, True], ids=["running", "stopped"])
def test_a_trainer_alive_elsewhere_is_taken_even_stopped(tmp_path: Path, paused: bool) -> None:
    """A trainer whose pid is not checkable here, alive: taken; so is one stopped
    (SIGSTOP, as a trainer too busy to answer: its kernel still accepts the connection)."""
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    endpoints = as_elsewhere(rv)
    try:
        if paused:
            trainer.send_signal(signal.SIGSTOP)
        done = solver(rv, 1.0)
    finally:
        trainer.send_signal(signal.SIGCONT)
        stop(trainer)
    assert done.stdout.startswith(f"started {[endpoints[0], endpoints[1]]}"), (
        done.stdout,
        done.stderr,
    )
    assert "nothing accepts connections" not in done.stderr, done.stderr


@pytest.mark.e2e
def test_a_solver_waiting_on_a_trainer_killed_elsewhere_takes_it_started_again(
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    kill_9(start_stand_in(rv))
    as_elsewhere(rv)
    argv = [sys.executable, "-c", SOLVER, "60"]
    out = taken_after_restart(argv, by_hand(rv), rv)
    assert out.startswith("started ['tcp://127.0.0.1:"), out
