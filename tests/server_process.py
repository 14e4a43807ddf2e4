"""A trainer's serving side in a process of its own, to kill: the trainer-gone tests of
the Python and C predictors (tests/client/test_predict_trainer_gone.py,
tests/c/test_c_predict_trainer_gone.py). The in-process server that is stopped, not
killed, is tests/predict_server.py.

The process runs a `PredictServer` of one input ``u`` (4 float32) publishing its serve
file in ``tmp_path/rv``, and answers each request with ``y = 2 u + version`` at that
version (an oracle the test computes itself). With `hold`, every request after the
first is held unanswered, the process printing ``holding`` for each (a trainer busy
with it), so that a test can kill it while a request waits. SIGTERM stops it cleanly
(the server stopped, its serve file removed, exit status 143); SIGKILL leaves the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["SERVER", "kill_all", "start_server"]

#: the server process's script (the environment gives RV, VERSION, HOLD)
SERVER = """
import os, signal, sys
import numpy as np
from melissa_trainer.stream.serving import PredictServer

srv = PredictServer({"u": ((4,), "float32")}, rendezvous_dir=os.environ["RV"])
signal.signal(signal.SIGTERM, lambda *_: (srv.stop(), sys.exit(143)))  # a clean stop
srv.start()
srv.serving = True
print(srv.endpoint, flush=True)
version, hold = int(os.environ["VERSION"]), os.environ.get("HOLD") == "1"
answered = 0
while True:
    if srv.wait_pending(0.1):
        for p in srv.take(8):
            if hold and answered:  # the second request is held: a trainer busy with it
                print("holding", flush=True)
                continue
            srv.answer(p, {"y": 2 * p.request.arrays["u"] + version}, version)
            answered += 1
"""


def start_server(tmp_path: Path, version: int, hold: bool) -> tuple[subprocess.Popen[str], str]:
    """A serving process (module docstring) publishing in ``tmp_path/rv``, and its
    endpoint, once it serves (its first line). The caller ends it: `kill_all`."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    env = {**os.environ, "RV": str(tmp_path / "rv"), "VERSION": str(version)}
    env["HOLD"] = "1" if hold else "0"
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def kill_all(*procs: subprocess.Popen[str] | None) -> None:
    """Kill and reap each of `procs` (None: one not started; one ended already: reaped)."""
    for proc in procs:
        if proc is not None:
            proc.kill()
            proc.wait()
