"""The Slurm backend's own reading of a job's processes and segment names (no Slurm
needed): `job_pids` finds a process by the ``SLURM_JOB_ID`` of its environment, and
`pmi2_names` names the segments as the tests' independent `mpich_shm.segment_names`
does (checked against MPICH on the one-node cluster: test_slurm_killed_segments.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mpich_shm import segment_names

from melissa_trainer.launcher.backends.slurm.segments import job_pids, pmi2_names

needs_proc = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="no /proc (Linux only)")


def test_pmi2_names_are_mpichs_for_each_step_and_node() -> None:
    names = pmi2_names("4242", steps=2, nodes=3)
    expected = {
        name
        for step in range(2)
        for node in range(3)
        for name in segment_names(f"4242.{step}", node)
    }
    assert set(names) == expected and len(names) == len(expected)
    assert segment_names("4242.2")[0] not in names  # (step 2 not asked)


@needs_proc
@pytest.mark.e2e  # (it starts a process)
def test_job_pids_finds_a_process_by_its_slurm_job_id() -> None:
    env = {**os.environ, "SLURM_JOB_ID": "987654321"}
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        # Popen returns once the exec closed its error pipe, before the kernel has set the
        # new program's environment bounds: /proc/PID/environ can read empty until then
        # (CI, stop 75: found {}). A line from the child's Python comes after them.
        assert child.stdout is not None and child.stdout.readline() == b"up\n"
        found = job_pids(["987654321", "98765432", "1"])
        assert found.get("987654321") == [child.pid], found
        assert "98765432" not in found  # (a prefix of the id is another job)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    assert "987654321" not in job_pids(["987654321"])
