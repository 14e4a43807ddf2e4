"""A second copy of a finished simulation (same simulation id, started after the first's
BYE: a solver rerun by hand by mistake) against a real receiver, two real client
processes one after the other, then a third simulation that ends the stream.

Measured before the change (the same test): the second copy exits 0, each of its 5 steps
is dropped as a duplicate (10 samples put for 2 simulations, 5 duplicates), nothing is
trained twice, and nothing says that it ran for nothing: no WARNING at all. Kept: the
samples and counts. Failed before: no WARNING naming simulation 7 (`run_again`)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import drain, running
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer

CLIENT = str(Path(__file__).parents[1] / "scripts" / "stream_client.py")


def run_client(endpoint: str, sim: int) -> subprocess.CompletedProcess[str]:
    """One simulation of 5 time steps of a field of 4 float32, run to its end (BYE)."""
    args = [sys.executable, CLIENT, "--endpoints", endpoint, "--simulation-id", str(sim)]
    args += ["--steps", "5", "--field", "u:<f4:4"]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.e2e  # (three client processes: a few seconds)
@pytest.mark.timeout(120)
def test_a_second_copy_after_bye_is_said_and_trains_nothing_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    buf = FIFOBuffer(1000)
    receiver_log = caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver")
    with receiver_log, running(buf, expected_simulations=2) as rec:
        assert rec.endpoint is not None
        first = run_client(rec.endpoint, 7)
        assert first.returncode == 0, first.stderr
        wait_until(lambda: rec.telemetry()["simulations_finished"] == 1, "7 finished", 30)
        second = run_client(rec.endpoint, 7)  # (the mistaken copy: after the BYE)
        assert second.returncode == 0, second.stderr
        third = run_client(rec.endpoint, 8)  # (the stream's end: 2 expected)
        assert third.returncode == 0, third.stderr
        samples = drain(buf)
        tel = rec.telemetry()
    assert len(samples) == 10, len(samples)
    assert sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples) == [
        (sim, t) for sim in (7, 8) for t in range(5)
    ]
    assert tel["samples_put"] == 10 and tel["duplicates"] == 5, tel
    assert tel["simulations_finished"] == 2, tel
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "simulation 7 said HELLO again after it finished (its BYE read, 5 time step(s) held): "
        "what it sends now is dropped as duplicates, nothing is trained twice, and the "
        "trainer keeps its first run's data. Harmless if the launcher ran it again (an "
        "attempt that failed after its BYE); if it was started again by "
        "hand, the run was not needed, and a changed simulation needs a new simulation id"
    ], warned
