"""The C client, waiting for a rendezvous directory that does not exist, says so early
(clients/c/src/rendezvous.c, 3 s in: one line on stderr naming the path, the variable
and the wait; "a typo in MELISSA_TRAINER_RENDEZVOUS is likely" when not even the parent
exists) and keeps waiting: here the trainer publishes once the line was read, and the
solver streams to it (the oracle: its samples in the receiver's buffer). Before, it said
nothing until its rendezvous timeout (60 s) ran out. The Python client's: tests/client/
test_rendezvous_typo.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running
from predict_script import Script

from melissa_trainer.buffers import FIFOBuffer

pytestmark = pytest.mark.e2e  # it starts a process


@pytest.mark.timeout(120)
@pytest.mark.parametrize("parent_exists", [False, True])
def test_a_missing_rendezvous_is_said_early_and_still_waited_for(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    parent_exists: bool,
) -> None:
    parent = tmp_path / ("out" if parent_exists else "ouptut")
    if parent_exists:
        parent.mkdir()
    rendezvous = parent / "rendezvous"
    script = Script(script_exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous)})
    try:
        started = script.send("id 3", "field u 1 1 4", "start")
        assert script.proc.stderr is not None
        notice = script.proc.stderr.readline()  # (blocks: before the fix, until the timeout)
        assert f"MELISSA_TRAINER_RENDEZVOUS={rendezvous}: the directory does not exist" in notice
        assert "waiting up to 60.0 s in all" in notice and "to create it" in notice, notice
        assert ("a typo in MELISSA_TRAINER_RENDEZVOUS is likely" in notice) == (not parent_exists)
        # (a solver may start before its trainer: the Python client says the same)
        assert ("unless its trainer has not started yet" in notice) == (not parent_exists)
        buffer = FIFOBuffer(10)
        with running(buffer=buffer, rendezvous_dir=rendezvous, expected_simulations=1):
            assert script.wait(started)[-1].startswith("0"), script.seen[started]
            closed = script.send("send 0 u 1 4 7", "send 1 u 1 4 8", "close")
            assert script.wait(closed)[-1].startswith("0"), script.seen[closed]
            samples = buffer.get_batch(2, timeout=30)
        _, err = script.finish()
    finally:
        script.kill()
    assert sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples) == [
        (3, 0),
        (3, 1),
    ]
    assert "waiting up to" not in err  # (said once)
