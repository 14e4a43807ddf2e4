"""A client that follows a restarted trainer asks the trainer it follows whether it took
the simulation (`melissa_trainer.client.admission_watch`, `AdmissionWatch.followed`):
trainer A took it; B, resumed in the same rendezvous, streams another study and refuses
the HELLO the client sends it when it follows; the client's next send then raises
`SimulationRefused` naming the field, as the first trainer's refusal would have. Before,
the watch asked A only: every send to B returned, its data all dropped, until the close.
A client whose followed trainer takes it is never told, and its new watch says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from test_admission_watch import external, watch_ended
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, follow
from melissa_trainer.client.admission import SimulationRefused

pytestmark = pytest.mark.timeout(120)

STUDY = {"u": ((4,), np.float64)}
OTHER = {"vort": ((4,), np.float64)}


@pytest.fixture
def rendezvous(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    external(monkeypatch, tmp_path)
    monkeypatch.setattr(follow, "CHECK_INTERVAL", 0.0)  # (every send looks: deterministic)
    yield tmp_path


def client() -> Client:
    tuning = ClientTuning(disconnected_timeout=2, follow_timeout=30)
    return Client(STUDY, {}, simulation_id=7, tuning=tuning)


def test_a_client_following_a_trainer_that_refuses_it_is_told_at_a_send(
    rendezvous: Path,
) -> None:
    c: Client | None = None
    try:
        with running(rendezvous_dir=rendezvous, fields=STUDY, run_id="run-a"):
            c = client()
            for t in range(3):
                c.send(t, u=np.full(4, t, np.float64))
            watch_ended(c)
            assert c._watch.admitted is True  # (A took it)
        with running(rendezvous_dir=rendezvous, fields=OTHER, run_id="run-b") as b:
            c.send(3, u=np.zeros(4))  # (follows B: its HELLO, the window's steps)
            assert c.run_id == "run-b"
            wait_until(b.refused, "B's refusal of the HELLO", interval=0.005)
            watch_ended(c)
            assert c._watch.admitted is False
            with pytest.raises(SimulationRefused) as caught:  # (before: sent, dropped)
                c.send(4, u=np.zeros(4))
            with pytest.raises(
                SimulationRefused, match="refused it, and dropped everything it sent"
            ):
                c.predict({"u": np.zeros(4)}, timeout=1.0)
    finally:
        if c is not None:
            c.close(bye=False)
    said = str(caught.value)
    assert "simulation 7: the trainer's receiver 0" in said, said
    assert "field 'u' is not one of the study's" in said, said


def test_a_client_following_a_trainer_that_takes_it_is_never_told(rendezvous: Path) -> None:
    with running(rendezvous_dir=rendezvous, fields=STUDY, run_id="run-a"):
        c = client()
        try:
            c.send(0, u=np.zeros(4))
            watch_ended(c)
            first = c._watch
        except BaseException:
            c.close(bye=False)
            raise
    try:
        with running(rendezvous_dir=rendezvous, fields=STUDY, run_id="run-b") as b:
            c.send(1, u=np.zeros(4))
            assert c.run_id == "run-b"
            watch_ended(c)
            assert c._watch is not first and c._watch.admitted is True  # (B was asked)
            for t in range(2, 5):
                c.send(t, u=np.zeros(4))
            c.close()
            assert b.refused() == []
    finally:
        c.close(bye=False)  # (a no-op once closed)
