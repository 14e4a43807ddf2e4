"""A rank whose launcher died stops as if preempted (`melissa_trainer.trainer.preemption`): the
handler in a real child process whose parent, standing for the launcher, is killed -9.
The whole path through `accelerate launch` and the heat example is in
`test_resume_launcher_killed.py` (the launcher killed -9, then a resume).

Each child runs this file as a script (`child`): it installs a `PreemptionHandler`,
says ``ready``, and reports what the handler did on its stdout (a pipe the test reads:
the intermediate shell that stands for the launcher does not hold it open).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from melissa_trainer.trainer.launcher_watch import launcher_parent
from melissa_trainer.trainer.preemption import PreemptionHandler

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


def start(mode: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    """`sh` (the launcher) running this file as a child in `mode`, in a session of its
    own; returns the shell and the child's pid (read from the child's ``ready`` line)."""
    shell = subprocess.Popen(
        ["sh", "-c", f'"{sys.executable}" "{__file__}" {mode} & wait'],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
        start_new_session=True,
    )
    assert shell.stdout is not None
    ready = shell.stdout.readline().split()
    assert ready[:1] == ["ready"], ready
    return shell, int(ready[1])


def finish(shell: subprocess.Popen[str], child: int) -> list[str]:
    """Kill -9 the shell (the launcher), then read the child's report to its end."""
    os.kill(shell.pid, signal.SIGKILL)
    shell.wait()
    assert shell.stdout is not None
    try:
        return shell.stdout.read().split("\n")  # EOF: the child has exited
    finally:
        with contextlib.suppress(ProcessLookupError):  # (exited, as it should)
            os.kill(child, signal.SIGKILL)


@pytest.mark.e2e
def test_a_rank_whose_launcher_dies_is_asked_to_stop_as_by_sigterm() -> None:
    """Under torch elastic (TORCHELASTIC_RUN_ID): the launcher killed -9, the handler
    requests a stop, as a SIGTERM would (signum 15), naming the launcher; the child
    then ends as training does (`restore`) and exits 0."""
    shell, child = start("stop", {"TORCHELASTIC_RUN_ID": "test"})
    lines = finish(shell, child)
    assert f"requested 15 the launcher (pid {shell.pid}) is gone" in lines, lines
    assert "exit 0" in lines, lines


@pytest.mark.e2e
def test_a_rank_that_does_not_stop_after_its_launcher_died_exits_without_a_checkpoint() -> None:
    """A rank that never ends training (a hung collective) exits `orphan_grace` s after
    its launcher died, as a second signal makes it: `on_force` (the simulations killed),
    then the exit with 143."""
    shell, child = start("hang", {"TORCHELASTIC_RUN_ID": "test"})
    lines = finish(shell, child)
    assert "on_force" in lines and "forced 143" in lines, lines


@pytest.mark.e2e
def test_a_plain_process_has_no_launcher_watched() -> None:
    """Without torch elastic, and a parent that is not `accelerate launch` (a shell):
    nothing is watched (a shell may go, nohup, without the training going with it)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHELASTIC_RUN_ID"}
    out = subprocess.run(
        [sys.executable, __file__, "parent"], capture_output=True, text=True, env=env, timeout=30
    )
    assert out.stdout.split() == ["None"], out
    out = subprocess.run(
        [sys.executable, __file__, "parent"],
        capture_output=True,
        text=True,
        env={**env, "TORCHELASTIC_RUN_ID": "x"},
        timeout=30,
    )
    assert out.stdout.split() == [str(os.getpid())], out


def test_a_parent_that_is_not_this_process_parent_is_refused() -> None:
    with pytest.raises(ValueError, match="must be this process's parent"):
        PreemptionHandler(parent=os.getpid()).install()


def child(mode: str) -> None:
    """The child's side: `mode` "stop" restores the handler once a stop is requested,
    as `train()` does after its checkpoint; "hang" never does; "parent" prints
    `launcher_parent()`."""
    if mode == "parent":
        print(launcher_parent())
        return
    forced: list[int] = []

    def exit(code: int) -> None:
        forced.append(code)

    handler = PreemptionHandler(
        on_force=lambda: print("on_force", flush=True),
        exit=exit,
        parent_poll=0.05,
        orphan_grace=0.5 if mode == "hang" else 600.0,
    ).install()
    print("ready", os.getpid(), flush=True)
    deadline = time.monotonic() + 30
    while not (handler.requested() if mode == "stop" else forced):
        assert time.monotonic() < deadline, "the launcher's death went unnoticed"
        time.sleep(0.01)
    if mode == "stop":
        print("requested", handler.signum, handler.reason, flush=True)
        handler.restore()
    else:
        print("forced", forced[0], flush=True)
        handler.restore()
    print("exit 0", flush=True)


if __name__ == "__main__":
    child(sys.argv[1])
