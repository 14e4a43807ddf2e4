"""mode="srun", stand-in commands (test_slurm_srun_outage.py's, its srun execing the
task: the solver is the "srun" process): a stop ends within the bound the backend
states (`SlurmBackend.stop_bound`), and the cancel by name after it trusts only this
stop's own commands.

- A frozen controller (squeue and scancel never answer), one step whose id squeue had
  listed and one whose id it had not, both ignoring SIGTERM: the kill ends within
  ``stop_bound(grace)``: the waits the stop asks for (each command's timeout, each
  wait for the sruns, the grace) add up to no more than the backend's own figure (its
  waits made small: `TERM_WAIT` 1 s, `SRUN_END` 2 s, `GONE_WAIT` 1 s); the time it took is said, not
  asserted. Failed before: the squeue before the stop
  waited out its 30 s timeout (not in the bound), and the unnamed step's srun had its
  own `SRUN_END` before the named one's (2 x `SRUN_END`); the bound was 0.5 s + 10 s + 1 s.
- A controller that had not answered an earlier squeue (`SlurmCommands.unreachable`
  still set) and a stop that runs no command (the step's srun had ended on its own):
  its step is cancelled by name. Failed before: it was not (the stale hint read as
  "the controller did not answer the kill"), and a WARNING said so."""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from launcher_said import one_line
from test_slurm_srun_outage import fake  # noqa: F401 - the fixture (stand-in commands)
from waiting import wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm import backend as slurm_backend
from melissa_trainer.launcher.backends.slurm import step_stop, step_tasks, steps
from melissa_trainer.launcher.backends.slurm.commands import COMMAND_TIMEOUT

pytestmark = pytest.mark.e2e  # it starts processes

#: squeue and scancel that never answer while $FAKE/frozen exists (a SIGSTOPped
#: slurmctld), their calls counted
FROZEN = """#!/bin/bash
echo "$@" >> "$FAKE/{name}.calls"
if [ -e "$FAKE/frozen" ]; then exec sleep 600; fi
{answer}
"""
#: a solver that ignores SIGTERM and says it runs (NAME.up)
STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1] + '.up', 'w').close(); time.sleep(600)"
)


def _stand_ins(fake: Path) -> None:  # noqa: F811
    bin_dir = fake.parent / "bin"
    (bin_dir / "squeue").write_text(
        FROZEN.format(name="squeue", answer='cat "$FAKE/steps" 2>/dev/null; exit 0')
    )
    (bin_dir / "scancel").write_text(FROZEN.format(name="scancel", answer="exit 0"))


@pytest.mark.timeout(120)
def test_a_stop_against_a_frozen_controller_ends_within_the_stated_bound(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    _stand_ins(fake)
    for module in (step_stop, steps, step_tasks, slurm_backend):
        for name, wait in (
            ("TERM_WAIT", 1.0),
            ("SRUN_END", 2.0),
            ("GONE_WAIT", 1.0),
            ("PROBE_WAIT", 1.0),
        ):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, wait)
    backend = SlurmBackend(mode="srun", controller_wait=0)
    try:
        import sys

        def launch(name: str) -> steps.SrunHandle:
            solver = [sys.executable, "-c", STUBBORN, str(tmp_path / name)]
            job = Job(name, solver, cwd=tmp_path, log_path=tmp_path / f"{name}.log")
            handle = backend.launch(job)
            assert isinstance(handle, steps.SrunHandle)
            wait_until(lambda: (tmp_path / f"{name}.up").exists(), f"{name} to run", 30.0)
            return handle

        listed = launch("listed")
        (fake / "steps").write_text(f"77.5|{listed.step_name}\n")
        wait_until(lambda: backend.poll(listed) is None and listed.step_id == 5, "its id", 30.0)
        (fake / "frozen").touch()
        unlisted = launch("unlisted")
        grace = 0.5
        # the stop's budget, read from what it asks (not from a clock: the machine's
        # load would move a measured time): each command's timeout (a frozen controller
        # makes each wait it out), each wait for the sruns (`LocalBackend.kill_all`'s
        # grace) and for this node's tasks (`step_tasks`): the named steps' grace is
        # the wait of their tasks' SIGTERM (`end_tasks`), the scancel of it unanswered
        waits: list[tuple[str, float]] = []
        commands, local = backend._commands, backend._steps._local  # type: ignore[union-attr]
        run, kill_all = commands.run, local.kill_all

        def timed_run(argv: list[str], *args: Any, **kwargs: Any) -> Any:
            waits.append((Path(argv[0]).name, kwargs.get("timeout", COMMAND_TIMEOUT)))
            return run(argv, *args, **kwargs)

        def timed_kill_all(handles: list[Any], wait: float = 5.0, reasons: Any = None) -> Any:
            waits.append(("the sruns' end", wait))  # (5.0: its default)
            return kill_all(handles, wait, reasons)

        end_tasks, kill_tasks = step_tasks.end_tasks, step_tasks.kill_tasks

        def timed_end_tasks(allocation: str, ids: Any, wait: float, *names: Any) -> Any:
            waits.append(("the tasks' grace and SIGKILL", wait + step_tasks.GONE_WAIT))
            return end_tasks(allocation, ids, wait, *names)

        def timed_kill_tasks(allocation: str, ids: Any, *names: Any) -> Any:
            waits.append(("the tasks' SIGKILL", step_tasks.GONE_WAIT))
            return kill_tasks(allocation, ids, *names)

        monkeypatch.setattr(commands, "run", timed_run)
        monkeypatch.setattr(local, "kill_all", timed_kill_all)
        monkeypatch.setattr(step_stop, "end_tasks", timed_end_tasks)
        monkeypatch.setattr(steps, "kill_tasks", timed_kill_tasks)
        started = time.monotonic()
        codes = backend.kill_all([listed, unlisted], grace=grace)
        took = time.monotonic() - started  # (said, not asserted)
        asked = list(waits)  # (not the close's)
    finally:
        (fake / "frozen").unlink(missing_ok=True)
        backend.close()
    assert codes == [None, None]
    bound = backend.stop_bound(grace)
    budget = sum(wait for _, wait in asked)
    assert budget <= bound, (
        f"the stop may wait {budget} s ({asked}; took {took:.1f} s), "
        f"stop_bound({grace}) is {bound} s"
    )


@pytest.mark.timeout(120)
def test_a_stale_unreachable_hint_does_not_skip_the_cancel(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("FAILS", "0")
    _stand_ins(fake)
    backend = SlurmBackend(mode="srun")
    try:
        go = tmp_path / "go"
        waits = ["sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done']
        handle = backend.launch(Job("sim", waits, cwd=tmp_path, log_path=tmp_path / "sim.log"))
        assert isinstance(handle, steps.SrunHandle)
        (fake / "steps").write_text(f"77.5|{handle.step_name}\n")
        wait_until(lambda: backend.poll(handle) is None and handle.step_id == 5, "its id", 30.0)
        go.touch()
        handle.process.process.wait(timeout=30)  # type: ignore[attr-defined]  # (not polled)
        backend._commands.unreachable = True  # (an earlier squeue's, say, since answered)
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
            code = backend.kill(handle, grace=0.5)
    finally:
        backend.close()
    assert code == 0  # (it had ended on its own)
    calls = fake / "scancel.calls"
    cancels = calls.read_text().split() if calls.exists() else []
    assert "77.5" in cancels, f"not cancelled by name: scancel ran {cancels}"
    assert "did not answer" not in one_line(caplog.text), one_line(caplog.text)


#: an srun whose task runs outside its process group, as a step's task runs under
#: slurmstepd: signalling the srun does not reach it (with a frozen controller, srun's
#: own end of its tasks never comes: step_tasks.py's docstring)
DETACHED_SRUN = """#!/bin/bash
while [[ "$1" == -* ]]; do shift; done
SLURM_JOB_ID=77 SLURM_STEP_ID=5 setsid "$@" &
echo $! > "$FAKE/task.pid"
wait
"""
#: a scancel whose signals never get an answer (a frozen controller)
FROZEN_SIGNALS = """#!/bin/bash
echo "$@" >> "$FAKE/scancel.calls"
if [[ "$1" == --signal=* ]]; then exec sleep 600; fi
"""


def _alive(pid: int) -> bool:
    """`pid` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(120)
def test_a_stop_without_the_controller_ends_this_nodes_tasks(
    fake: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Failed before: the task, out of srun's reach, still ran after the stop (on the
    test cluster, slurmctld frozen, both steps' tasks ran on until it resumed)."""
    bin_dir = fake.parent / "bin"
    (bin_dir / "srun").write_text(DETACHED_SRUN)
    (bin_dir / "scancel").write_text(FROZEN_SIGNALS)
    monkeypatch.setattr(step_stop, "TERM_WAIT", 0.5)
    monkeypatch.setattr(step_stop, "SRUN_END", 1.0)
    up = tmp_path / "task.up"
    task = f"import time; open({str(up)!r}, 'w').close(); time.sleep(600)"
    import sys

    backend = SlurmBackend(mode="srun")
    pid = 0
    try:
        job = Job("sim", [sys.executable, "-c", task], cwd=tmp_path, log_path=tmp_path / "l")
        handle = backend.launch(job)
        assert isinstance(handle, steps.SrunHandle)
        (fake / "steps").write_text(f"77.5|{handle.step_name}\n")
        wait_until(lambda: up.exists(), "the task to run", 30.0)
        pid = int((fake / "task.pid").read_text())
        wait_until(lambda: backend.poll(handle) is None and handle.step_id == 5, "its id", 30.0)
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.launcher.backends.slurm"):
            # (a grace that load cannot outrun: the task dies of SIGTERM, its end waited for)
            assert backend.kill(handle, grace=8.0) is None
        running = _alive(pid)
    finally:
        backend.close()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert not running, "the step's task on this node outlived the stop"
    # (its task dies of the stop's SIGTERM: test_slurm_srun_frozen_stop.py has one that
    # ignores it, on the test cluster)
    assert "1 task process(es) got SIGTERM and the grace, 0 SIGKILLed" in one_line(caplog.text), (
        one_line(caplog.text)
    )
