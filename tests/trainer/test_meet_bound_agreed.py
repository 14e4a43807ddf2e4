"""The ranks' last meeting waits one bound on every rank, agreed at the start of
training (`exit_meeting.agree_meet_bound`: the largest of the ranks' `meet_timeout`s),
under a real launch (``accelerate launch --multi_gpu --num_processes 2``, gloo on CPU):
tests/scripts/meet_bound_two_ranks.py, whose docstring says the run.

Before, each rank waited its own source's `stop_bound`: a rank whose source said less
than rank 0's (a script with a smaller `kill_grace` there, another source) left the
meeting while rank 0 still stopped, exited, and torchrun SIGTERMed rank 0 in its stop.
And a bound past the process group's timeout was found at the end only (the backend
ended the meeting); it is now refused before training starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).parents[1] / "scripts" / "meet_bound_two_ranks.py"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(sys.platform != "linux", reason="torchrun's agent, as in CI"),
]


def _run(tmp_path: Path, mode: str) -> tuple[int, list[dict[str, Any]], str]:
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from two_ranks import launch_two_ranks
    finally:
        sys.path.remove(str(Path(__file__).parent))
    proc = launch_two_ranks(SCRIPT, str(tmp_path / "out"), mode, timeout=200)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    missing = [r for r in range(2) if not (tmp_path / f"exit-{r}.json").exists()]
    assert not missing, f"no exit record of rank(s) {missing}, code {proc.returncode}: {said}"
    ends = [json.loads((tmp_path / f"exit-{r}.json").read_text()) for r in range(2)]
    return proc.returncode, ends, said


@pytest.mark.parametrize("mode", ["preempt", "raising"])
def test_a_rank_whose_source_stops_sooner_waits_for_rank_0s_stop(tmp_path: Path, mode: str) -> None:
    """Rank 0's source takes `SLOW_STOP` s (15) to stop and says so; rank 1's says 0
    (or, `raising`, its `stop_bound` override raises: said at WARNING, counted 0). Both
    wait the agreed bound: no rank leaves the meeting, rank 0 is not SIGTERMed in its
    stop, both exit 143 themselves. Before, rank 1 left after its own `MEET` s ("did not
    meet every other rank"), and rank 0 got torchrun's SIGTERM while it stopped. (`MEET`
    was 3 s then; 10 s now, a margin for rank 0's end on a loaded machine.)"""
    code, (zero, one), said = _run(tmp_path, mode)
    assert zero["ended"].startswith("Preempted") and one["ended"].startswith("Preempted"), said
    assert zero["steps"] == one["steps"], (zero, one, said)
    assert "did not meet every other rank" not in said, said
    assert said.count("SIGTERM received") == 1, said  # (rank 0's own, once)
    assert "exitcode  : -15" not in said and "Signal 15" not in said, said
    for rank in range(2):
        assert (tmp_path / f"gone-{rank}").exists(), (rank, said)
    if mode == "raising":
        assert "stop_bound() failed (KeyError('kill_grace'))" in said, said


def test_a_meeting_longer_than_the_process_groups_timeout_is_refused_at_the_start(
    tmp_path: Path,
) -> None:
    """The process group's timeout (5 s: ``InitProcessGroupKwargs``) is below the
    meeting's agreed bound (25 s: the script's `MEET` + `SLOW_STOP`): a rank waiting
    there for rank 0 would be ended by the backend. Refused on every rank before any
    step, naming the bound, the group's timeout and what to change; said once (rank 0)."""
    code, (zero, one), said = _run(tmp_path, "short_group")
    assert code != 0, said
    for end in (zero, one):
        assert end["ended"].startswith("ConfigError"), (zero, one, said)
        assert end["steps"] == 0, (zero, one, said)
    text = zero["ended"]
    assert "may wait 25 s" in text and "process group's timeout, 5 s" in text, text
    assert "kill_grace" in text and "InitProcessGroupKwargs(timeout=" in text, text
    assert said.count("process group's timeout") == 1, said
