"""A study whose launcher fails for good while rank 1 starves fails the run at once,
with the launcher's words (`melissa_trainer.study.progress`: rank 0 publishes the
failure; `study.starvation`: rank 1's wait reads it). The script:
tests/scripts/starved_rank_study_fails.py.

A user trial (2026-12-01, 2 ranks, odd simulations failing, every sample on rank 0):
the launcher gave up ("7 simulations failed for good, more than the 6 that
LauncherTuning.min_finished_fraction=0.5 allows"), then nothing was said for
stall_timeout (600 s) while both ranks sat at step 0: rank 0, blocked in the step
agreement on rank 1, never read its source (which raises the launcher's error), and its
progress file was no longer rewritten, so rank 1's deadlock check never fired; then rank
1's StarvedRankError blamed routing and batch size, quoting rank 0's state of 10 minutes
before as current. Before the fix this run hung until the launch was killed (no exit
record: the test failed on its missing file)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from two_ranks import run_study_script

SCRIPT = Path(__file__).parents[1] / "scripts" / "starved_rank_study_fails.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]


@pytest.mark.timeout(180)
def test_a_study_that_fails_while_a_rank_starves_fails_the_run_at_once(tmp_path: Path) -> None:
    # (stall_timeout 600 s, far beyond the launch's 150 s: a run that waited for it is
    # killed without exit records, which `run_study_script` reports; the records and
    # words below say which path ended it, no clock read)
    proc, ends, said = run_study_script(SCRIPT, tmp_path, "16", "600", timeout=150)
    assert proc.returncode != 0, said
    assert ends == [{"ended": "RankFailed", "steps": 0}, {"ended": "SourceError", "steps": 0}]
    lines = proc.stderr.splitlines()
    (full,) = [x for x in lines if x.startswith("training stopped at step 0")]
    # the launcher's own words lead rank 1's error, not starvation advice
    assert full.startswith("training stopped at step 0: the simulation study failed: "), said
    assert "failed for good" in full and "min_finished_fraction=1.0" in full, said
    assert "Fix: a smaller batch_size" not in proc.stderr, said
    # rank 0 stops with rank 1's error: its stop record names the study's failure
    (zero,) = [x for x in lines if x.startswith("rank 1 failed:")]
    assert "SourceError: the simulation study failed: " in zero, said
    assert "rank 0 stops at step 0 with it" in zero, said
