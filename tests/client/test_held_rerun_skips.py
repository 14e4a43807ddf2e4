"""A simulation the launcher runs again after a resume sends only the steps its receivers'
checkpoint lacks (`melissa_trainer.client.rerun`), over real sockets and in-process
receivers: two training ranks' receivers (run A) take a first attempt's steps, which is
killed before its BYE; their checkpoint is taken; receivers of run B resume from it; the
second attempt (``MELISSA_TRAINER_ATTEMPT=1``: the launcher counts from 0) computes and
sends every step again.

The oracle: the DATA the resumed receivers got (their duplicates counter: each step the
checkpoint holds that came again; their put count: each step it lacked) and their
buffers (every step once). Before, the rerun re-sent every step: a heat resume dropped
100 duplicates."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import drain
from resumed_runs import CHECKPOINTS

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.stream.follow_server import FollowServer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.timeout(120)

SID = 4  # (even: step t to rank t % 2 under either routing, `wire.routing`)
FIELDS = {"u": ((3,), "<f4")}
STEPS = 10  # steps 0, 2, ... to rank 0; 1, 3, ... to rank 1 (t % 2)


def wait_until(what: str, ready: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll `ready` (a receiver's counter: no event to wait on) until true."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def field(t: int) -> np.ndarray:
    return np.full(3, t, dtype="<f4")


class Resumed:
    """Run A's two receivers, then run B's resumed from their checkpoint."""

    def __init__(self, tmp: Path) -> None:
        self.rendezvous = tmp / "rendezvous"
        self.buffers = [FIFOBuffer(100), FIFOBuffer(100)]
        self.receivers = [self._receiver(r, "run-a") for r in range(2)]
        for receiver in self.receivers:
            receiver.start()

    def _receiver(self, rank: int, run_id: str) -> Receiver:
        config = ReceiverConfig(
            expected_simulations=1, bind="tcp://127.0.0.1:*",
            rendezvous_dir=str(self.rendezvous), run_id=run_id,
        )  # fmt: skip
        return Receiver(self.buffers[rank], rank, 2, config)

    def resume(self, puts: list[int]) -> None:
        """Once rank r has put `puts[r]` samples: the checkpoint (each rank's record and
        buffer), run A stopped, run B resumed from it."""
        wait_until("run A's samples", lambda: [b.stats().put for b in self.buffers] == puts)
        records = [r.state_dict() for r in self.receivers]
        states = [b.state_dict() for b in self.buffers]
        for receiver in self.receivers:
            receiver.stop()
        self.buffers = [FIFOBuffer(100), FIFOBuffer(100)]
        self.receivers = []
        for rank in range(2):
            self.buffers[rank].load_state_dict(*states[rank])
            receiver = self._receiver(rank, "run-b")
            receiver.load_state_dict(records[rank])
            receiver.start()
            self.receivers.append(receiver)

    def close(self) -> None:
        for receiver in self.receivers:
            receiver.stop()


@pytest.fixture
def resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Resumed]:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)  # (a requeued job's: the tests')
    made = Resumed(tmp_path)
    try:
        yield made
    finally:
        made.close()


def attempt(monkeypatch: pytest.MonkeyPatch, number: int, run_id: str) -> Client:
    """Attempt `number` of the simulation, as the launcher starts it."""
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", str(number))
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", run_id)
    return Client(FIELDS, {}, simulation_id=SID)


def send(client: Client, steps: list[int]) -> None:
    for t in steps:
        client.send(t, u=field(t))
    client.flush()


@CHECKPOINTS
def test_a_rerun_sends_only_what_the_checkpoint_lacks(
    resumed: Resumed, monkeypatch: pytest.MonkeyPatch, before: list[int], puts: list[int]
) -> None:
    first = attempt(monkeypatch, 0, "run-a")
    send(first, before)
    resumed.resume(puts)  # (after the checkpoint, run A took the rest: lost with it)
    first.close(bye=False)  # killed before its BYE: the launcher runs it again
    again = attempt(monkeypatch, 1, "run-b")
    send(again, list(range(STEPS)))  # (the solver computes every step again)
    again.close()
    assert again.bye_counts == [STEPS // 2, STEPS // 2]  # (held steps counted)
    samples = [drain(b) for b in resumed.buffers]
    for rank, receiver in enumerate(resumed.receivers):
        figures = receiver.telemetry()
        # the oracle: no step the checkpoint holds came again but the first send (step
        # 0, rank 0's: a rerun's first send goes out at once, `rerun`); each it lacked came
        assert figures["duplicates"] == [1, 0][rank], (rank, figures)
        assert figures["samples_put"] == STEPS // 2, (rank, figures)
        assert receiver.completed() == [SID]
    steps = sorted(int(s["time_step"]) for rank in samples for s in rank)
    assert steps == list(range(STEPS))  # each once


@pytest.mark.parametrize(
    ("number", "restarts", "duplicates"),
    [(1, None, [1, 0]), (0, "1", [1, 0]), (0, None, [2, 2]), (0, "0", [2, 2])],
    ids=["launcher-restart", "slurm-requeue", "first-run-again", "restart-count-0"],
)
def test_a_rerun_in_the_same_run_skips_what_the_receivers_hold(
    resumed: Resumed,
    monkeypatch: pytest.MonkeyPatch,
    number: int,
    restarts: str | None,
    duplicates: list[int],
) -> None:
    """A rerun within a run (no resume): a launcher's restart (attempt 1), or a batch job
    Slurm requeued (attempt 0 kept, ``SLURM_RESTART_COUNT=1``), is answered from what the
    receivers hold now, so only its first send comes again (step 0, rank 0's). Attempt 0
    without a requeue is no rerun: it asks nothing, every step comes again and the
    receivers' dedup drops steps 0-3. Before (the receivers answered from the record
    they loaded, none), both reruns also sent steps 0-3 again ([2, 2])."""
    first = attempt(monkeypatch, 0, "run-a")
    send(first, [0, 1, 2, 3])
    wait_until("the first attempt's samples", lambda: resumed.buffers[1].stats().put == 2)
    wait_until("the first attempt's samples", lambda: resumed.buffers[0].stats().put == 2)
    first.close(bye=False)
    if restarts is not None:
        monkeypatch.setenv("SLURM_RESTART_COUNT", restarts)
    again = attempt(monkeypatch, number, "run-a")
    send(again, list(range(STEPS)))
    again.close()
    assert again.bye_counts == [STEPS // 2, STEPS // 2]  # (held steps counted)
    samples = [drain(b) for b in resumed.buffers]
    figures = [r.telemetry() for r in resumed.receivers]
    assert [f["duplicates"] for f in figures] == duplicates, figures
    assert [r.completed() for r in resumed.receivers] == [[SID], [SID]]
    steps = sorted(int(s["time_step"]) for rank in samples for s in rank)
    assert steps == list(range(STEPS))  # each once


def test_a_first_run_in_a_requeued_allocation_asks_once_and_sends_every_step(
    resumed: Resumed, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A simulation of a ``mode="srun"`` study is a step of the trainer's allocation, and
    inherits the trainer's ``SLURM_RESTART_COUNT`` when Slurm requeued the trainer's job
    (tests/launcher/backends/test_slurm_srun_restart_count.py checks Slurm sets it in
    the steps). A simulation the requeued trainer launches for the first time (attempt
    0) then reads as a rerun: harmless, it asks each receiver once (HELD), is told none
    of its steps is held, and sends every one; nothing is dropped, nothing skipped."""
    asked: list[int] = []  # (ranks whose follow socket answered a HELD_QUERY)
    answer = FollowServer.answer

    def counted(server: FollowServer, query: bytes) -> bytes:
        asked.append(server._rank)  # (the follow thread's: appended once per query)
        return answer(server, query)

    monkeypatch.setattr(FollowServer, "answer", counted)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    first = attempt(monkeypatch, 0, "run-a")
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        send(first, list(range(STEPS)))
        first.close()
        wait_until("the receivers' end", lambda: all(r.completed() for r in resumed.receivers))
    assert sorted(asked) == [0, 1]  # once per receiver, at the first send
    assert first.bye_counts == [STEPS // 2, STEPS // 2]
    samples = [drain(b) for b in resumed.buffers]
    figures = [r.telemetry() for r in resumed.receivers]
    assert [(f["duplicates"], f["samples_put"]) for f in figures] == [(0, 5), (0, 5)], figures
    assert "its rerun skipped" not in caplog.text  # (the receivers' line of a skip)
    steps = sorted(int(s["time_step"]) for rank in samples for s in rank)
    assert steps == list(range(STEPS))  # each once
