"""A batch job cancelled while still queued says so (trial htrial15, s6: a ``scancel`` of
a PENDING job was reported ``simulation 2 attempt 0 failed (exit 1, 2.0 s)``, with
nothing in the simulation's log for that attempt). On the one-node cluster of
tests/slurm_cluster.py, jobs held in the queue with ``--begin``: one cancelled by a
``scancel`` from outside (a warning on the console, and the line in the job's log),
one by the backend's own kill (the log only: the study knows it stopped it); and, run
by `Launcher`, the warning just before the launcher's line of the failed attempt."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from launcher_said import PREFIX, one_line, said_in_log
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from waiting import wait_until

from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends import Handle, Job, SlurmBackend
from melissa_trainer.launcher.backends.base import study_id

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

LOGGER = "melissa_trainer.launcher.backends.slurm"


def state(job_id: str) -> str:
    """squeue's own word (the oracle): the job's state."""
    return subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True
    ).stdout.strip()


def held(backend: SlurmBackend, here: Path) -> tuple[Handle, Path]:
    """A job held in the queue (it would fail if it ran), seen PENDING by the backend."""
    log = here / "sim-2.log"
    job = Job("sim-2", [sys.executable, "-c", "raise SystemExit(3)"], cwd=here, log_path=log)
    handle = backend.launch(job)
    wait_until(
        lambda: backend.poll(handle) is None and backend.queue_reason(handle) == "BeginTime",
        "the backend to see the job queued for its begin time",
        60,
        interval=0.05,
    )
    return handle, log


@pytest.fixture
def backend(slurm_cluster: SlurmCluster, tmp_path: Path):  # type: ignore[no-untyped-def]  # noqa: F811
    # held for 10 minutes: queued for the whole test, whatever the machine's load
    backend = SlurmBackend(
        poll_every=0.2, time_limit=5, extra_args=["--begin=now+600"], script_dir=tmp_path
    )
    yield backend
    backend.close()


@pytest.mark.timeout(120)
def test_a_queued_job_cancelled_by_scancel_says_so(
    backend: SlurmBackend,
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    handle, log = held(backend, tmp_path)
    job_id = handle.job_id  # type: ignore[attr-defined]
    slurm_cluster.run("scancel", job_id)
    wait_until(lambda: backend.poll(handle) is not None, "the cancelled job's end", 60)
    assert backend.poll(handle) == 1  # a failed attempt, as before
    assert state(job_id) in ("CANCELLED", "")  # (unlisted once Slurm forgets it)
    # (a WARNING cut into lines of 100 columns, as one line)
    said = [one_line(r.getMessage()) for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1, said
    assert f"Slurm job {job_id}" in said[0]
    assert "cancelled while queued" in said[0]
    assert "not by the study" in said[0] and "scancel" in said[0]
    assert "runs the simulation again while restarts are left" in said[0]
    # the simulation's log says it too (Slurm wrote nothing: the job never started)
    text = log.read_text()
    ours = said_in_log(text)  # (its lines, cut at 100 columns, joined back)
    assert all(line.startswith(PREFIX) for line in text.splitlines()), text
    assert len(ours) == 1 and said[0] in ours[0], text


@pytest.mark.timeout(120)
def test_a_queued_job_the_study_kills_says_so_in_its_log_only(
    backend: SlurmBackend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    handle, log = held(backend, tmp_path)
    backend.kill(handle, grace=1)
    assert backend.poll(handle) == 1
    assert not [r for r in caplog.records if r.name == LOGGER]
    text = "\n".join(said_in_log(log.read_text()))  # (cut at 100 columns, joined back)
    assert "cancelled while queued or just as it started (squeue last listed it PENDING" in text
    assert "by the study" in text and "not by the study" not in text, text


@pytest.mark.timeout(180)
def test_the_launcher_line_of_a_queued_job_scancelled_follows_the_warning(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING)
    launcher = Launcher(
        [sys.executable, "-c", "raise SystemExit(3)"],
        [{"a": 0.0}],
        1,
        job_limit=1,
        backend=SlurmBackend(
            poll_every=0.2, time_limit=5, extra_args=["--begin=now+600"], script_dir=tmp_path
        ),
        tuning=LauncherTuning(poll_interval=0.05, max_restarts=1),
    )
    launcher.start(tmp_path / "rendezvous", study_dir=tmp_path / "study")
    name = f"mt-{study_id(tmp_path / 'study')}-sim-0"
    try:
        wait_until(lambda: launcher.queued() == (1, {"BeginTime": 1}), "the job queued", 60)
        out = slurm_cluster.run("squeue", "-h", "-n", name, "-o", "%i")
        slurm_cluster.run("scancel", out.split()[0])
        wait_until(lambda: "attempt 0 failed" in caplog.text, "the failed attempt's line", 60)
    finally:
        launcher.stop()
    said = [one_line(r.getMessage()) for r in caplog.records]
    (line,) = [i for i, text in enumerate(said) if "attempt 0 failed" in text]
    assert "cancelled while queued" in said[line - 1], said
    assert "exit 1" in said[line] and "restart 1 of 1" in said[line], said[line]
