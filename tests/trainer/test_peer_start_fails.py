"""What a rank tells its clients when torchrun (``accelerate launch --multi_gpu
--num_processes 2 --max_restarts N``, gloo on CPU) SIGTERMs it because a peer failed,
its own `train()` started (its preemption handler installed, its receiver published):
tests/scripts/start_fails_rank.py, whose rank 1's source fails to start while rank 0
waits for it at the sources' barrier.

* A peer that failed with an exception names it (`starting.note_start_failure`: its
  note, read by rank 0 as `RankFailed`): rank 0's record says ``error`` with the
  restarts torchrun has left, 0 on its last attempt (``--max_restarts 0``: the first
  attempt; ``1``: the restart, which fails as the first did). Failed before: rank 0 took
  the peer for one killed by a signal and wrote ``preempted`` ("another rank is gone
  and left no note"), promising its solvers a resume that no launcher makes.
* A peer killed outright (``EXIT=1``: no Python runs, as after a SIGKILL) leaves no note:
  rank 0 cannot tell torchrun's teardown from a preemption, still writes ``preempted``
  (docs/how-to/preemption.md), and on the last attempt says that no restart follows
  (`launch_restarts.NO_RESTART_FOLLOWS`). Failed before: it did not say so.

* A peer whose script fails after its trainer's set-up and before its ``train()``
  (``BEFORE_TRAIN_FROM``: the user's code, uncaught) on the restart, after an attempt
  whose records promised it: the records say ``error``, no restart left, naming that
  error (`untrained_exit`: its note, and its source told, before it exits). Failed
  before: rank 0's rewrite named its own broken collective (gloo's "Connection closed
  by peer"), and the peer left no note.

The oracles: the rendezvous file rank 0's receiver wrote, read as JSON, the notes'
folder, and the error the script raises on rank 1."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from two_ranks import ROOT, launch_two_ranks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups"),
]

SCRIPT = ROOT / "tests" / "scripts" / "start_fails_rank.py"


def rank_zero_reason(tmp_path: Path, most: int, env: dict[str, str] | None = None) -> Any:
    """The launch of start_fails_rank.py with ``--max_restarts`` `most`: rank 0's stop
    record's reason once it ended (the launch fails: rank 1 fails on every attempt)."""
    rendezvous = tmp_path / "rv"
    args = ["--output_dir", str(tmp_path / "out"), "--rendezvous", str(rendezvous),
            "--resume_from_checkpoint", "latest", "--report_to", "none",
            "--disable_progress_bar"]  # fmt: skip
    proc = launch_two_ranks(
        SCRIPT, *args, env=env, timeout=150, launch=["--max_restarts", str(most)]
    )
    told = proc.stdout[-2000:] + proc.stderr[-6000:]
    assert proc.returncode == 1, told
    assert not (rendezvous / "rank_1.json").exists(), told  # (its receiver never started)
    entry = json.loads((rendezvous / "rank_0.json").read_text())
    assert entry["stopped"] is True, told
    return entry["stop_record"]["reason"]


@pytest.mark.timeout(200)
@pytest.mark.parametrize("most", [0, 1], ids=["max_restarts 0", "max_restarts 1"])
def test_a_peer_whose_start_fails_on_the_last_attempt_is_an_error(
    tmp_path: Path, most: int
) -> None:
    reason = rank_zero_reason(tmp_path, most)
    assert reason["code"] == "error" and reason["restarts_left"] == 0, reason
    assert reason["message"] == (
        "training stopped at step 0: RankFailed: rank 1 failed: OSError: rank 1's "
        f"receiver cannot start (attempt {most}) (see rank 1's log)"
    ), reason


@pytest.mark.timeout(200)
def test_a_peer_killed_outright_on_the_last_attempt_says_no_restart_follows(
    tmp_path: Path,
) -> None:
    reason = rank_zero_reason(tmp_path, 0, {"EXIT": "1"})
    assert reason["code"] == "preempted", reason
    assert reason["message"].startswith(
        "training stopped at step 0: another rank is gone and left no note of why"
    ), reason
    assert reason["message"].endswith(
        "; no restart left: torchrun restarts nothing, and a resumed trainer follows only "
        "if a person (or a scheduler's requeue) resumes it"
    ), reason


@pytest.mark.timeout(200)
def test_a_peer_failing_before_train_on_the_restart_is_named_in_the_records(
    tmp_path: Path,
) -> None:
    reason = rank_zero_reason(tmp_path, 1, {"BEFORE_TRAIN_FROM": "1"})
    error = "RuntimeError: rank 1's script fails before train() (attempt 1)"
    assert reason["code"] == "error" and reason["restarts_left"] == 0, reason
    assert reason["message"].startswith(
        "the restarted run (restart 1 of 1) failed before its receiver of rank 1 started; "
        f"no restart left: the launcher gave up, the run is not coming back on its own "
        f"({error}) (the failed run's record said error: "
    ), reason
    note = (tmp_path / "out" / ".rank-failures" / "rank-1").read_text().splitlines()
    assert note[1:] == [error], note  # (after the run's id)
