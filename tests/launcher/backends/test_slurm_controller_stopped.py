"""A real Slurm controller that stops answering while the backend submits
(tests/slurm_cluster.py, slurmctld SIGSTOPped: a frozen controller): the submission goes
through once the controller is back, the log says that it waited, and the job is
submitted once, never twice.

A frozen controller is the hard case of `SlurmCommands.sbatch`: its port still accepts
connections, so sbatch's request is queued by the kernel, sbatch gives up on the reply
("Socket timed out on send/recv operation"), and the controller processes the queued
request when it resumes. Submitting again while it was frozen queued a second job of the
same name (failed before `sbatch` waited for squeue's answer: two jobs
``mt-outage-sim-0``). Mode "srun": the step started during the freeze runs once the
controller is back, its task once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.base import Handle
from melissa_trainer.launcher.backends.slurm.commands import Result, failure

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]


@pytest.mark.timeout(300)
def test_a_submission_to_a_frozen_controller_goes_through_once(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path / "scripts", controller_wait=240)
    backend.begin_study("outage")
    commands = backend._commands
    real_run = commands.run
    failed: list[str] = []  # the Slurm commands that failed, by name, in order

    def counted(argv: list[str], cwd: object = None, env: object = None) -> Result:
        result = real_run(argv, cwd=cwd, env=env)  # type: ignore[arg-type]
        if failure(result) is not None:
            failed.append(os.path.basename(argv[0]))
        return result

    monkeypatch.setattr(commands, "run", counted)
    handles: list[Handle] = []
    errors: list[BaseException] = []

    def submit() -> None:
        try:
            handles.append(backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path)))
        except BaseException as exc:  # (said by the test's thread)
            errors.append(exc)

    submitter = threading.Thread(target=submit, daemon=True)
    try:
        with slurm_cluster.controller_paused():
            submitter.start()
            # sbatch gave up on its reply, and two more commands failed after it
            # (squeue's looks; sbatch again before): its request, and any later try's,
            # wait in the controller's queue
            wait_until(
                lambda: failed[:1] == ["sbatch"] and len(failed) >= 3,
                what=lambda: f"3 failed commands, sbatch first: {failed}",
                timeout=UNTIL_TEST_TIMEOUT,
            )
        submitter.join(timeout=200)
        assert not submitter.is_alive(), "the submission did not end once the controller resumed"
        assert not errors, errors
        listed = slurm_cluster.run("squeue", "-h", "-t", "all", "-o", "%i|%j").split()
        ours = [line.split("|")[0] for line in listed if line.endswith("|mt-outage-sim-0")]
        assert ours == [handles[0].job_id], (ours, failed)  # type: ignore[attr-defined]
    finally:
        backend.close()
        submitter.join(timeout=200)
    said = [r.getMessage() for r in caplog.records if "Slurm controller" in r.getMessage()]
    assert said[0].startswith("sbatch could not reach the Slurm controller"), said
    assert "retrying for up to 240 s (controller_wait)" in said[0]
    assert said[-1].startswith("the Slurm controller answered sbatch again after"), said


@pytest.mark.timeout(300)
def test_an_srun_step_started_while_the_controller_is_frozen_runs_once(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Mode "srun": the srun started during the freeze fails before any task ("Unable to
    confirm allocation for job N: Socket timed out"), and is run again once the
    controller is back: the task runs once (failed before: the step reported 1)."""
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; the batch step and a step need 2")
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    out = slurm_cluster.run(
        "sbatch", "--parsable", "-n2", "--time=5", f"--chdir={tmp_path}", "--wrap", "sleep 300"
    )
    allocation = out.strip().split(";")[0]
    wait_until(
        lambda: "RUNNING" in slurm_cluster.run("squeue", "-h", "-j", allocation, "-o", "%T"),
        what="the allocation running",
        timeout=UNTIL_TEST_TIMEOUT,
    )
    monkeypatch.setenv("SLURM_JOB_ID", allocation)
    backend = SlurmBackend(mode="srun", controller_wait=240)
    log = tmp_path / "sim.log"
    try:
        with slurm_cluster.controller_paused():
            handle = backend.launch(Job("sim-1", ["echo", "task ran"], cwd=tmp_path, log_path=log))
            wait_until(
                lambda: backend.poll(handle) is None and "Unable to confirm" in log.read_text(),
                what=lambda: f"srun's failure in the log: {log.read_text()!r}",
                timeout=UNTIL_TEST_TIMEOUT,
                interval=0.2,
            )
        wait_until(
            lambda: backend.poll(handle) is not None,
            what="the step's end",
            timeout=UNTIL_TEST_TIMEOUT,
            interval=0.2,
        )
        assert backend.poll(handle) == 0, log.read_text()
    finally:
        backend.close()
        slurm_cluster.run("scancel", allocation)
    assert log.read_text().count("task ran") == 1, log.read_text()
    said = [r.getMessage() for r in caplog.records]
    assert any("srun could not reach the Slurm controller" in line for line in said), said
    assert any("srun runs again after" in line for line in said), said
