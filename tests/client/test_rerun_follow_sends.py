"""A launched rerun (``MELISSA_TRAINER_ATTEMPT=1``) that skips the steps its receivers
hold (`melissa_trainer.client.rerun`) and then follows a restarted trainer (a replay
window set: `ClientTuning.replay_bytes`) sends every later step to it: the skip answered
by the trainer it left says nothing of what the new one holds.

Run A's two receivers take the first attempt's ten steps, step 1 last (their early
checkpoint holds step 0 only, their late one all but step 1); run B resumes from the
late one, so the rerun's first send (step 0) asks B and skips it. Then run C resumes
from the early checkpoint; the rerun follows C at its next send (step 1, which B lacks:
sent). The oracle: C's BYE counts and buffers hold every step once, none twice. Before
the fix, the stale skip called steps 2-9 held: neither sent nor counted in C's BYE (of
one step each), which C accepted: lost silently."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from resumed_runs import Run
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, follow

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SID = 4  # (even: step t to rank t % 2 under either routing, `wire.routing`)
FIELDS = {"u": ((3,), "<f4")}
STEPS = 10


@pytest.fixture
def rendezvous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(where))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.delenv("MELISSA_TRAINER_REPLAY_BYTES", raising=False)
    monkeypatch.setattr(follow, "CHECK_INTERVAL", 0.0)  # (every send looks: deterministic)
    yield where


def send(client: Client, t: int) -> None:
    client.send(t, u=np.full(3, t, dtype="<f4"))


def test_a_rerun_that_follows_a_restarted_trainer_sends_every_later_step(
    rendezvous: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[Run] = []
    try:
        runs.append(Run(rendezvous, "run-a"))
        monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "0")
        monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "run-a")
        first = Client(FIELDS, {}, simulation_id=SID)
        send(first, 0)
        first.flush()
        early = runs[0].checkpoint([1, 0])
        for t in range(2, STEPS):
            send(first, t)
        first.flush()
        late = runs[0].checkpoint([5, 4])  # (all but step 1)
        send(first, 1)  # (taken after the checkpoint: lost with run A)
        first.flush()
        runs[0].checkpoint([5, 5])
        first.close(bye=False)  # killed before its BYE: the launcher runs it again
        runs[0].stop()
        runs.append(Run(rendezvous, "run-b", late))

        monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "1")
        monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "run-b")
        tuning = ClientTuning(replay_bytes=1 << 20, follow_timeout=30)
        again = Client(FIELDS, {}, simulation_id=SID, tuning=tuning)
        send(again, 0)  # (B holds it: skipped)
        assert again._skip is not None
        runs[1].stop()
        runs.append(Run(rendezvous, "run-c", early))  # (holds step 0 only)
        for t in range(1, STEPS):
            send(again, t)  # (step 1, not held by B, follows C first)
        again.close()
        assert again.run_id == "run-c"
        assert again.bye_counts == [STEPS // 2, STEPS // 2]

        # (a launched close does not wait for the trainer's receipt: what it delivered
        # may still be on its way into C's buffers, which a CI run once read as [1, 5])
        def put() -> list[int]:
            return [r.telemetry()["samples_put"] for r in runs[2].receivers]

        wait_until(lambda: put() == [5, 5], lambda: f"C's receivers to put 5 each: {put()}", 30.0)
        figures = [r.telemetry() for r in runs[2].receivers]
        # (the checkpoint's step 0 counted: its record keeps the count; none came twice)
        assert [f["samples_put"] for f in figures] == [5, 5], figures
        assert [f["duplicates"] for f in figures] == [0, 0], figures
        steps = sorted(int(s["time_step"]) for b in runs[2].buffers for s in drain(b))
        assert steps == list(range(STEPS))  # each once
    finally:
        for run in runs:
            run.stop()
