"""A C solver started against the rendezvous of a trainer killed with ``kill -9`` (its
``rank_N.json`` files stay, not marked stopped) fails its start (`mt_client_start`,
MT_ERENDEZVOUS) naming the dead trainer's pid, the rendezvous and the fix, in the Python
client's words (clients/c/src/trainer_alive.c, stream/trainer_process.py): before, every
send returned MT_OK and its close failed 180 s later (a user trial, htrial3). A trainer
alive is taken (the control). A trainer killed on another machine (its pid not checkable
here: `as_elsewhere`) is found by its endpoints refusing the connection
(clients/c/src/trainer_listens.c, stream/trainer_listens.py): refused too, in the same
words; one alive there, even stopped (SIGSTOP), is taken.

The stand-in trainer is a real process publishing with the receiver's own writer,
SIGKILLed (tests/killed_trainer.py); the oracle for the words is the Python reader's
verdict on the same directory (`fetch_rendezvous`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, c_client  # noqa: F401
from killed_trainer import (
    as_elsewhere,
    kill_9,
    rewrite_rank_0,
    start_stand_in,
    stop,
    taken_after_restart,
    with_one_rank_refused,
)

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = pytest.mark.e2e  # every test here starts a process


def script(rv: Path, tmp_path: Path, timeout: float) -> Path:
    """mt_script's script: start on rendezvous `rv` (rendezvous timeout `timeout`)."""
    path = tmp_path / "solver.txt"
    path.write_text(f"rendezvous {rv} {timeout}\nid 1\nfield u 1 1 4\nstart\nabort\n")
    return path


def start(exe: Path, rv: Path, tmp_path: Path, timeout: float) -> tuple[int, str]:
    """(status, message) of `mt_client_start` on rendezvous `rv` (rendezvous timeout
    `timeout`), the solver waited on to its end."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(exe), str(script(rv, tmp_path, timeout))],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **SANITIZER_ENV},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("4 ")]  # (the start)
    _, status, message = line.split(" ", 2)
    return int(status), message


@pytest.mark.timeout(180)
def test_a_c_solver_against_a_killed_trainer_is_refused_at_start(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "output" / "rendezvous"
    trainer = start_stand_in(rv)
    kill_9(trainer)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=1.0, alive_only=True)
    python = str(caught.value)
    code, message = start(script_exe, rv, tmp_path, 1.0)
    assert code != 0, message
    words = f"its trainer (pid {trainer.pid}, on this machine) is gone without marking it stopped"
    for rank in (0, 1):
        said = f"rank_{rank}.json: {words}"
        assert said in message and said in python, (message, python)
    fix = "start the trainer first (resumed: --resume_from_checkpoint latest), or point"
    assert fix in message and fix in python, message
    head = f"rendezvous directory '{rv}' incomplete after 1.0 s: "
    tail = " (is the trainer running, with this output directory?)"
    for said in (message, python):
        assert said.startswith(head) and said.endswith(tail), said
    assert message == python, (message, python)  # (word for word: each in rank order)


@pytest.mark.timeout(180)
def test_a_c_solver_against_a_trainer_alive_is_not_refused(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    try:
        code, message = start(script_exe, rv, tmp_path, 1.0)
    finally:
        stop(trainer)
    assert code == 0, message


@pytest.mark.timeout(180)
def test_a_c_solver_waiting_takes_a_trainer_started_again(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A solver started while the killed trainer is being resumed is not refused."""
    rv = tmp_path / "rendezvous"
    kill_9(start_stand_in(rv))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    argv = [str(script_exe), str(script(rv, tmp_path, 60.0))]
    out = taken_after_restart(argv, {**clean, **SANITIZER_ENV}, rv)
    (line,) = [s for s in out.splitlines() if s.startswith("4 ")]  # (the start)
    assert line.split(" ", 2)[1] == "0", out


@pytest.mark.timeout(180)
def test_a_c_solver_against_a_trainer_killed_elsewhere_is_refused_in_python_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    kill_9(trainer)
    endpoints = as_elsewhere(rv)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=1.0, alive_only=True)
    python = str(caught.value)
    code, message = start(script_exe, rv, tmp_path, 1.0)
    assert code != 0, message
    for rank, endpoint in endpoints.items():
        said = f"rank_{rank}.json: nothing accepts connections at {endpoint} (refused"
        assert said in message and said in python, (message, python)
    assert f"(pid {trainer.pid} on {os.uname().nodename})" in message, message
    assert message == python, (message, python)  # (word for word, in rank order both)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("paused", [False, True], ids=["running", "stopped"])
def test_a_c_solver_against_a_trainer_alive_elsewhere_is_not_refused(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    paused: bool,
) -> None:
    rv = tmp_path / "rendezvous"
    trainer = start_stand_in(rv)
    as_elsewhere(rv)
    try:
        if paused:
            trainer.send_signal(signal.SIGSTOP)
        code, message = start(script_exe, rv, tmp_path, 1.0)
    finally:
        trainer.send_signal(signal.SIGCONT)
        stop(trainer)
    assert code == 0, message


@pytest.mark.timeout(180)
def test_a_c_solver_dials_a_live_rank_once_per_version_of_its_file(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """While rank 1's file refuses (a trainer killed elsewhere), rank 0's endpoint is
    dialled once per version of its file (trainer_alive.c's mt_heard), not at every look
    of the wait (every 0.25 s): the Python client's rule (stream/trainer_listens.py).
    Failed before (hstop): dialled at each look. The oracle: the connections rank 0's
    socket accepted (`killed_trainer.LiveRank`), its file rewritten once the solver's
    notice (3 s in) is read."""
    rv = tmp_path / "rendezvous"
    live = with_one_rank_refused(rv, tmp_path / "killed")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    argv = [str(script_exe), str(script(rv, tmp_path, 6.0))]
    solver = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**clean, **SANITIZER_ENV},
    )  # fmt: skip
    try:
        assert solver.stderr is not None
        seen = []
        for line in solver.stderr:  # (until the notice: an event, not a sleep)
            seen.append(line)
            if "nothing accepts connections" in line:
                break
        else:
            raise AssertionError(f"no notice of the refused rank: {''.join(seen)}")
        assert live.accepted() == 1, seen  # (before: one per look)
        rewrite_rank_0(rv)
        out, err = solver.communicate(timeout=60)
        assert live.accepted() == 2, (out, err)
    finally:
        if solver.poll() is None:
            solver.kill()
            solver.communicate()
        live.close()
    (line,) = [s for s in out.splitlines() if s.startswith("4 ")]  # (the start)
    assert line.split(" ", 2)[1] != "0", line
    assert "rank_1.json: nothing accepts connections at " in line, line


@pytest.mark.timeout(180)
def test_one_rank_killed_here_is_said_in_the_same_words_by_c_and_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Rank 0's trainer alive, rank 1's killed on this machine: both clients say that
    rank 1's trainer is gone, and nothing else. Failed before (hstop): Python added
    "; world_size 2, ranks [1] missing" (its file is there), C did not."""
    rv = tmp_path / "rendezvous"
    alive = start_stand_in(rv)
    dead = start_stand_in(tmp_path / "killed")
    kill_9(dead)
    (rv / "rank_1.json").write_text((tmp_path / "killed" / "rank_1.json").read_text())
    try:
        with pytest.raises(TimeoutError) as caught:
            fetch_rendezvous(rv, timeout=1.0, alive_only=True)
        code, message = start(script_exe, rv, tmp_path, 1.0)
    finally:
        stop(alive)
    python = str(caught.value)
    assert code != 0, message
    assert f"rank_1.json: its trainer (pid {dead.pid}, on this machine) is gone" in python
    assert "missing" not in python, python
    assert message == python, (message, python)  # (word for word)
