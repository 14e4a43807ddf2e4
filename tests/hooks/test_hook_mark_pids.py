"""`trainer.hook_mark`: of 3 ranks, the survivor of a broken collective names which
peer died in its hook method, and which one is still in its own, by each mark's pid.

Failed before: the marks held no pid, so with 3 ranks (which one is gone not known
from the broken collective) every marked peer "was in" its hook method: the survivor
could not tell the dead from the living. The peers are real processes (ranks 1 and 2,
each keeping its `HookMark` in ``Gathers.on_step_end`` at step 5, as `HookList.fire`
writes it); rank 2 is killed with SIGKILL and seen both as a zombie (not reaped yet:
a launcher's agent may be slow to) and reaped. The oracle: the words as written here,
with the pids the processes were given."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks import Hook
from melissa_trainer.hooks.raised import mark
from melissa_trainer.trainer.hook_mark import in_hook_words, read_mark

pytestmark = [
    pytest.mark.e2e,  # (processes of their own)
    pytest.mark.timeout(120),
    pytest.mark.skipif(sys.platform != "linux", reason="/proc for a zombie's state"),
]

RUN = "run-p"
ROOT = Path(__file__).resolve().parents[2]
#: a rank in ``Gathers.on_step_end`` at step 5 until its stdin closes
RANK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from melissa_trainer.core.state import TrainerState
    from melissa_trainer.hooks import Hook
    from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark

    class Gathers(Hook):
        def on_step_end(self, trainer, state, control):
            pass

    mark = HookMark(Path(sys.argv[1]) / f"{MARK_PREFIX}{sys.argv[2]}", sys.argv[3])
    mark.enter(Gathers().on_step_end, (None, TrainerState(global_step=5)))
    print("marked", flush=True)
    sys.stdin.read()
    """
)


class Gathers(Hook):
    def on_step_end(self, trainer: object, state: object, control: object) -> None:
        """(this rank's own collective broke here: `broke_in_hook`)"""


def broke_in_hook(step: int) -> RuntimeError:
    error = RuntimeError("Connection closed by peer")
    mark(error, Gathers().on_step_end, (None, TrainerState(global_step=step)))
    return error


@pytest.fixture
def ranks(tmp_path: Path) -> Iterator[dict[int, subprocess.Popen[str]]]:
    """Ranks 1 and 2, each in its hook method (marked) when given; killed after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {
        rank: subprocess.Popen(
            [sys.executable, "-c", RANK, str(tmp_path), str(rank), RUN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )  # fmt: skip
        for rank in (1, 2)
    }
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdout.readline() == "marked\n"
        yield procs
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()


def test_of_three_ranks_the_dead_peer_is_named_by_its_pid(
    tmp_path: Path, ranks: dict[int, subprocess.Popen[str]]
) -> None:
    one, two = ranks[1].pid, ranks[2].pid
    marked = read_mark(tmp_path / "in-hook-2", RUN)
    assert marked is not None and marked[:4] == ("Gathers.on_step_end", 5, two, os.uname().nodename)
    # both alive: each "is in" its hook method, none said dead
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    assert f"rank 1 is in the hook method Gathers.on_step_end (step 5, pid {one})" in words
    assert f"rank 2 is in the hook method Gathers.on_step_end (step 5, pid {two})" in words
    assert "rank 1 died" not in words and "rank 2 died" not in words, words
    ranks[2].send_signal(signal.SIGKILL)
    # ended, not reaped yet (a zombie: its pid still answers signal 0)
    os.waitid(os.P_PID, two, os.WEXITED | os.WNOWAIT)
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    assert f"rank 2 died in the hook method Gathers.on_step_end (step 5, pid {two})" in words
    assert f"rank 1 is in the hook method Gathers.on_step_end (step 5, pid {one})" in words
    ranks[2].wait()  # reaped: its pid is no process's
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    assert f"rank 2 died in the hook method Gathers.on_step_end (step 5, pid {two})" in words
    assert "rank 1 died" not in words, words


def test_a_peer_on_another_host_is_said_unchecked(
    tmp_path: Path, ranks: dict[int, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ranks[2].send_signal(signal.SIGKILL)
    ranks[2].wait()
    host = os.uname().nodename
    # read from another node: its pids are not this node's to check
    monkeypatch.setattr(socket, "gethostname", lambda: "another-node")
    words = in_hook_words(tmp_path, RUN, [1, 2], broke_in_hook(5), 5)
    for rank, proc in ranks.items():
        assert (
            f"rank {rank} was in the hook method Gathers.on_step_end (step 5, pid "
            f"{proc.pid} on {host}: not this host, not checked from here)"
        ) in words, words
    assert "rank 1 died" not in words and "rank 2 died" not in words, words
