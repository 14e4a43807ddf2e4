"""A peer rank killed in no hook method is named by the survivor: its pid, and whether
it is dead or alive on this host (`trainer.hook_mark.unmarked_words`), from the mark
each rank makes as it starts (its pid, start time and host, written once).

Failed before: a peer's mark was read only while it was in a hook method, so a rank
SIGKILLed outside any hook was "another rank is gone" (with 2 ranks "rank 1, the only
other"), with no pid; of 3 ranks, no word said which peer had died. The cases: two real
gloo ranks under ``accelerate launch`` (tests/scripts/rank_killed_no_hook.py: rank 1
SIGKILLs itself in its loss function), real peer processes for 3 ranks (one alive,
one killed), and a peer's record made on another host, which is not checked from here.
The oracle: the words as written here, with the pids the processes were given."""

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
from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark, unmarked_words

pytestmark = [
    pytest.mark.e2e,  # (processes of their own)
    pytest.mark.skipif(sys.platform != "linux", reason="/proc, accelerate launch with gloo"),
]

RUN = "run-u"
ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "rank_killed_no_hook.py"
#: a rank that made its mark (as `starting.mark_hooks` does) and is in no hook method,
#: until its stdin closes
RANK = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from melissa_trainer.trainer.hook_mark import MARK_PREFIX, HookMark

    mark = HookMark(Path(sys.argv[1]) / f"{MARK_PREFIX}{sys.argv[2]}", sys.argv[3])
    print("marked", flush=True)
    sys.stdin.read()
    """
)
BY_PIDS = "by the pids the ranks recorded as they started: "


class InHook(Hook):
    def on_step_end(self, trainer: object, state: object, control: object) -> None:
        """(a rank in it: its mark says so)"""


@pytest.mark.timeout(300)
def test_a_rank_killed_outside_any_hook_is_named_by_its_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "trainer"))
    from two_ranks import launch_two_ranks

    out = tmp_path / "out"
    done = launch_two_ranks(SCRIPT, str(out))
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert not (out / "exit-1.txt").exists(), said[-3000:]  # (killed: no Python ran)
    pid = int((out / "pid-1.txt").read_text())
    ended = (out / "exit-0.txt").read_text()
    assert ended.startswith("RankGone: rank 0 stopped at step "), ended
    assert f"{BY_PIDS}rank 1 (pid {pid}) is dead on this host; " in ended, ended
    assert "hook method" not in ended, ended  # (no rank was in one)


@pytest.fixture
def ranks(tmp_path: Path) -> Iterator[dict[int, subprocess.Popen[str]]]:
    """Ranks 1 and 2, each with its mark, in no hook method; killed after."""
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


@pytest.mark.timeout(120)
def test_of_three_ranks_the_peer_killed_outside_any_hook_is_named(
    tmp_path: Path, ranks: dict[int, subprocess.Popen[str]]
) -> None:
    one, two = ranks[1].pid, ranks[2].pid
    words = unmarked_words(tmp_path, RUN, [1, 2])
    assert (
        words
        == f"rank 1 (pid {one}) is alive on this host, rank 2 (pid {two}) is alive on this host"
    )
    ranks[2].send_signal(signal.SIGKILL)
    os.waitid(os.P_PID, two, os.WEXITED | os.WNOWAIT)  # ended, not reaped yet (a zombie)
    dead, alive = (
        f"rank 2 (pid {two}) is dead on this host",
        f"rank 1 (pid {one}) is alive on this host",
    )
    assert unmarked_words(tmp_path, RUN, [1, 2]) == f"{dead}, {alive}"  # (the dead first)
    ranks[2].wait()  # reaped: its pid is no process's
    assert unmarked_words(tmp_path, RUN, [1, 2]) == f"{dead}, {alive}"
    # a mark of another run, and a rank with none, are not read
    assert unmarked_words(tmp_path, "another run", [1, 2]) == ""
    assert unmarked_words(tmp_path, RUN, [3]) == ""


@pytest.mark.timeout(60)
def test_a_peer_recorded_on_another_host_is_not_checked_from_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the records of ranks on node-b: their pid (this process's, alive here) is node-b's
    with monkeypatch.context() as there:
        there.setattr(socket, "gethostname", lambda: "node-b")
        marks = [HookMark(tmp_path / f"{MARK_PREFIX}{rank}", RUN) for rank in range(1, 12)]
    try:
        one = unmarked_words(tmp_path, RUN, [1])
        many = unmarked_words(tmp_path, RUN, list(range(1, 12)))
        # a rank in a hook method is `in_hook_words`' to name, not these words'
        marks[0].enter(InHook().on_step_end, (None, TrainerState(global_step=5)))
        in_hook = unmarked_words(tmp_path, RUN, [1])
    finally:
        for mark in marks:
            mark.close()
    unchecked = "on node-b: not this host, not checked from here"
    assert one == f"rank 1 (pid {os.getpid()} {unchecked})"
    # of many, the first 8 named, then their count (one line, not hundreds of names)
    named = ", ".join(f"rank {rank} (pid {os.getpid()} {unchecked})" for rank in range(1, 9))
    assert many == f"{named}, 3 more alive or not checked"
    assert in_hook == ""
