"""A study failed on rank 0 of two, under a real launch (``accelerate launch --multi_gpu
--num_processes 2``, gloo on CPU), whose rank 1 is 3 s slower to stop its source than
rank 0: every rank still ends as the agreed failure says, rank 1 included (its line, its
own exit), never stopped by the launcher.

Before (`trainer.exit_meeting`), rank 0 exited as soon as its own end was done; the
launcher (torchrun's agent, which looks every 0.1 s) then sent SIGTERM to rank 1, still
stopping its source: rank 1 logged "SIGTERM received: stopping at the next stop
synchronisation to write a checkpoint", a stop nobody asked for, or was killed (-15) as
it exited. Now the ranks meet once their ends are done, and a SIGTERM that reaches a rank
as it exits after that meeting is the launcher's, ignored.

The run: tests/scripts/study_fails_two_ranks.py (its docstring says the study)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "study_fails_two_ranks.py"


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
@pytest.mark.timeout(300)
def test_a_rank_slower_at_its_end_exits_with_its_own_line_and_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import run_study_script

    proc, (zero, one), said = run_study_script(SCRIPT, tmp_path, "0", "1", timeout=220)
    assert zero["ended"] == "SourceError" and one["ended"] == "RankFailed", (zero, one, said)
    assert proc.returncode != 0, said
    step = zero["steps"]
    assert one["steps"] == step and one["last_save_step"] == step, (zero, one, said)
    # rank 1, slower, wrote its line, was never told to stop again, and exited itself
    assert "rank 0 failed: SourceError: the simulation study failed" in said, said
    assert f"rank 1 stops at step {step} with it, as every rank" in said, said
    assert "SIGTERM received" not in said, said
    assert "exitcode  : -15" not in said and "Signal 15" not in said, said
    for rank in range(2):
        assert (tmp_path / f"gone-{rank}").exists(), (rank, said)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
@pytest.mark.timeout(300)
def test_a_rank_slower_at_the_end_of_a_preemption_exits_143_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same race at a preemption (rank 0 sends itself SIGTERM at step 2): both ranks
    stop at one step with a checkpoint, and rank 1, slower at its end, exits 143 itself,
    says no second SIGTERM and is not killed (-15)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import run_study_script

    proc, (zero, one), said = run_study_script(SCRIPT, tmp_path, "2", "1", timeout=220)
    assert zero["ended"] == one["ended"] == "Preempted", (zero, one, said)
    step = zero["steps"]
    assert one["steps"] == step and one["last_save_step"] == step, (zero, one, said)
    assert said.count("SIGTERM received") == 1, said  # (rank 0's own, once)
    assert "exitcode  : -15" not in said and "Signal 15" not in said, said
    assert said.count("exitcode  : 143") in (1, 2), said  # (torchrun lists who exited)
    for rank in range(2):
        assert (tmp_path / f"gone-{rank}").exists(), (rank, said)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc")
@pytest.mark.timeout(300)
def test_the_ranks_meeting_waits_out_rank_0s_kill_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preemption whose rank 0 stops simulations that ignore SIGTERM: its stop lasts
    the study's `kill_grace`, longer than the meeting's own bound (made 0.5 s here; 120
    s in a real run, which a `kill_grace` of 120 s or more exceeds). Rank 1 waits for it
    (`Source.stop_bound`) and both exit 143 themselves. Before, rank 1 left the meeting
    at its bound ("did not meet every other rank"), exited, and torchrun SIGTERMed rank
    0 in the middle of its kills: its second "SIGTERM received", then its end at the
    agent's SIGKILL (-9), its simulations killed by no one."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "trainer"))
    from two_ranks import run_study_script

    proc, (zero, one), said = run_study_script(SCRIPT, tmp_path, "2", "grace", timeout=220)
    assert zero["ended"] == one["ended"] == "Preempted", (zero, one, said)
    assert "did not meet every other rank" not in said, said
    assert said.count("SIGTERM received") == 1, said  # (rank 0's own, once)
    assert "exitcode  : -15" not in said and "Signal 15" not in said, said
    assert "exitcode  : -9" not in said and "Signal 9" not in said, said
    for rank in range(2):
        assert (tmp_path / f"gone-{rank}").exists(), (rank, said)
