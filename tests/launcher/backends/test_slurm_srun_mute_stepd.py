"""mode="srun" on the one-node test cluster: a stop whose ``scancel --signal=TERM`` times
out while the controller answers (the step's slurmstepd SIGSTOPped: a daemon stuck on a
loaded node), told apart from a frozen controller (test_slurm_srun_frozen_stop.py) by a
probe that asks the controller only (`step_stop.PROBE_WAIT`).

Failed before: the stop's warning said "the Slurm controller did not answer" (the
scancel's timeout taken for the controller's absence), no warning named the step
daemons, and the step was not cancelled by name (no scancel naming it after the stop).
The waits the stop asks for (each command's timeout, the wait for the srun, the tasks'
grace) are summed against `SlurmBackend.stop_bound`, not timed."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from launcher_said import one_line
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from test_slurm_srun_frozen_stop import allocation_of
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm import step_stop, step_tasks, steps
from melissa_trainer.launcher.backends.slurm.commands import COMMAND_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: the task: its pid written aside and renamed (read once the file exists), then sleeps
SOLVER = """
import os, sys, time
from pathlib import Path
here = Path(sys.argv[1])
(here / ".up").write_text(str(os.getpid()))
(here / ".up").rename(here / "up")
while True:
    time.sleep(0.1)
"""
#: (the task dies of SIGTERM and its end is waited for: a grace that load cannot outrun)
GRACE = 8.0


def _read(pid: int, what: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/{what}").read_bytes()
    except OSError:
        return b""


def step_daemons(allocation: str, step_id: int) -> list[int]:
    """The slurmstepd processes of step `allocation`.`step_id` of this test's cluster."""
    head, conf = f"slurmstepd: [{allocation}.{step_id}]".encode(), os.environ["SLURM_CONF"]
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    return [
        p
        for p in pids
        if _read(p, "cmdline").startswith(head) and conf.encode() in _read(p, "environ")
    ]


@pytest.mark.timeout(240)
def test_a_mute_step_daemon_is_not_said_to_be_the_controller(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    allocation = allocation_of(slurm_cluster, tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", allocation)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    (tmp_path / "solver.py").write_text(SOLVER)
    backend = SlurmBackend(mode="srun", controller_wait=0)
    daemons: list[int] = []
    try:
        argv = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path)]
        handle = backend.launch(Job("sim", argv, cwd=tmp_path, log_path=tmp_path / "sim.log"))
        assert isinstance(handle, steps.SrunHandle)
        wait_until(
            lambda: (
                backend.poll(handle) is None
                and handle.step_id is not None
                and (tmp_path / "up").exists()
            ),
            what=lambda: f"the task up, the step listed: {(tmp_path / 'sim.log').read_text()}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        assert handle.step_id is not None
        daemons = step_daemons(allocation, handle.step_id)
        assert daemons, "no slurmstepd found for the step"
        for pid in daemons:
            os.kill(pid, signal.SIGSTOP)
        waits: list[tuple[str, float]] = []
        commands, local = backend._commands, backend._steps._local  # type: ignore[union-attr]
        run, kill_all, end_tasks = commands.run, local.kill_all, step_tasks.end_tasks

        def timed_run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            name = Path(argv[0]).name + (" --signal=TERM" if "--signal=TERM" in argv else "")
            waits.append((name, kwargs.get("timeout", COMMAND_TIMEOUT)))
            return run(argv, *args, **kwargs)

        def timed_kill_all(handles: list[Any], wait: float = 5.0, reasons: Any = None) -> Any:
            waits.append(("the sruns' end", wait))  # (5.0: its default)
            return kill_all(handles, wait, reasons)

        def timed_end_tasks(allocation: str, ids: Any, grace: float, *names: Any) -> Any:
            waits.append(("the tasks' grace and SIGKILL", grace + step_tasks.GONE_WAIT))
            return end_tasks(allocation, ids, grace, *names)

        with monkeypatch.context() as timed:
            timed.setattr(commands, "run", timed_run)
            timed.setattr(local, "kill_all", timed_kill_all)
            timed.setattr(step_stop, "end_tasks", timed_end_tasks)
            with caplog.at_level(logging.INFO, logger="melissa_trainer.launcher.backends.slurm"):
                code = backend.kill(handle, grace=GRACE)
        asked = list(waits)
    finally:
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        backend.close()
        slurm_cluster.run("scancel", allocation)
    said = one_line(caplog.text)
    print(f"asked {asked}")
    assert code is None
    assert "the Slurm controller did not answer" not in said, said
    assert "the Slurm controller answers a squeue" in said, said
    assert "the daemons (slurmstepd) of steps ['mt-sim'] did not answer" in said, said
    assert "1 task process(es) got SIGTERM and the grace, 0 SIGKILLed" in said, said
    assert ("scancel --signal=TERM", step_stop.TERM_WAIT) in asked, asked
    # (its srun keeps SRUN_END: it ends on its own, saying why; test_slurm.py's mute step)
    assert ("the sruns' end", step_stop.SRUN_END) in asked, asked
    assert asked[-1] == ("scancel", step_stop.TERM_WAIT), f"not cancelled by name: {asked}"
    budget = sum(wait for _, wait in asked)
    assert budget <= backend.stop_bound(GRACE), f"the stop may wait {budget} s: {asked}"
