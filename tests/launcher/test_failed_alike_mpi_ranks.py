"""Severity LOW. A user trial (a 2-rank Fortran solver under ``mpiexec`` that called
``MPI_Abort`` at start on every simulation): the study's error said "2 simulations (0, 2)
failed alike" and, as a separate kind, "2 simulations (1, 3) failed alike", the same
solver line quoted under both. The report grouped failures by the log's last line, which
was MPICH's banner of whichever rank aborted first (``Abort(1) on node 0 (rank 0 in comm
0): ...`` or ``... node 1 (rank 1 ...``), while the study's own stop on a systematic
failure compares the failure line (banners passed over, rank numbers masked). Now the
report groups by that same key: one kind of four.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.launcher.reports import failure_report

SOLVER_LINE = " fisher: asked to fail at start"


def banner(rank: int) -> str:
    return (
        f"Abort(1) on node {rank} (rank {rank} in comm 0): application called "
        f"MPI_Abort(MPI_COMM_WORLD, 1) - process {rank}"
    )


@pytest.mark.timeout(30)
def test_ranks_aborting_first_in_turn_are_one_kind(tmp_path: Path) -> None:
    logs = {}
    for sid in range(4):
        first = sid % 2  # the rank whose banner comes last differs between simulations
        logs[sid] = tmp_path / f"sim-{sid}.log"
        logs[sid].write_text(f"{SOLVER_LINE}\n{SOLVER_LINE}\n{banner(first)}\n")
    failed = [(sid, f"simulation {sid} failed", (1, 1, 1)) for sid in range(4)]
    lines = failure_report(failed, logs.__getitem__, tmp_path)
    kinds = [line for line in lines if "failed alike" in line]
    assert len(kinds) == 1, lines
    assert "4 simulations (0, 1, 2, 3) failed alike" in kinds[0]


@pytest.mark.timeout(30)
def test_different_solver_lines_stay_apart(tmp_path: Path) -> None:
    logs = {}
    for sid, said in enumerate(("diverged at step 3", "mesh file not found")):
        logs[sid] = tmp_path / f"sim-{sid}.log"
        logs[sid].write_text(f"{said}\n{banner(0)}\n")
    failed = [(sid, f"simulation {sid} failed", (1,)) for sid in range(2)]
    lines = failure_report(failed, logs.__getitem__, tmp_path)
    assert not [line for line in lines if "failed alike" in line], lines
