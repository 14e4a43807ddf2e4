"""What a stop's warning says of the steps' tasks on other nodes, when the Slurm
controller does not answer (`step_tasks.elsewhere`): from the trainer's
``SLURM_JOB_NUM_NODES`` (salloc and sbatch set it: "1" on the one-node test cluster).
Failed before: every allocation's warning said "those on other nodes run until the
controller answers again", a one-node allocation's too (test_slurm_srun_frozen_stop.py
checks the one-node words on the test cluster)."""

from __future__ import annotations

import pytest

from melissa_trainer.launcher.backends.slurm.step_tasks import elsewhere


@pytest.mark.timeout(10)
def test_one_node_has_no_task_elsewhere_and_more_nodes_say_theirs_run_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "1")
    assert elsewhere().startswith("the allocation has one node (SLURM_JOB_NUM_NODES=1)")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "4")
    assert "other nodes (SLURM_JOB_NUM_NODES=4) run until the controller answers" in elsewhere()
    monkeypatch.delenv("SLURM_JOB_NUM_NODES")
    assert "(SLURM_JOB_NUM_NODES=unset) run until" in elsewhere()
