"""The start-up watch (`melissa_trainer.trainer.launcher_watch`): a rank whose launcher
dies before `train()` exits at once, saying so, whatever its main thread is blocked in;
`train()`'s preemption handler takes the watch over (one owner). The whole path under
``accelerate launch`` killed -9 is test_launcher_gone_at_start.py.

This file is also a child's script (run as ``__main__``, under ``sh``, which stands for
the launcher): it imports the trainer (which arms the watch), says ``connecting PID``,
then connects to a TCP store nobody serves (torch retries in C++, as a rank does whose
launcher, which hosts the store, is gone), or says whether a watch is armed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from melissa_trainer.trainer import launcher_watch
from melissa_trainer.trainer.launcher_watch import EXIT_CODE, StartupWatch
from melissa_trainer.trainer.preemption import PreemptionHandler

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


class Exits:
    """Records the exit a watch asks for (instead of `os._exit`)."""

    def __init__(self) -> None:
        self.codes: list[int] = []
        self.done = threading.Event()

    def __call__(self, code: int) -> None:
        self.codes.append(code)
        self.done.set()


@pytest.fixture
def pipe() -> tuple[int, int]:
    """A pipe the watch writes its line to: (read end, write end), both closed after."""
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


def not_my_parent() -> int:
    """A pid that is not this process's parent (its own): a launcher already gone."""
    return os.getpid()


def test_a_watch_whose_launcher_lives_is_handed_over_without_exiting(pipe: tuple[int, int]) -> None:
    exits = Exits()
    watch = StartupWatch(os.getppid(), poll=0.01, exit=exits, fd=pipe[1]).start()
    assert watch.watching
    assert watch.hand_over() == os.getppid()
    assert not watch.watching and not watch._thread.is_alive() and exits.codes == []
    assert watch.hand_over() is None  # one hand-over


def test_the_watch_exits_once_its_launcher_is_gone_and_says_so(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RANK", "3")
    exits = Exits()
    gone = not_my_parent()
    watch = StartupWatch(gone, poll=0.01, exit=exits, fd=pipe[1]).start()
    assert exits.done.wait(30), "the launcher's death went unnoticed"
    watch._thread.join(30)
    assert exits.codes == [EXIT_CODE] == [143]
    line = os.read(pipe[0], 4096).decode()
    kind = f"{watch.cause.kind}, " if watch.cause.kind else ""
    assert line == (
        f"the launcher ({kind}pid {gone}) is gone before training started: rank 3 exits; "
        "nothing to checkpoint\n"
    )
    assert watch.hand_over() is None and exits.codes == [143]  # one owner: no second exit


def test_a_launcher_gone_at_the_hand_over_exits_there(
    pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`train()` has trained nothing yet: the hand-over exits, as the watch would have."""
    monkeypatch.delenv("RANK", raising=False)
    exits = Exits()
    watch = StartupWatch(not_my_parent(), poll=3600, exit=exits, fd=pipe[1]).start()
    assert watch.hand_over() is None
    assert exits.codes == [143]
    assert (
        "before training started: rank 0 exits; nothing to checkpoint\n"
        in os.read(pipe[0], 4096).decode()
    )


def test_train_s_handler_takes_the_watch_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """`PreemptionHandler` (``parent="auto"``) ends the start-up watch and watches its
    launcher, with the cause it named at the start."""
    watch = StartupWatch(os.getppid(), poll=0.01, exit=Exits()).start()
    monkeypatch.setattr(launcher_watch, "_watch", watch)
    assert launcher_watch.armed() is watch
    handler = PreemptionHandler().install()
    try:
        assert not watch.watching and launcher_watch.armed() is None
        assert handler._watching is not None and handler._watching.is_alive()
    finally:
        handler.restore()
    assert launcher_watch.hand_over() is None  # (a second train(): nothing to take over)


def test_a_forked_child_neither_watches_nor_arms(monkeypatch: pytest.MonkeyPatch) -> None:
    watch = StartupWatch(os.getppid(), exit=Exits())
    watch._owner = os.getpid() + 1  # (as a child forked from the process that armed sees it)
    monkeypatch.setattr(launcher_watch, "_watch", watch)
    assert launcher_watch.arm() is None and launcher_watch.armed() is None
    assert launcher_watch.hand_over() is None and watch.hand_over() is None


@pytest.fixture
def elastic(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A torch elastic worker's environment, its store on a port nobody serves, its
    parent init."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "x")
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(_refused_port()))
    monkeypatch.setattr(os, "getppid", lambda: 1)
    return monkeypatch


def test_a_worker_adopted_by_init_whose_store_refuses_is_orphaned(
    elastic: pytest.MonkeyPatch,
) -> None:
    assert launcher_watch.orphaned()


def test_a_worker_whose_store_answers_is_not_orphaned(elastic: pytest.MonkeyPatch) -> None:
    """(a launcher that is pid 1 itself, a container's entrypoint, answers)"""
    with socket.socket() as store:
        store.bind(("127.0.0.1", 0))
        store.listen()
        elastic.setenv("MASTER_PORT", str(store.getsockname()[1]))
        assert not launcher_watch.orphaned()


@pytest.mark.parametrize(
    "change",
    ["TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE", "MASTER_PORT", "parent"],
)
def test_orphaned_says_no_when_it_cannot_tell(elastic: pytest.MonkeyPatch, change: str) -> None:
    """No torch elastic, no agent store, no store's address: nothing to tell by; a
    parent other than init: the launcher, or a subreaper (then nothing is watched)."""
    if change == "parent":
        elastic.setattr(os, "getppid", lambda: 4242)
    else:
        elastic.delenv(change)
    assert not launcher_watch.orphaned()


def _refused_port() -> int:
    """A port that refuses connections until the test ends (held: one bound and closed
    could be any other test's listener by the time the store is asked)."""
    from held_ports import held_port  # (here: this file is also the child's script)

    return held_port()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHELASTIC_RUN_ID", "RANK")}
    return {**env, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", **extra}


def _gone(pid: int) -> bool:
    """No such process, or a zombie or dead one (exited; init has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.e2e
def test_a_rank_in_a_c_store_connect_exits_when_its_launcher_dies() -> None:
    """The child (torch elastic's environment, rank 1) is in ``TCPStore``'s constructor,
    retrying a store nobody serves (for 300 s), when its launcher (``sh``) is killed -9:
    it exits within seconds with 143, its line on stderr."""
    from waiting import wait_until  # (here: this file is also the child's script)

    shell = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" "{__file__}" connect {_refused_port()} & wait'],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(TORCHELASTIC_RUN_ID="test", RANK="1"),
        start_new_session=True,
    )
    child = 0
    try:
        assert shell.stdout is not None and shell.stderr is not None
        said = shell.stdout.readline().split()
        assert said[:1] == ["connecting"], (said, shell.stderr.read())
        child = int(said[1])
        os.kill(shell.pid, signal.SIGKILL)  # the launcher alone
        shell.wait(30)
        # to EOF: the child, which holds the pipes, is exiting (before: 300 s of retries)
        out, err = shell.communicate(timeout=30)
        # EOF comes when its files close, a moment before it is a zombie (a loaded
        # machine stretches that moment): wait for its end before the kill below
        wait_until(lambda: _gone(child), f"the end of the child {child}", timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(shell.pid, signal.SIGKILL)
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        shell.wait(30)
    assert (
        f"the launcher (pid {shell.pid}) is gone before training started: rank 1 exits; "
        "nothing to checkpoint" in err
    ), err[-3000:]


@pytest.mark.e2e
@pytest.mark.timeout(180)  # (two children of 60 s each at most: more than the module's 90)
def test_a_plain_process_arms_no_watch() -> None:
    """Without torch elastic, under a parent that is not ``accelerate launch`` (here
    pytest): the trainer's import arms nothing; under torch elastic it does."""
    plain = subprocess.run(
        [sys.executable, __file__, "armed"], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert plain.stdout.split() == ["None"], plain
    elastic = subprocess.run(
        [sys.executable, __file__, "armed"],
        capture_output=True,
        text=True,
        env=_env(TORCHELASTIC_RUN_ID="x"),
        timeout=60,
    )
    assert elastic.stdout.split() == [str(os.getpid())], elastic


def child(mode: str, port: str = "") -> None:
    """The child's side (module docstring)."""
    from datetime import timedelta

    import torch.distributed as dist

    from melissa_trainer.trainer import launcher_watch as armed_here  # (armed on import)

    if mode == "armed":
        watch = armed_here.armed()
        print(None if watch is None else watch.parent)
        return
    os.write(1, f"connecting {os.getpid()}\n".encode())
    dist.TCPStore("127.0.0.1", int(port), 2, False, timeout=timedelta(seconds=300))
    raise AssertionError("connected to a store nobody serves")


if __name__ == "__main__":
    child(*sys.argv[1:])
