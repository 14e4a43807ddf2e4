"""mode="srun" on the one-node test cluster, slurmctld frozen (SIGSTOPped) during a stop:
the step's tasks on this node get SIGTERM and the grace before SIGKILL
(`step_tasks.end_tasks`), and the stop stays within `SlurmBackend.stop_bound`.

One step of 2 tasks: task 0 writes its last state on SIGTERM and exits 0; task 1 notes
the SIGTERM and goes on. The stop's ``scancel --signal=TERM`` never gets its reply
(given up after `TERM_WAIT`), and a signalled srun does not end its tasks without the
controller. Failed before: both tasks were SIGKILLed with no SIGTERM (task 0's state
never written: "wrote-0" absent), after their sruns' `SRUN_END`. The bound is checked by
summing the waits the stop asks for (each command's timeout, each wait for the sruns
and for this node's tasks), not by a clock: the time taken is said, not asserted. The
srun, its tasks gone and the controller surely away (the probe's squeue unanswered
too), gets `SRUN_GONE`, not `SRUN_END` (`step_stop._end_here`; a step daemon that does
not answer keeps `SRUN_END`: test_slurm_srun_mute_stepd.py). Failed before: the srun
was given `SRUN_END` (asked [... ("the sruns' end", 10.0) ...])."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from launcher_said import one_line
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm import step_stop, step_tasks, steps
from melissa_trainer.launcher.backends.slurm.commands import COMMAND_TIMEOUT

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: task 0 writes its state on SIGTERM and exits; task 1 notes it and runs on
SOLVER = """
import os, signal, sys, time
from pathlib import Path
here, rank = Path(sys.argv[1]), os.environ["SLURM_PROCID"]
if rank == "0":
    def last_state(*_):
        (here / "wrote-0").write_text("last state")
        sys.exit(0)
    signal.signal(signal.SIGTERM, last_state)
else:
    signal.signal(signal.SIGTERM, lambda *_: (here / "termed-1").touch())
# (written aside, then renamed: the test reads the pid once the file exists; written in
# place, it was once read empty, between its creation and its write)
(here / f".up-{rank}").write_text(str(os.getpid()))
(here / f".up-{rank}").rename(here / f"up-{rank}")
while True:
    time.sleep(0.1)
"""
#: (task 1 ignores SIGTERM: the stop waits the whole grace. 2 s once let task 0, which
#: exits on SIGTERM, still be listed at its end on a loaded CI machine: "2 SIGKILLed")
GRACE = 8.0


def _alive(pid: int) -> bool:
    """`pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def allocation_of(cluster: SlurmCluster, cwd: Path) -> str:
    """A running 2-task batch job (its script sleeps): the allocation the steps run in."""
    out = cluster.run(
        "sbatch", "--parsable", "-n2", "--time=5", f"--chdir={cwd}", "--wrap", "sleep 300"
    )
    allocation = out.strip().split(";")[0]
    wait_until(
        lambda: "RUNNING" in cluster.run("squeue", "-h", "-j", allocation, "-o", "%T"),
        what="the allocation running",
        timeout=UNTIL_TEST_TIMEOUT,
    )
    return allocation


@pytest.mark.timeout(300)
def test_a_frozen_controller_stop_gives_this_nodes_tasks_sigterm_and_the_grace(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task step needs 2")
    allocation = allocation_of(slurm_cluster, tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", allocation)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")  # (as salloc and sbatch set it)
    (tmp_path / "solver.py").write_text(SOLVER)
    backend = SlurmBackend(mode="srun", controller_wait=0)
    pids: list[int] = []
    waits: list[tuple[str, float]] = []
    try:
        argv = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path)]
        job = Job("sim", argv, cwd=tmp_path, ranks=2, log_path=tmp_path / "sim.log")
        handle = backend.launch(job)
        assert isinstance(handle, steps.SrunHandle)
        wait_until(
            lambda: (
                backend.poll(handle) is None
                and handle.step_id is not None
                and all((tmp_path / f"up-{r}").exists() for r in range(2))
            ),
            what=lambda: f"both tasks up, the step listed: {(tmp_path / 'sim.log').read_text()}",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        pids = [int((tmp_path / f"up-{r}").read_text()) for r in range(2)]
        # what the stop asks to wait for (a frozen controller makes each command wait
        # out its timeout; each wait for the sruns or the tasks may be used in full)
        commands, local = backend._commands, backend._steps._local  # type: ignore[union-attr]
        run, kill_all = commands.run, local.kill_all
        # (getattr, raising=False below: before the fix there was no end_tasks)
        end_tasks, kill_tasks = getattr(step_tasks, "end_tasks", None), step_tasks.kill_tasks

        def timed_run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            waits.append((Path(argv[0]).name, kwargs.get("timeout", COMMAND_TIMEOUT)))
            return run(argv, *args, **kwargs)

        def timed_kill_all(handles: list[Any], wait: float = 5.0, reasons: Any = None) -> Any:
            waits.append(("the sruns' end", wait))  # (5.0: its default)
            return kill_all(handles, wait, reasons)

        def timed_end_tasks(allocation: str, ids: Any, grace: float, *names: Any) -> Any:
            waits.append(("the tasks' grace and SIGKILL", grace + step_tasks.GONE_WAIT))
            assert end_tasks is not None
            return end_tasks(allocation, ids, grace, *names)

        def timed_kill_tasks(allocation: str, ids: Any, *names: Any) -> Any:
            waits.append(("the tasks' SIGKILL", step_tasks.GONE_WAIT))
            return kill_tasks(allocation, ids, *names)

        monkeypatch.setattr(commands, "run", timed_run)
        monkeypatch.setattr(local, "kill_all", timed_kill_all)
        monkeypatch.setattr(step_stop, "end_tasks", timed_end_tasks, raising=False)
        monkeypatch.setattr(steps, "kill_tasks", timed_kill_tasks)
        with slurm_cluster.controller_paused():
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
                code = backend.kill(handle, grace=GRACE)
            took = time.monotonic() - started  # (said, not asserted)
            running = [pid for pid in pids if _alive(pid)]
        asked = list(waits)
        monkeypatch.undo()
    finally:
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        backend.close()
        slurm_cluster.run("scancel", allocation)
    log = (tmp_path / "sim.log").read_text()
    print(f"the stop took {took:.1f} s; asked {asked}")
    assert code is None
    assert (tmp_path / "wrote-0").exists(), f"task 0 got no SIGTERM to act on: {log}"
    assert (tmp_path / "termed-1").exists(), f"task 1 got no SIGTERM: {log}"
    assert running == [], f"tasks {running} outlived the stop: {log}"
    said = one_line(caplog.text)
    # (told from a step daemon that does not answer by a squeue: test_slurm_srun_mute_stepd)
    assert "the Slurm controller did not answer a squeue either" in said, said
    assert "the Slurm controller did not answer: steps" in said, said
    assert "2 task process(es) got SIGTERM and the grace, 1 SIGKILLed" in said, said
    assert "the allocation has one node" in said, said
    # the controller surely away (the probe's squeue unanswered too), one node, its
    # tasks gone: the srun is not given SRUN_END (a step daemon not answering keeps it:
    # test_slurm_srun_mute_stepd.py)
    sruns = [wait for what, wait in asked if what == "the sruns' end"]
    assert sruns == [step_stop.SRUN_GONE], f"sruns waited {sruns} s after their tasks: {asked}"
    print(f"the job's log: {log}")
    bound = backend.stop_bound(GRACE)
    budget = sum(wait for _, wait in asked)
    assert budget <= bound, f"the stop may wait {budget} s ({asked}; took {took:.1f} s): {bound}"


@pytest.mark.timeout(300)
def test_a_step_never_listed_gets_sigterm_and_the_grace_from_a_frozen_controller_stop(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A step whose tasks run but whose id squeue never listed (here: the backend's
    listing withheld until the controller is frozen; then the stop's squeue gets no
    answer): its tasks on this node are found by their step name (``SLURM_JOB_NAME``,
    srun's ``--job-name``) and get SIGTERM, the grace and SIGKILL. Failed before: they
    got no signal at all and outlived the stop ("wrote-0" absent, both tasks running:
    the srun SIGKILLed after `SRUN_END` does not end them without the controller)."""
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task step needs 2")
    allocation = allocation_of(slurm_cluster, tmp_path)
    monkeypatch.setenv("SLURM_JOB_ID", allocation)
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    (tmp_path / "solver.py").write_text(SOLVER)
    backend = SlurmBackend(mode="srun", controller_wait=0)
    pids: list[int] = []
    try:
        argv = [sys.executable, str(tmp_path / "solver.py"), str(tmp_path)]
        job = Job("sim", argv, cwd=tmp_path, ranks=2, log_path=tmp_path / "sim.log")
        srun_steps = backend._steps  # type: ignore[union-attr]
        with monkeypatch.context() as unlisted:  # (no squeue while the tasks start)
            unlisted.setattr(srun_steps, "_list", lambda *_, **__: None)
            handle = backend.launch(job)
            assert isinstance(handle, steps.SrunHandle)
            wait_until(
                lambda: (
                    backend.poll(handle) is None
                    and all((tmp_path / f"up-{r}").exists() for r in range(2))
                ),
                what=lambda: f"both tasks up: {(tmp_path / 'sim.log').read_text()}",
                timeout=UNTIL_TEST_TIMEOUT,
            )
        pids = [int((tmp_path / f"up-{r}").read_text()) for r in range(2)]
        assert handle.step_id is None  # (never listed)
        with slurm_cluster.controller_paused():
            with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
                code = backend.kill(handle, grace=GRACE)
            running = [pid for pid in pids if _alive(pid)]
    finally:
        for pid in pids:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        backend.close()
        slurm_cluster.run("scancel", allocation)
    log = (tmp_path / "sim.log").read_text()
    assert code is None
    assert (tmp_path / "wrote-0").exists(), f"task 0 got no SIGTERM to act on: {log}"
    assert (tmp_path / "termed-1").exists(), f"task 1 got no SIGTERM: {log}"
    assert running == [], f"tasks {running} outlived the stop: {log}"
    assert "2 task process(es) got SIGTERM and the grace, 1 SIGKILLed" in one_line(caplog.text)
