"""`LauncherTuning.final_exit_codes` through a 2-task srun (``--kill-on-bad-exit``) on the
real one-node Slurm (tests/slurm_cluster.py): task 1 exits 3 while task 0 runs, srun
ends task 0 with SIGTERM and its status is 143 (seen here, Slurm 22.05: "srun: error:
vm: task 1: Exited with exit code 3", "_step_signal: Terminating StepId=...", "task 0:
Terminated"). The code looked up is task 1's own, read from srun's lines
(`exit_cause.own_exit`): the attempt is not restarted. Failed before: the 143 was looked
up, not one of the codes, and the simulation was restarted (attempt 1 ran)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from slurm_cluster import SlurmCluster, slurm_cluster  # noqa: F401 - the fixture
from waiting import wait_until

from melissa_trainer.launcher.backends import SlurmBackend
from melissa_trainer.launcher.launcher import Launcher
from melissa_trainer.launcher.reports import LauncherError
from melissa_trainer.launcher.tuning import LauncherTuning

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"), pytest.mark.e2e]

#: rank 1 exits 3 once rank 0 runs; rank 0 runs until srun ends it (no MPI: srun's
#: report of its tasks does not depend on it, as in test_srun_killed_rank.py)
SOLVER = """
import os, sys, time
from pathlib import Path

rank = int(os.environ["SLURM_PROCID"])
ready = Path(sys.argv[1])
print(f"rank {rank} running", flush=True)
if rank == 0:
    ready.touch()
    time.sleep(120)  # ended by srun's SIGTERM once rank 1 has failed
deadline = time.monotonic() + 60
while not ready.exists() and time.monotonic() < deadline:
    time.sleep(0.05)
sys.exit(3)
"""
SAID = (
    "exit 3 is one of LauncherTuning.final_exit_codes: not restarted (srun: task 1: "
    "Exited with exit code 3, first; srun's status 143: it ended the others)"
)


@pytest.mark.timeout(150)
def test_a_tasks_final_code_under_srun_is_not_restarted(
    slurm_cluster: SlurmCluster,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if slurm_cluster.cpus < 2:
        pytest.skip(f"the node has {slurm_cluster.cpus} CPU; a 2-task job needs 2")
    (tmp_path / "solver.py").write_text(SOLVER)
    launcher = Launcher(
        [sys.executable, str(tmp_path / "solver.py"), str(tmp_path / "rank0-ready")],
        [{"a": 0.0}],
        1,
        backend=SlurmBackend(poll_every=0.2, time_limit=5, srun_args=["--mpi=pmi2"]),
        ranks_per_simulation=2,
        log_dir=tmp_path / "logs",
        tuning=LauncherTuning(
            max_restarts=2, on_failure="abandon", systematic_failures=None, final_exit_codes=(3,)
        ),
    )
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    launcher.start(tmp_path / "rdv", study_dir=tmp_path)

    def ended() -> bool:
        launcher.check()
        return launcher.done

    try:  # its one attempt fails: the study of 1 fails (min_finished_fraction)
        with pytest.raises(LauncherError) as error:
            wait_until(ended, lambda: ("the study's failure", launcher.summary()), 120)
    finally:
        launcher.stop()
    log = (tmp_path / "logs" / "sim-0.log").read_text()
    said = [r.getMessage() for r in caplog.records]
    assert not any("attempt 1" in m for m in said), (said, log)  # (not restarted)
    assert not any("restart 1 of" in m for m in said), (said, log)
    # the study's error (1 simulation given up fails a study of 1): the attempt's end,
    # as srun's lines say, then why it was not restarted
    message = str(error.value).splitlines()[0]
    ended = "its last attempt: exit 143 (srun: task 1: Exited with exit code 3 first, then"
    assert ended in message and f"); {SAID}, and 1 simulation failed" in message, (message, log)
