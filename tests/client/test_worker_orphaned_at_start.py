"""A worker orphaned before it started serving says so at once, and ends.

A worker started through a wrapper (``sh -c``, a job script) whose launcher ended
while the worker was still queued or loading: its parent when it starts is that
wrapper (alive), or init or a subreaper already, so `worker_launcher.parent_gone`,
which compares the parent with the one it had at start, never sees the launcher gone.
Before, such a worker asked the launcher for a simulation and waited its request's
`timeout` (60 s by default) for an answer that never came, then ended on a
TimeoutError's traceback (exit 1). Now the launcher names its own process in the
worker's environment (``MELISSA_TRAINER_LAUNCHER_PROCESS``: pid, start time, boot id,
pid namespace; `worker_launcher.launcher_process`), and the worker finds it ended
before its first request: `LauncherGone` at once, no request sent; an example's solver
says it in one line and exits 75, as does a Python callable run as a worker
(`launcher.run_callable`, the library's own entry point).

Real processes: a stand-in launcher process names itself so, starts the worker's
wrapper (``sh -c``: it waits on a FIFO, then runs the worker, then prints the worker's
exit status) and exits; only once it was reaped is the wrapper let go on. The socket
the worker would ask is this test's, so that a request sent would be seen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import zmq

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="/proc names the launcher's process"),
    pytest.mark.e2e,
]

EXAMPLES = Path(__file__).parents[2] / "examples"

#: the library's loop, asking with a short timeout (before: a TimeoutError after it)
WORKER = """
from melissa_trainer.client.worker import serve_simulations

serve_simulations(lambda *_: None, timeout=5.0)
"""

#: the stand-in launcher: names itself to the worker as the launcher does, starts the
#: wrapper (argv[1]: the FIFO; argv[2:]: the worker's command), prints the wrapper's
#: pid, exits (the wrapper and the worker inherit its stderr)
LAUNCHER = """
import os, subprocess, sys
from melissa_trainer.client.worker_launcher import ENV_LAUNCHER_PROCESS, launcher_process

env = {**os.environ, ENV_LAUNCHER_PROCESS: launcher_process()}
wrapper = subprocess.Popen(
    ["sh", "-c", 'read go < "$0"; "$@"; echo "worker exit status $?" >&2', *sys.argv[1:]],
    env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
)
print(wrapper.pid, flush=True)
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("worker", ["library", "lorenz", "run_callable"])
def test_a_worker_whose_launcher_ended_before_it_started_says_so_at_once(
    tmp_path: Path, worker: str
) -> None:
    context = zmq.Context()
    socket = context.socket(zmq.REP)  # (what the worker would ask: never answered)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind("tcp://127.0.0.1:*")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_TRAINER_")}
    env["MELISSA_TRAINER_LAUNCHER"] = socket.getsockopt_string(zmq.LAST_ENDPOINT)
    env["MELISSA_TRAINER_WORKER"] = "worker-0"
    if worker == "library":
        command = [sys.executable, "-c", WORKER]
    elif worker == "run_callable":  # (a callable simulation run as a worker)
        import cloudpickle

        pickled = tmp_path / "fn.pkl"
        pickled.write_bytes(cloudpickle.dumps(lambda *_: None))
        command = [sys.executable, "-m", "melissa_trainer.launcher.run_callable", str(pickled)]
    else:
        command = [sys.executable, str(EXAMPLES / worker / "solver.py"), "--worker"]
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    launcher = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(fifo), *command],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, text=True,
    )  # fmt: skip
    assert launcher.stdout is not None and launcher.stderr is not None
    wrapper = int(launcher.stdout.readline())
    released = False
    try:
        assert launcher.wait(60) == 0  # (ended and reaped: the launcher is gone)
        with open(fifo, "w") as go:  # (the wrapper goes on: the worker starts now)
            go.write("go\n")
        released = True
        stderr = launcher.stderr.read()  # (until the wrapper and the worker closed it)
    finally:
        if not released:  # (a wrapper left waiting by a failure: ours, by its pid)
            os.kill(wrapper, 9)
        launcher.kill()
        launcher.wait(30)
    try:
        assert not socket.poll(0), "the worker asked a launcher that is gone"
    finally:
        socket.close(linger=0)
        context.term()
    lines = stderr.splitlines()
    said = [line for line in lines if "has ended before the worker asked it" in line]
    assert len(said) == 1, stderr
    assert f"The launcher of this worker (pid {launcher.pid}, " in said[0], said
    assert "--resume_from_checkpoint latest" in said[0], said
    if worker == "library":  # (uncaught: the traceback, its last line the error)
        assert said[0].startswith("melissa_trainer.client.worker_launcher.LauncherGone: ")
        assert lines[-1] == "worker exit status 1", stderr
    else:  # (an example, or the library's run_callable (before: the traceback, exit 1):
        # the one line, and the exit status of a simulation not delivered)
        assert lines == [said[0], "worker exit status 75"], stderr
        who = "run_callable" if worker == "run_callable" else "solver.py"
        assert said[0].startswith(f"{who}: The launcher of this worker"), said
