"""One of two real training ranks running a study (``accelerate launch --multi_gpu
--num_processes 2``, gloo on CPU) SIGKILLed once the first checkpoint is complete
(tests/scripts/study_rank_killed.py: at its ``on_save``, an event). Rank 0 stops at its
next collective, stops its study, and its account waits for rank 1's last counts
(`EveryRankReport.final_words`): rank 1's process is dead on this host, its last word
will never come, and rank 0 says so and goes on at once.

Failed before (hdead, a user's trial: 18 s from the ``kill -9`` to the survivor's exit
under load): rank 0 waited `FINAL_WAIT`, 5 s, and said "the receiver of rank 1 wrote no
last counts within 5 s", as of a rank that might still write. The oracle: the survivor's
words (what it waited for), not a time; what it says of the checkpoint kept is
unchanged (tests/trainer/test_rank_killed_said.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

SCRIPT = Path(__file__).parents[1] / "scripts" / "study_rank_killed.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL, /proc for the pid's check"),
]


def test_the_survivor_waits_for_no_last_word_of_a_rank_known_dead(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import study_rank_killed  # (its SOLVER: the script's own solver source)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    solver = tmp_path / "solver.py"
    solver.write_text(study_rank_killed.SOLVER)
    out = tmp_path / "out"
    proc = launch_two_ranks(SCRIPT, str(out), str(solver), timeout=240)
    said = (out / "stderr-0.txt").read_text()
    tail = f"{said[-4000:]}\n--- launch ---\n{proc.stderr[-3000:]}"
    assert proc.returncode != 0 and "training ended" not in proc.stdout, tail
    assert (out / "exit-0.txt").read_text() == "RankGone 1\n", tail
    (line,) = [x for x in said.splitlines() if x.startswith("rank 0 stopped at step ")]
    assert "(rank 1, the only other: killed by a signal?" in line, tail
    assert f"resume from {out / 'checkpoints' / 'checkpoint-4'} with" in line, tail
    last = [x for x in said.splitlines() if "the receiver of rank 1 wrote no last counts" in x]
    assert len(last) == 1, tail
    assert "its process ended (known dead on this host)" in last[0], tail  # (before: "within 5 s")
