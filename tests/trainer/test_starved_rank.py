"""A rank that starves while another is back-pressured fails, saying why, instead of
hanging (`melissa_trainer.study.starvation`; the script: tests/scripts/starved_rank.py).

A user trial of 16 one-step simulations on 2 ranks sat at step 0, with no message,
until killed, also with ``stall_timeout=60``: rank 1 had no sample, rank 0 waited for
it in the step agreement, its reservoir's rate limiter held its inserts back, its
simulations waited on that back-pressure and the launcher started no more. The
routing ``(s + t) % W`` spreads one-step simulations, but the hang stays possible
whenever one rank gets fewer samples than a batch while the others fill: here every
simulation's one step goes to rank 0. Before the watch this run hung until the test's
timeout (rank 1's stall watchdog excused its silence as the start-up allowance,
600 s); with it, rank 1 fails once no sample has come for ``stall_timeout`` (5 s) and
rank 0 stops with it. Past that: rank 1 tells rank 0 it starves, rank 0's launcher
raises its bound on ended simulations awaiting their data for it (the simulations it
starts may feed it: the second test), and a deadlock that no simulation can end is
said at once, not after ``stall_timeout`` (600 s in the new tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from two_ranks import run_study_script

SCRIPT = Path(__file__).parents[1] / "scripts" / "starved_rank.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]


@pytest.mark.timeout(150)
def test_a_starved_rank_fails_the_run_saying_why_instead_of_hanging(tmp_path: Path) -> None:
    proc, ends, said = run_study_script(SCRIPT, tmp_path, "16", "5", timeout=120)
    assert proc.returncode != 0, said
    assert ends == [{"ended": "RankFailed", "steps": 0}, {"ended": "SourceError", "steps": 0}]
    (full,) = [x for x in proc.stderr.splitlines() if x.startswith("training stopped at step 0")]
    assert "rank 1 of 2 cannot train: it waits for a batch of 4 samples" in full, said
    assert "its buffer holds 0 samples, 0 received in all" in full, said
    # rank 0's state, as it published it (`study.progress`): its receiver back-pressured
    assert "Rank 0's receiver has waited for room in its buffer for" in full, said
    assert "Fix: a smaller batch_size" in full and "buffer='fifo'" in full, said
    (zero,) = [x for x in proc.stderr.splitlines() if x.startswith("rank 1 failed:")]
    assert "StarvedRankError" in zero and "rank 0 stops at step 0 with it" in zero, said
    assert not list((tmp_path / "out" / "checkpoints").glob("checkpoint-*")), said


@pytest.mark.timeout(200)
def test_a_starved_rank_in_a_certain_deadlock_fails_at_once_saying_why(tmp_path: Path) -> None:
    """stall_timeout 600: before, the run hung until the launch was killed (at 150 s
    here: no exit record). Now rank 0's launcher raises its bound for the starved rank
    (2 more simulations start: all for rank 0 again), and once nothing runs and the
    raised bound holds the rest back, rank 1 fails at once, saying it is a deadlock."""
    proc, ends, said = run_study_script(SCRIPT, tmp_path, "16", "600", timeout=150)
    assert proc.returncode != 0, said
    assert ends == [{"ended": "RankFailed", "steps": 0}, {"ended": "SourceError", "steps": 0}]
    (full,) = [x for x in proc.stderr.splitlines() if x.startswith("training stopped at step 0")]
    assert "rank 1 of 2 cannot train, and nothing can change that: it waits for a batch" in full
    assert "its buffer holds 0 samples, 0 received in all" in full, said
    assert "No simulation runs; rank 0's receiver has waited for room in its buffer" in full
    assert "more than its bound of 4 (2 x job_limit, raised for this starved rank" in full
    assert "A deadlock, stopped now rather than after stall_timeout" in full, said
    assert "Fix: a smaller batch_size" in full and "buffer='fifo'" in full, said
    (zero,) = [x for x in proc.stderr.splitlines() if x.startswith("rank 1 failed:")]
    assert "StarvedRankError" in zero and "rank 0 stops at step 0 with it" in zero, said
    assert not list((tmp_path / "out" / "checkpoints").glob("checkpoint-*")), said


@pytest.mark.timeout(200)
def test_the_simulations_the_raised_bound_starts_feed_the_starved_rank(tmp_path: Path) -> None:
    """The same study, but a simulation started while rank 0's bound is raised for the
    starved rank sends it 16 time steps (as one of many steps would, under the
    routing): it trains to the end. Before, nothing started it: the run hung (stall_timeout
    600) until the launch was killed."""
    proc, ends, said = run_study_script(SCRIPT, tmp_path, "16", "600", "1", timeout=150)
    assert proc.returncode == 0, said
    assert [e["ended"] for e in ends] == ["returned", "returned"], said
    assert ends[0]["steps"] == ends[1]["steps"] > 0, said
