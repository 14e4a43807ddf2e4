"""The launcher's story of a simulation whose process exits 0 before its data is all in:
"simulation N attempt K exited (...); waiting for the rest of its data", then one line
that ends it, read back from the launcher's log file: the rest arrived, or (after
`DRAIN_GRACE`, the receiver idle) what the receiver lacks.

Before, the first line was never followed by one saying the data arrived (a user read
the study's log for the end of the wait and found none), and the line of a wait that
timed out named the simulation without its attempt ("simulation 0: it exited 0 but
...").

The solver is real: a process that starts a child in a session of its own (an MPI
launcher's rank that outlives the job's first process, in effect), waits for the child to
have sent its steps, and exits 0. The child holds its BYE until the test's log handler
sees the launcher's "waiting" line (a file the handler writes: the event), then closes
(``bye=False`` for the timeout's case: the rest never comes).
"""

from __future__ import annotations

import logging
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from launcher_runs import FAST, kill_all
from study_runs import study_to_its_end

from melissa_trainer.launcher import (
    Launcher,
    LauncherTuning,
    LocalBackend,
    data_watch,
    make_sampler,
)

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
    pytest.mark.timeout(120),
]

#: argv: the child's script, the go file, the mode; exits 0 once its child sent its steps
PARENT = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, *sys.argv[1:]], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
sys.exit(0 if child.stdout.readline() == "sent\n" else 1)
"""

#: sends 3 steps, says "sent", waits for the go file (bounded: a test that failed before
#: writing it), then closes: with its BYE ("late"), or on attempt 0 without ("never")
CHILD = r"""
import os, sys, time
import numpy as np
from melissa_trainer.client import Client

go, mode = sys.argv[1], sys.argv[2]
attempt = int(os.environ["MELISSA_TRAINER_ATTEMPT"])
with open(f"{go}.{attempt}.pid", "w") as f:
    f.write(str(os.getpid()))
client = Client({"u": ((4,), "float32")})
for t in range(3):
    client.send(t, u=np.full(4, t, np.float32))
print("sent", flush=True)
deadline = time.monotonic() + 60
while attempt == 0 and not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.01)
client.close(bye=not (mode == "never" and attempt == 0))
"""


class Go(logging.Handler):
    """Writes the go file when the launcher logs a line containing `cue`."""

    def __init__(self, go: Path, cue: str) -> None:
        super().__init__(logging.INFO)
        self.go, self.cue = go, cue

    def emit(self, record: logging.LogRecord) -> None:
        if self.cue in record.getMessage():
            self.go.touch()


@pytest.fixture
def launcher_log(tmp_path: Path) -> Iterator[Path]:
    """The launcher's log file (its messages at INFO and above, one a line)."""
    path = tmp_path / "launcher.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    log = logging.getLogger("melissa_trainer.launcher")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    yield path
    log.removeHandler(handler)
    log.setLevel(level)
    handler.close()


def run(tmp_path: Path, mode: str, cue: str, **tuning: object) -> list[str]:
    """A study of one simulation (the solver above, in `mode`) to its end, the go file
    written at the launcher's line containing `cue`: the lines about attempt 0."""
    parent, child = tmp_path / "parent.py", tmp_path / "child.py"
    parent.write_text(textwrap.dedent(PARENT))
    child.write_text(textwrap.dedent(CHILD))
    go = tmp_path / "go"
    launch = Launcher(
        [sys.executable, str(parent), str(child), str(go), mode],
        make_sampler("uniform", {"x": (0, 1)}),
        1,
        backend=LocalBackend(),
        tuning=LauncherTuning(poll_interval=FAST.poll_interval, kill_grace=2.0, **tuning),  # type: ignore[arg-type]
    )
    handler = Go(go, cue)
    log = logging.getLogger("melissa_trainer.launcher")
    log.addHandler(handler)
    try:
        study_to_its_end(launch, tmp_path / "rendezvous")
    finally:
        log.removeHandler(handler)
        go.touch()  # (a child still waiting ends)
        pids = [int(p.read_text()) for p in tmp_path.glob("go.*.pid") if p.read_text()]
        kill_all(pids)
    lines = (tmp_path / "launcher.log").read_text().splitlines()
    return [line for line in lines if "simulation 0 attempt 0" in line]


def test_the_rest_of_the_data_arriving_after_the_exit_is_said(
    tmp_path: Path, launcher_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (no timeout while the test's handler lets the child close: not what is tested here)
    monkeypatch.setattr(data_watch, "DRAIN_GRACE", 3600.0)
    said = run(tmp_path, "late", "waiting for the rest of its data")
    assert len(said) == 2, said
    assert re.fullmatch(
        r"INFO simulation 0 attempt 0 exited \(exit 0, [0-9.]+ s\); waiting for the rest "
        r"of its data",
        said[0],
    ), said
    assert re.fullmatch(
        r"INFO simulation 0 attempt 0: the rest of its data arrived, [0-9.]+ s after its "
        r"end: finished",
        said[1],
    ), said


def test_data_that_never_arrives_after_the_exit_is_said_with_what_is_missing(
    tmp_path: Path, launcher_log: Path
) -> None:
    said = run(tmp_path, "never", "did not all arrive", max_restarts=1)
    assert len(said) == 3, said
    assert said[0].startswith("INFO simulation 0 attempt 0 exited (exit 0, "), said
    assert said[1].startswith(
        "WARNING simulation 0 attempt 0: it exited 0 but its data did not all arrive (rank "
        "0's receiver has 3 of an unannounced number of steps, BYE from 0 of 1 client "
        "ranks); a solver must send every step and close its client"
    ), said
    assert said[2].startswith("WARNING simulation 0 attempt 0 failed (exit 0, data incomplete"), (
        said
    )
    assert "restart 1 of 1" in said[2], said
