"""The directory a rendezvous typo's hint names ("did you mean DIR?",
`rendezvous_words.missing_note`) is a running trainer's when one of the close names
leads to one, the most recently modified of them; else the closest, said to be a stopped
run's when its rank files are of no running trainer. Before, the closest name alone
(difflib's) chose, and the hint sent a solver to an older run's rendezvous, its trainer
stopped, past the running one's.

Real directories: a running trainer's files are a real `Receiver`'s; a stopped one's are
marked stopped as a trainer does (`mark_stopped`); real `Client`s and `Predictor`s."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from helpers import running

from melissa_trainer.client import Client, ClientTuning, Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.client.rendezvous_words import STOPPED_RUN
from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous

pytestmark = pytest.mark.timeout(60)
FIELDS = {"u": ((2,), np.float64)}
HOUR_NS = 3600 * 10**9


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """A solver started by hand: its endpoints from MELISSA_TRAINER_RENDEZVOUS only."""
    for name in (
        "MELISSA_TRAINER_ENDPOINTS",
        "MELISSA_TRAINER_RUN_ID",
        "MELISSA_TRAINER_ATTEMPT",
        "MELISSA_TRAINER_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def stopped_run(rendezvous: Path) -> None:
    """A finished trainer's rendezvous: its file, marked stopped."""
    write_rendezvous(rendezvous, 0, 1, "tcp://127.0.0.1:9", {"run_id": "old"})
    mark_stopped(rendezvous, 0, "tcp://127.0.0.1:9")


def aged(path: Path, hours: int) -> None:
    """`path` modified `hours` ago (which run is the more recent)."""
    then = os.stat(path).st_mtime_ns - hours * HOUR_NS
    os.utime(path, ns=(then, then))


def start_error(typo: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(typo))
    with pytest.raises(TimeoutError) as caught:
        Client(FIELDS, simulation_id=1, tuning=ClientTuning(rendezvous_timeout=0.2))
    return str(caught.value)


def test_the_running_trainers_directory_is_meant_over_a_closer_stopped_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    """study_b (closer to study_c, its trainer stopped) and study_new (its trainer
    running): the hint names study_new, at a client's start and at a request."""
    stopped_run(tmp_path / "study_b" / "rendezvous")
    typo = tmp_path / "study_c" / "rendezvous"
    with running(rendezvous_dir=str(tmp_path / "study_new" / "rendezvous"), run_id="new"):
        said = start_error(typo, monkeypatch)
        predictor = Predictor(1, rendezvous_dir=typo)
        try:
            with pytest.raises(PredictTimeout) as request:
                predictor.predict({"u": np.zeros(2)}, timeout=0.2)
        finally:
            predictor.close()
    meant = f"; did you mean {tmp_path / 'study_new' / 'rendezvous'}?"
    assert meant in said and "study_b" not in said, said  # (before: study_b)
    assert meant in str(request.value) and "study_b" not in str(request.value), request.value


def test_of_two_running_trainers_the_more_recent_is_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    """study_b (closer, its trainer running, its rendezvous written an hour before) and
    study_new (running, written now): the more recent."""
    older = tmp_path / "study_b" / "rendezvous"
    with (
        running(rendezvous_dir=str(older), run_id="old"),
        running(rendezvous_dir=str(tmp_path / "study_new" / "rendezvous"), run_id="new"),
    ):
        aged(older, 1)
        said = start_error(tmp_path / "study_c" / "rendezvous", monkeypatch)
    assert f"; did you mean {tmp_path / 'study_new' / 'rendezvous'}?" in said, said


def test_a_stopped_runs_directory_alone_is_said_to_be_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    stopped_run(tmp_path / "study_b" / "rendezvous")
    said = start_error(tmp_path / "study_c" / "rendezvous", monkeypatch)
    meant = f"; did you mean {tmp_path / 'study_b' / 'rendezvous'}?{STOPPED_RUN}"
    assert said.endswith(meant), said
    # (control: a directory meant without rank files, a trainer to come: no such words)
    (tmp_path / "study_b" / "rendezvous" / "rank_0.json").unlink()
    said = start_error(tmp_path / "study_c" / "rendezvous", monkeypatch)
    assert said.endswith(f"; did you mean {tmp_path / 'study_b' / 'rendezvous'}?"), said
