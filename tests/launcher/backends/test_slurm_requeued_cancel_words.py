"""A batch job that ran, that Slurm requeued (``scontrol requeue``, or ``requeuehold``)
and that someone scancels while it waits in the queue again is said to have been
cancelled in the queue after its requeue, not "while running": `SlurmHandle.ran` stays
true from its first run, and `queued_end.running_text` said "was cancelled while
running" (failed before, on the one-node test cluster, tests/slurm_cluster.py). Its code
stays 143, a cancellation (test_slurm_requeued_cancel_code.py).

The node is drained before the requeue (the running job goes on): the requeued job
cannot start again, so it is surely pending when the scancel lands. (Without it, a plain
requeue's job waits only its BeginTime, cred_expire: 5 s on the test cluster, and a
scancel sent later on a loaded machine would find it running.) The states seen after
the requeue are checked to hold no RUNNING (the oracle that it was cancelled pending);
the node is resumed after."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from launcher_said import one_line, said_in_log
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, finish
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

LOGGER = "melissa_trainer.launcher.backends.slurm"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("requeue", ["requeue", "requeuehold"])
def test_a_requeued_job_cancelled_while_pending_is_not_said_cancelled_while_running(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    requeue: str,
) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path)
    backend.begin_study(f"requeuedcancel{requeue}")
    log = tmp_path / "sim-0.log"
    states: list[str | None] = []
    drained = False

    def seen() -> str | None:
        assert backend.poll(handle) is None, states  # (alive until the scancel)
        if not states or states[-1] != handle.state:
            states.append(handle.state)
        return handle.state

    try:
        handle = backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path, log_path=log))
        assert isinstance(handle, SlurmHandle)
        wait_until(
            lambda: seen() == "RUNNING" and backend.started(handle),
            what="the first run",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        node = f"NodeName={slurm_cluster.node}"
        slurm_cluster.run("scontrol", "update", node, "State=DRAIN", "Reason=held-by-test")
        drained = True
        slurm_cluster.run("scontrol", requeue, handle.job_id)
        wait_until(
            lambda: seen() == "PENDING",
            what=lambda: f"the job back in the queue; states seen: {states}",
            timeout=UNTIL_TEST_TIMEOUT,
            interval=0.05,
        )
        slurm_cluster.run("scancel", handle.job_id)  # a user's, while it waits again
        code = finish(backend, handle, timeout=60)
    finally:
        backend.close()
        if drained:
            slurm_cluster.run(
                "scontrol", "update", f"NodeName={slurm_cluster.node}", "State=RESUME"
            )
    after = states[states.index("RUNNING") + 1 :]
    assert "RUNNING" not in after, states  # (cancelled pending, not started again)
    assert code == 143 and handle.final == "CANCELLED", (code, handle.final)
    said = [
        one_line(r.getMessage())
        for r in caplog.records
        if r.levelno >= logging.WARNING and "cancelled" in one_line(r.getMessage())
    ]
    assert len(said) == 1, said
    assert "cancelled while running" not in said[0], said
    assert said[0].startswith(
        f"sim-0 (Slurm job {handle.job_id}) was cancelled after Slurm requeued it, "
        "while queued again or just as it started again (squeue listed it back in the queue "
        "after it had run, then CANCELLED), not by the study"
    ), said
    assert "LauncherTuning.max_restarts" in said[0], said
    assert said[0] in "\n".join(said_in_log(log.read_text()))
