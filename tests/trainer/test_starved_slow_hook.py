"""A slow hook on rank 0 alone, while rank 1 starves and rank 0's state is the
deadlock's (`melissa_trainer.study.starvation`): rank 1 does not call it a deadlock,
however long the hook takes; once rank 0 leaves it and blocks in the step agreement
(a real deadlock: nothing feeds rank 1), rank 1 says so. Before, rank 1 failed the run
about 26 s into the hook.

The hook waits for a file the test creates (tests/scripts/starved_rank_slow_hook.py)
once rank 0 has published, for longer than the deadlock then took to be said, that it
is in its hook with the deadlock's state, and rank 1 has not failed."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from two_ranks import run_study_script

from melissa_trainer.study.progress import PROGRESS_FILE, REFRESH, read_progress
from melissa_trainer.study.starvation import DEADLOCK_GRACE

SCRIPT = Path(__file__).parents[1] / "scripts" / "starved_rank_slow_hook.py"
#: rank 0's published seconds in the deadlock's state (receiver held), in its hook,
#: past which rank 1 had called it a deadlock before (two writes a grace apart, and
#: rank 1's reads of the file every second), with room
HELD = DEADLOCK_GRACE + 2 * REFRESH + 5.0

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo"),
]


def wait_until(what: str, ready: Any, launch: threading.Thread, limit: float) -> Any:
    """Poll `ready()` (a file the ranks write) until it returns something; fail if the
    launch ended first or `limit` s passed."""
    deadline = time.monotonic() + limit
    while True:
        said = ready()
        if said:
            return said
        assert launch.is_alive(), f"the launch ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {limit:.0f} s"
        time.sleep(0.2)  # (a poll of the ranks' files, not a synchronisation)


@pytest.mark.timeout(300)
def test_a_slow_hook_on_rank_0_alone_is_no_deadlock_but_a_block_after_it_is(
    tmp_path: Path,
) -> None:
    result: list[Any] = []
    launch = threading.Thread(
        target=lambda: result.append(
            run_study_script(SCRIPT, tmp_path, "16", timeout=240)
        ),  # fmt: skip
        daemon=True,
    )
    launch.start()
    rendezvous = tmp_path / "out" / "rendezvous"

    def stuck_in_hook() -> dict[str, Any] | None:
        said = read_progress(rendezvous, _run_id(rendezvous))
        if not said or said.get("own_work_for") is None:
            return None
        held = said.get("backpressured_for")
        stuck = said.get("starving") == [1] and said.get("lifted") and said.get("running") == 0
        if stuck and said.get("held_by_bound") and held is not None and held >= HELD:
            return said
        return None

    try:
        wait_until("in-hook file", lambda: (tmp_path / "in-hook").exists(), launch, 120)
        said = wait_until("deadlock's state while in the hook", stuck_in_hook, launch, 150)
        assert said["own_work_for"] >= HELD and said["reads"] == 0, said
        assert launch.is_alive() and not (tmp_path / "exit-1.json").exists(), said
    finally:
        (tmp_path / "release").write_text("")  # (also on a failure: the ranks end)
    launch.join(260)
    assert not launch.is_alive()
    proc, ends, out = result[0]
    assert proc.returncode != 0, out
    assert ends == [{"ended": "RankFailed", "steps": 0}, {"ended": "SourceError", "steps": 0}]
    (full,) = [x for x in proc.stderr.splitlines() if x.startswith("training stopped at step 0")]
    assert "A deadlock, stopped now rather than after stall_timeout" in full, out


def _run_id(rendezvous: Path) -> str | None:
    """The run's id, as rank 0's progress file says (this test reads rank 0's file)."""
    try:
        said = json.loads((rendezvous / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return said.get("run_id") if isinstance(said, dict) else None
