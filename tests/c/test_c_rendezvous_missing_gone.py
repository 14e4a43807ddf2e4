"""What a client starting on a rendezvous says of it, C as Python, word for word.

- One rank's file missing, another's of a trainer killed on this machine: Python said
  both ("rank_1.json: its trainer (pid N, on this machine) is gone ...; world_size 2,
  ranks [0] missing"), the C client the second only (it checked the trainers' pids only
  of a complete directory). Failed before (C).
- Each file's words in rank order, by both: before, Python said them in the directory's
  order (readdir's), C the killed trainers' in rank order, the others in the
  directory's. Failed before (Python, C).
- A rank dialled and heard (its trainer on another machine) while another rank refused
  was not dialled again while its file was unchanged (`mt_heard`, trainer_listens.py
  `heard`): killed meanwhile, and the refused rank then live, its dead endpoint was
  taken, and the solver's start succeeded. Now the ranks heard before are dialled again
  before the files are taken. Failed before (C; the Python side:
  tests/stream/test_trainer_listens_heard.py).

The stand-in trainers are real processes publishing with the receiver's own writer,
SIGKILLed (tests/killed_trainer.py); the oracle for the words is the Python reader's
verdict on the same directory (`fetch_rendezvous`), and the ranks' own pids and
endpoints."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, c_client  # noqa: F401
from killed_trainer import (
    kill_9,
    publish_elsewhere,
    start_stand_in,
    stop,
    with_one_rank_refused,
)
from test_c_killed_trainer import script, start

from melissa_trainer.stream.endpoints import fetch_rendezvous

pytestmark = pytest.mark.e2e  # every test here starts a process

GONE = "its trainer (pid {pid}, on this machine) is gone without marking it stopped"


def python_words(rv: Path) -> str:
    """The Python client's start's words on `rv` (1 s of rendezvous timeout)."""
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=1.0, alive_only=True)
    return str(caught.value)


@pytest.mark.timeout(180)
def test_a_missing_rank_and_a_gone_one_are_both_said_by_c_and_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    alive = start_stand_in(rv, 3)
    dead = start_stand_in(tmp_path / "killed", 3)
    kill_9(dead)
    (rv / "rank_1.json").write_text((tmp_path / "killed" / "rank_1.json").read_text())
    (rv / "rank_2.json").unlink()
    try:
        python = python_words(rv)
        code, message = start(script_exe, rv, tmp_path, 1.0)
    finally:
        stop(alive)
    assert code != 0, message
    gone = f"rank_1.json: {GONE.format(pid=dead.pid)}"
    for said in (python, message):
        assert gone in said and "world_size 3, ranks [2] missing" in said, said
        assert said.index(gone) < said.index("ranks [2] missing"), said  # (Python's order)
    assert message == python, (message, python)  # (word for word; before: C said one)


@pytest.mark.timeout(180)
def test_each_file_s_words_come_in_rank_order_in_c_and_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    ranks = 8
    dead = start_stand_in(rv, ranks)
    kill_9(dead)
    for rank in (1, 4):  # (other words than a killed trainer's: said as read before)
        path = rv / f"rank_{rank}.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "stopped": True}))
    python = python_words(rv)
    code, message = start(script_exe, rv, tmp_path, 1.0)
    assert code != 0, message
    for said in (python, message):
        at = [said.index(f"rank_{rank}.json") for rank in range(ranks)]
        assert at == sorted(at), said  # (before: the directory's order)
        assert said.count(GONE.format(pid=dead.pid)) == ranks - 2, said
        assert said.count(": its trainer stopped (") == 2, said
    assert message == python, (message, python)


@pytest.mark.timeout(180)
def test_a_rank_heard_then_killed_is_dialled_again_before_the_files_are_taken(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rendezvous"
    live = with_one_rank_refused(rv, tmp_path / "killed")  # (rank 0 live, rank 1 refused)
    closed = False
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    argv = [str(script_exe), str(script(rv, tmp_path, 8.0))]
    context = zmq.Context()
    rank_1 = context.socket(zmq.PULL)
    rank_1.linger = 0
    solver = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**clean, **SANITIZER_ENV},
    )  # fmt: skip
    try:
        assert solver.stderr is not None
        seen = []
        for line in solver.stderr:  # (its notice, 3 s in: rank 0 heard, rank 1 refused)
            seen.append(line)
            if "nothing accepts connections" in line:
                break
        else:
            raise AssertionError(f"no notice of the refused rank: {''.join(seen)}")
        assert live.accepted() == 1, seen
        live.close()  # (rank 0's trainer gone, its file unchanged: its port refuses)
        closed = True
        rank_1.bind("tcp://127.0.0.1:*")  # (rank 1 live now, in a new version of its file)
        publish_elsewhere(rv, 1, rank_1.getsockopt_string(zmq.LAST_ENDPOINT), tmp_path / "r1")
        out, err = solver.communicate(timeout=60)
    finally:
        if solver.poll() is None:
            solver.kill()
            solver.communicate()
        if not closed:
            live.close()
        rank_1.close(linger=0)
        context.term()
    (line,) = [s for s in out.splitlines() if s.startswith("4 ")]  # (the start)
    assert line.split(" ", 2)[1] != "0", (line, err)  # (before: 0, rank 0's dead endpoint)
    assert f"rank_0.json: nothing accepts connections at {live.endpoint} " in line, line
    assert "rank_1.json" not in line, line
