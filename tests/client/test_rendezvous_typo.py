"""A solver whose ``MELISSA_TRAINER_RENDEZVOUS`` names a directory that does not exist
says so early (`endpoints.NOTICE_AFTER` seconds, one WARNING naming the path, the
variable and the wait; "a typo ... is likely" when not even the parent exists), and
keeps waiting the whole `rendezvous_timeout`: a solver may start before its trainer
creates the directory. Before, it said nothing until the 60 s timeout.

The client runs in a thread against a real receiver that publishes only once the
warning was seen (an event, not a sleep): the oracle for "kept waiting" is that the
client connects and its data arrives."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.client.tuning import ClientTuning
from melissa_trainer.stream import endpoints
from melissa_trainer.stream.stop_record import StopReason

pytestmark = pytest.mark.timeout(120)


class Said(logging.Handler):
    """Collects the client's warnings; `seen` is set at the first."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.seen.set()


@pytest.fixture
def said(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(endpoints, "NOTICE_AFTER", 0.2)  # (the test's wait, not 3 s)
    handler = Said()
    logger = logging.getLogger("melissa_trainer.client.client")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("parent_exists", [False, True])
def test_a_missing_rendezvous_is_said_early_and_still_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said, parent_exists: bool
) -> None:
    parent = tmp_path / ("out" if parent_exists else "ouptut")
    if parent_exists:
        parent.mkdir()
    rendezvous = parent / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    outcome: list[Any] = []

    def solver() -> None:
        try:
            tuning = ClientTuning(rendezvous_timeout=90.0)
            with Client(simulation_id=1, fields={"u": ((2,), np.float64)}, tuning=tuning) as c:
                c.send(0, u=np.ones(2))
            outcome.append("closed")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=solver, daemon=True)
    thread.start()
    assert said.seen.wait(60), "no warning while waiting for the rendezvous"  # (before)
    (warning,) = said.messages
    assert f"MELISSA_TRAINER_RENDEZVOUS={rendezvous}: the directory does not exist" in warning
    assert "waiting up to 90 s in all (ClientTuning.rendezvous_timeout)" in warning
    assert "for the trainer to create it" in warning
    assert ("a typo in MELISSA_TRAINER_RENDEZVOUS is likely" in warning) == (not parent_exists)
    # a solver may start before its trainer, which creates the directory (and perhaps
    # its output directory): a user trial took "a typo is likely" for the whole story
    assert ("unless its trainer has not started yet" in warning) == (not parent_exists)
    assert outcome == []  # still waiting
    buffer = FIFOBuffer(10)
    with running(buffer=buffer, rendezvous_dir=rendezvous, expected_simulations=1):
        thread.join(60)
        assert outcome == ["closed"], outcome
    (sample,) = buffer.get_batch(1, timeout=5)
    assert int(sample["simulation_id"]) == 1  # the oracle: its data arrived
    assert len(said.messages) == 1  # (said once)


def test_a_solver_started_after_the_study_ended_is_told_why_it_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, said: Said
) -> None:
    """The trainer ended with its expected_simulations (the stop record's
    ``expected_end``): a solver started afterwards waits for a trainer that may be given
    more, and says early that the study needed no more simulations."""
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    fields = {"u": ((2,), np.float64)}
    with running(rendezvous_dir=tmp_path, run_id="run-a", expected_simulations=1) as receiver:
        with Client(simulation_id=0, fields=fields) as first:
            first.send(0, u=np.ones(2))
        assert receiver.ended
        receiver.note_stop(StopReason("end", "end of stream"))  # (as the trainer does)
    with pytest.raises(TimeoutError) as caught:
        Client(simulation_id=1, fields=fields, tuning=ClientTuning(rendezvous_timeout=1.0))
    (warning,) = said.messages
    ended = "its trainer ended: the study had its expected_simulations=1 and needs no more"
    assert ended in warning and "waiting up to 1 s in all" in warning, warning
    assert ended in str(caught.value)  # (before: "its trainer stopped")
