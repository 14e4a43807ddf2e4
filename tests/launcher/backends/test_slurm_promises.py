"""Promises of docs/how-to/slurm.md that no test checked, checked on the one-node test
cluster (tests/slurm_cluster.py):

* "Environment": a job gets the trainer's environment through ``sbatch --export=ALL``,
  "which overrides a site's ``SBATCH_EXPORT``", while "``SBATCH_*`` (your defaults for
  sbatch, e.g. ``SBATCH_ACCOUNT``) still apply".
* "A controller restart": "``squeue`` failing leaves the jobs as they were ("squeue
  failed (jobs are kept as they were)"); the next poll asks again", said once.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from slurm_jobs import POLL, PYTHON, finish
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.launcher.backends import Job, SlurmBackend
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

ENV_DUMP = "import json, os; json.dump(dict(os.environ), open('env.json', 'w'))"


@pytest.mark.timeout(120)
def test_a_sites_sbatch_export_none_is_overridden_and_sbatch_defaults_still_apply(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SBATCH_EXPORT", "NONE")  # a site's default: no PATH in the job
    monkeypatch.setenv("SBATCH_TIMELIMIT", "7")  # a user's default for sbatch (--time)
    monkeypatch.setenv("MELISSA_TEST_TRAINERS", "from the trainer")
    backend = SlurmBackend(poll_every=POLL, script_dir=tmp_path / "scripts")
    backend.begin_study("sbatchexport")
    try:
        handle = backend.launch(Job("env", [PYTHON, "-c", ENV_DUMP], {}, tmp_path))
        assert finish(backend, handle) == 0
    finally:
        backend.close()
    env = json.loads((tmp_path / "env.json").read_text())
    assert env["PATH"] == os.environ["PATH"]
    assert env["MELISSA_TEST_TRAINERS"] == "from the trainer"
    assert isinstance(handle, SlurmHandle)
    limit = slurm_cluster.run("squeue", "-h", "-t", "all", "-j", handle.job_id, "-o", "%l")
    assert limit.strip() == "7:00"


@pytest.mark.timeout(180)
def test_a_failing_squeue_keeps_the_jobs_as_they_were_said_once(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING", logger="melissa_trainer.launcher.backends.slurm")
    # poll_every=0: every poll asks squeue (none answered from the cache)
    backend = SlurmBackend(poll_every=0, script_dir=tmp_path / "scripts", controller_wait=0)
    backend.begin_study("squeuefails")
    try:
        handle = backend.launch(Job("sim-0", ["sleep", "600"], cwd=tmp_path))
        wait_until(
            lambda: backend.poll(handle) is None and backend.started(handle),
            what="the job to run",
            timeout=UNTIL_TEST_TIMEOUT,
        )
        with slurm_cluster.controller_paused():  # each squeue fails after MessageTimeout
            for _ in range(2):
                assert backend.poll(handle) is None
                assert backend.started(handle)
        said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(said) == 1 and said[0].startswith(
            "squeue failed (jobs are kept as they were): "
        ), said
        slurm_cluster.run("scancel", handle.job_id)  # (the controller answers again)
        assert finish(backend, handle, timeout=60) == 143  # the next polls asked again
    finally:
        backend.close()
