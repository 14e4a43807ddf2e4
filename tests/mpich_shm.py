"""The shared-memory segments MPICH (ch4, 5.0.x) leaves in /dev/shm when an MPI job dies
before MPI_Finalize: named after the job's PMI key-value space, which ``srun
--mpi=pmi2`` calls "<job>.<step>", so a later step of the same name attaches to the
stale segment and fails in MPI_Init (docs/how-to/slurm.md, "A stale MPICH segment")."""

from __future__ import annotations

import os
from pathlib import Path

SHM = Path("/dev/shm")
#: step ids searched per job (a test's job runs one step, or a few)
MAX_STEPS = 16


def fnv1a(text: str) -> int:
    """32-bit FNV-1a: MPICH's hash of the key-value-space name (its ``world_id``)."""
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


def segment_names(kvs_name: str, node: int = 0) -> tuple[str, str]:
    """MPICH's names, in /dev/shm, for the segments of key-value space `kvs_name` on
    node `node` (its index in the job)."""
    world = f"{fnv1a(kvs_name):x}"
    return f"mpich_shm_{world}_{node}", f"mpich_vci_{world}_{node}"


def mpich_segments(job_ids: range, steps: int = MAX_STEPS) -> list[Path]:
    """The existing files in /dev/shm that MPICH names after these Slurm jobs' steps
    0..`steps` - 1 on node 0 (the test cluster's one node)."""
    present = set(os.listdir(SHM)) if SHM.is_dir() else set()
    names = (
        name for job in job_ids for step in range(steps) for name in segment_names(f"{job}.{step}")
    )
    return [SHM / name for name in names if name in present]
