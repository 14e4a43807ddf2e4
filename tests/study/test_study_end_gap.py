"""A study whose rank 1 lacks a simulation that rank 0's launcher counts finished: rank 1
is told the study's end by rank 0 (`study.end_notice`, STUDY_END) and fails at once,
naming the simulation, its rank and the fix; before, it waited in silence for its stall
timeout (600 s) while rank 0 waited at the end of its loop.

Two ranks in one process (no process group: a fresh study has no collective before the
launcher starts), real `Study` objects sharing one rendezvous, real solver processes
whose messages to rank 1 are lost for one simulation (``DROP``). The reader of rank 1
waits on the stream's own events (`wait_for`), bounded by a deadline that fails the
test (before the fix: rank 1 still waits there).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from melissa_trainer import (
    FIFOBuffer,
    Launcher,
    LauncherTuning,
    ReceiverConfig,
    SourceError,
    StreamSource,
    Study,
)
from melissa_trainer.launcher import LocalBackend

SCRIPTS = Path(__file__).parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))
#: the solver: 4 steps round robin to the ranks, its messages to rank 1 lost for DROP
from study_end_gap import SOLVER  # noqa: E402

N = 3


def study(script: Path) -> Study:
    launcher = Launcher(
        [sys.executable, str(script)],
        [{"a": float(i)} for i in range(N)],
        N,
        job_limit=N,
        backend=LocalBackend(),
        env={"DROP": "1", "STEPS": "4"},
        tuning=LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=0),
    )
    return Study(launcher, StreamSource(ReceiverConfig()))  # (stall_timeout: 600 s)


def read(source: Study, buffer: FIFOBuffer, deadline: float) -> int:
    """Read `source` as a trainer's rank would, to the end of its stream; the number of
    samples read. AssertionError past `deadline` (monotonic)."""
    read = 0
    while time.monotonic() < deadline:
        source.wait_for(4, 0.2)  # (the stream's wait: its events, not a sleep)
        try:
            batch = buffer.get_batch(4, timeout=0.0)
        except TimeoutError:
            continue
        if not batch:
            return read
        read += len(batch)
    raise AssertionError("the stream still waits: nothing told this rank the study ended")


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_rank_that_lacks_a_finished_simulation_is_told_and_fails_naming_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "solver.py"
    script.write_text(SOLVER)
    out = tmp_path / "out"
    ranks = [study(script), study(script)]
    buffers = [FIFOBuffer(64), FIFOBuffer(64)]
    for rank, (source, buffer) in enumerate(zip(ranks, buffers, strict=True)):
        source.configure(str(out))
        source.start(buffer, rank, 2)
    try:
        for source in ranks:
            source.on_all_ranks_started()  # (rank 0 launches the solvers)
        deadline = time.monotonic() + 60
        assert read(ranks[0], buffers[0], deadline) == N * 2  # rank 0 has everything
        with pytest.raises(SourceError) as info:
            read(ranks[1], buffers[1], deadline)
    finally:
        for source in reversed(ranks):
            source.stop()
    message = str(info.value)
    assert "rank 1 lacks the data of 1 of the 3 simulations whose process ended" in message
    assert "simulation 1: rank 1's receiver has no HELLO from it" in message
    assert "A run resumed from a checkpoint runs it again" in message
    notice = ranks[0]._end_notice
    assert notice is not None and notice.told.is_set() and notice.ranks == [1]
