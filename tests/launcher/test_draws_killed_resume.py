"""A real study killed (SIGKILL) after a simulation that its checkpoint holds as running
was redrawn, then resumed: ``draws.csv`` ends as the resumed study ran, its last row
per simulation that of what it did (`launcher.draw_log`, cut at the checkpoint's
``draw_rows``).

Before: the resume kept the killed run's ``redrawn`` row of simulation 1 (its id below
the checkpoint's `next_id`), though the resumed study ran it again to its end: its
last row said ``redrawn``.

The first run is a launcher in a process of its own, killed by SIGKILL once the
replacement of simulation 1 has started; the checkpoint is its `state_dict` taken
while 1 ran. The oracles: the parameters each solver received (it writes them down),
which attempts ran, and the resumed launcher's own record (statuses, redraws).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_runs import FAST, alive, kill_all, run_study
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LocalBackend, make_sampler
from melissa_trainer.launcher.simulation_record import records_of

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG"),
    pytest.mark.e2e,
]

# the solver writes down what it received, and its pid; simulation 1's first attempt
# waits for the checkpoint ("go"), then fails
SOLVER = r"""
import json, os, sys, time
out = sys.argv[1]
sid, attempt = os.environ["MELISSA_TRAINER_SIMULATION_ID"], os.environ["MELISSA_TRAINER_ATTEMPT"]
with open(os.path.join(out, "pids.txt"), "a") as f:
    f.write(f"{os.getpid()}\n")
received = os.path.join(out, f"{sid}-{attempt}.json")
with open(received + ".tmp", "w") as f:
    f.write(os.environ["MELISSA_TRAINER_PARAMETERS"])
os.replace(received + ".tmp", received)
if (sid, attempt) == ("1", "0"):
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(out, "go")) and time.monotonic() < deadline:
        time.sleep(0.01)
    sys.exit(1)
"""

# the first run: checkpoint while 1 runs, let 1 fail (redrawn as 3), die once 3 started
FIRST_RUN = r"""
import json, os, signal, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[2], os.path.dirname(sys.argv[2])]  # (this test's, its helpers')
from test_draws_killed_resume import make

out = Path(sys.argv[1])

def wait_for(name):
    deadline = time.monotonic() + 60
    while not (out / name).exists():
        if time.monotonic() > deadline:
            sys.exit(f"{name} never appeared")
        time.sleep(0.01)

launcher = make(out)
launcher.start(out / "rendezvous")
wait_for("1-0.json")
state = json.dumps(launcher.state_dict())  # the checkpoint: 1 running
(out / "state.json.tmp").write_text(state)
os.replace(out / "state.json.tmp", out / "state.json")
(out / "go").touch()
wait_for("3-0.json")  # 1 failed, given up and redrawn as 3: its rows are written
os.kill(os.getpid(), signal.SIGKILL)
"""


def make(out: Path) -> Launcher:
    sampler = make_sampler("uniform", {"x": (0, 1)}, seed=3)
    return Launcher(
        [sys.executable, str(out / "solver.py"), str(out)],
        sampler,
        3,
        job_limit=3,
        backend=LocalBackend(),
        tuning=dataclasses.replace(FAST, max_restarts=0, on_failure="redraw"),
    )


@pytest.mark.timeout(180)
def test_a_study_killed_after_a_redraw_and_resumed_ends_its_file_as_it_ran(
    tmp_path: Path,
) -> None:
    (tmp_path / "solver.py").write_text(SOLVER)
    (tmp_path / "first.py").write_text(FIRST_RUN)
    tests = str(Path(__file__).parent)
    first = subprocess.Popen(
        [sys.executable, str(tmp_path / "first.py"), str(tmp_path), tests],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = first.communicate(timeout=120)
    finally:
        first.kill()
        pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
        wait_until(lambda: not any(alive(p) for p in pids), "the first run's jobs to die", 30)
    assert first.returncode == -signal.SIGKILL, err
    state = json.loads((tmp_path / "state.json").read_text())

    second = make(tmp_path)
    second.load_state_dict(state)
    second.start(tmp_path / "rendezvous")
    try:
        run_study(second)
        saved = second.state_dict()
    finally:
        second.stop()
        kill_all(int(p) for p in (tmp_path / "pids.txt").read_text().split())

    records = records_of(saved)
    assert (tmp_path / "1-1.json").exists()  # 1 ran again after the resume...
    assert {r["status"] for r in records.values()} == {"finished"}  # ...to its end
    assert sorted(records) == [0, 1, 2] and saved["redraws"] == 0  # nothing redrawn
    with (tmp_path / "draws.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    assert [r["event"] for r in rows] == ["draw"] * 3, rows  # one row each, as it ran
    last = {int(r["simulation_id"]): r for r in rows}  # drop_duplicates(keep="last")
    assert sorted(last) == sorted(records)
    for sid, row in last.items():  # the parameters its solver received, every attempt
        for received in tmp_path.glob(f"{sid}-*.json"):
            assert float(row["x"]) == json.loads(received.read_text())["x"], (row, received)
