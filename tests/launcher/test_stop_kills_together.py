"""A stop kills its jobs together: SIGTERM to every job first, then one `kill_grace`
for them all (`Backend.kill_all`; the local and mpiexec backends).

Before, `Supervisor.shutdown` killed one job after another, each given its whole
`kill_grace`: a stop of N solvers that take seconds to exit after SIGTERM (a restart
file written) took N of those seconds (6 solvers exiting 2 s after SIGTERM: 12.1 s,
after: 2.1 s, /tmp-style script in this stop's note), and N solvers that ignore SIGTERM
took N x `kill_grace`: 64 of them at the default 5 s, 320 s, past the trainer ranks'
exit meeting (120 s) and most schedulers' preemption notice.

The oracle needs no clock: each solver, on SIGTERM, writes its line and waits for every
other solver's line, and only then exits, writing that it saw them all. Killed one
after another, the first solver never sees the others' lines (they are signalled only
after its end): it is SIGKILLed at its grace, silent. Killed together, every solver
writes "saw all". The grace is long (20 s) so that a loaded machine cannot cut a
solver's wait; it bounds the test's failure, not its success."""

from __future__ import annotations

import logging
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from kill_order import IDLE, ON_TERM, SOLVER, expected
from launcher_runs import launcher, receive, script, statuses, stream_study
from slurm_cluster import slurm_cluster  # noqa: F401 - the fixture (the Slurm case's)
from tooling import missing_tool
from waiting import wait_until

from melissa_trainer.launcher import worker_mode
from melissa_trainer.launcher.backends import Backend, LocalBackend, MpiexecBackend, SlurmBackend

pytestmark = pytest.mark.e2e  # every test here starts processes

N = 3
GRACE = 20.0
SLURM = pytest.param("slurm", marks=pytest.mark.xdist_group("slurm"))  # (its one cluster)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("kind", ["local", "mpiexec", SLURM])
def test_a_stop_signals_every_job_before_it_waits_for_any(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    n = N
    if kind == "mpiexec":
        mpiexec = find_mpiexec()
        if mpiexec is None:
            missing_tool(NO_MPI)
        backend: Backend = MpiexecBackend(mpiexec)
    elif kind == "slurm":  # batch jobs: their scancels name them all at once
        request.getfixturevalue("slurm_cluster")  # (skips where none can start)
        backend, n = SlurmBackend(poll_every=0.2, script_dir=tmp_path / "scripts"), 2
    else:
        backend = LocalBackend()
    (tmp_path / "solver.py").write_text(textwrap.dedent(SOLVER))
    sim = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path), str(n)]
    launch = launcher(sim, n, tuning={"kill_grace": GRACE}, job_limit=n, backend=backend)
    launch.start(tmp_path / "rendezvous", study_dir=tmp_path)
    try:
        up = lambda: sum(1 for p in tmp_path.glob("*.up"))  # noqa: E731
        wait_until(lambda: up() == n, f"{n} solvers to start", 120.0)
    finally:
        launch.stop()
    said = (tmp_path / "said.txt").read_text().splitlines()
    assert sorted(said) == expected(n), said
    # a solver's exit 0 after the SIGTERM is the kill's: each runs again on resume
    assert statuses(launch) == {i: "pending" for i in range(n)}


#: a worker: takes simulations (one step sent each) until the study has none left, then
#: runs on (a worker whose solver never exits): the launcher retires it
WORKER = (
    ON_TERM
    + """
import numpy as np
from melissa_trainer.client import Client
from melissa_trainer.client.worker import next_simulation

while (work := next_simulation(timeout=30)) is not None:
    simulation_id, parameters = work
    with Client({"u": ((4,), "float32")}, simulation_id=simulation_id,
                parameters=parameters) as client:
        client.send(0, u=np.zeros(4, np.float32))
"""
    + IDLE
)


@pytest.mark.timeout(180)
def test_workers_alive_after_the_study_are_retired_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`WorkerSupervisor.retire`: workers still alive `EXIT_GRACE` s after the study
    ended are killed together too (before: one after another, each its grace)."""
    monkeypatch.setattr(worker_mode, "EXIT_GRACE", 0.2)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    receiver, buffer = receive(tmp_path, expected=2)
    worker = [sys.executable, script(tmp_path, WORKER, "worker.py"), str(tmp_path), "2"]
    launch = launcher(worker, 2, job_limit=2, worker=True, tuning={"kill_grace": GRACE})

    def retired() -> bool:
        said = tmp_path / "said.txt"
        return said.exists() and len(said.read_text().splitlines()) == 4

    samples = stream_study(
        launch, tmp_path, receiver, buffer, lambda: wait_until(retired, "the retire", 120.0)
    )
    assert len(samples) == 2
    assert any("workers still alive" in r.getMessage() for r in caplog.records)
    said = (tmp_path / "said.txt").read_text().splitlines()
    assert sorted(said) == expected(2, ["worker-0", "worker-1"]), said


@pytest.mark.timeout(180)
def test_simulations_silent_at_once_are_killed_together(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`SilenceWatch.check_timeouts`: the simulations found silent past their bound at
    one look are killed together (before: one after another, the launcher's thread held
    a grace per job, nothing launched or polled meanwhile). No heartbeat: each solver
    is silent from its start, and both pass the 1 s bound at the same look."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    (tmp_path / "solver.py").write_text(SOLVER)
    sim = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path), "2"]
    tuning = {"kill_grace": GRACE, "simulation_timeout": 1.0, "startup_timeout": 1.0,
              "max_restarts": 0, "on_failure": "abandon", "poll_interval": 3.0}  # fmt: skip
    launch = launcher(sim, 2, tuning=tuning, job_limit=2)
    said = tmp_path / "said.txt"
    launch.start(tmp_path / "rendezvous")
    try:
        wait_until(
            lambda: said.exists() and len(said.read_text().splitlines()) >= 4,
            "two silent solvers killed",
            120.0,
        )
    finally:
        launch.stop()
    killed = [r.getMessage() for r in caplog.records if "silent for" in r.getMessage()]
    assert len(killed) >= 2, killed
    assert sorted(said.read_text().splitlines()[:4]) == expected(2)
