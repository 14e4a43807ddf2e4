"""What a solver started by hand reads of a rendezvous it cannot use, in its final
error as in its early warning (a user trial):

* a typo in ``MELISSA_TRAINER_RENDEZVOUS``: the warning said "its parent ... does not
  exist either: a typo ... is likely"; the final `TimeoutError` dropped it. Both now
  carry it, and the directory likely meant ("did you mean .../output/rendezvous?").
* a finished trainer's rendezvous read "rank_0.json: its trainer ended: ..." AND "no
  rank_{r}.json file yet", two stories of which the second is false: now the first only.

Real directories and files (`write_rendezvous`, `mark_stopped`), real `Client`s; each
test failed before."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.stream import endpoints
from melissa_trainer.stream.endpoints import fetch_rendezvous, mark_stopped, write_rendezvous

pytestmark = pytest.mark.timeout(60)
FIELDS = {"u": ((2,), np.float64)}


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
    monkeypatch.setattr(endpoints, "NOTICE_AFTER", 0.1)


def test_a_typo_is_in_the_final_error_as_in_the_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "output").mkdir()  # the trainer's output directory (no rendezvous yet)
    typo = tmp_path / "ouptut" / "rendezvous"
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(typo))
    with (
        caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"),
        pytest.raises(TimeoutError) as caught,
    ):
        Client(FIELDS, simulation_id=1, tuning=ClientTuning(rendezvous_timeout=0.5))
    hint = (
        f"its parent {tmp_path / 'ouptut'} does not exist either: a typo in "
        "MELISSA_TRAINER_RENDEZVOUS is likely"
    )
    meant = f"did you mean {tmp_path / 'output' / 'rendezvous'}?"
    (warning,) = [
        r.getMessage() for r in caplog.records if "MELISSA_TRAINER_RENDEZVOUS=" in r.getMessage()
    ]
    said = str(caught.value)
    assert hint in warning and meant in warning, warning
    assert hint in said and meant in said, said  # (before: "the directory does not exist" only)
    assert "the directory does not exist" in said, said


def test_a_misspelt_last_part_gets_the_directory_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    write_rendezvous(tmp_path / "rendezvous", 0, 1, "tcp://127.0.0.1:9")
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendevous"))
    with pytest.raises(TimeoutError) as caught:
        Client(FIELDS, simulation_id=1, tuning=ClientTuning(rendezvous_timeout=0.2))
    said = str(caught.value)
    assert f"did you mean {tmp_path / 'rendezvous'}?" in said, said
    assert "a typo in" not in said, said  # (its parent exists: the trainer may come yet)


def test_a_path_that_may_yet_be_created_gets_no_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    # (the guard: the output directory is there, its rendezvous not yet: nothing is close)
    (tmp_path / "checkpoints").mkdir()
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path / "rendezvous"))
    with pytest.raises(TimeoutError) as caught:
        Client(FIELDS, simulation_id=1, tuning=ClientTuning(rendezvous_timeout=0.2))
    said = str(caught.value)
    assert "did you mean" not in said and "a typo" not in said, said


def ended(directory: Path, ranks: int) -> None:
    """A finished trainer's rendezvous: every rank's file marked stopped, its record
    saying that the study had its expected_simulations."""
    record = {"reason": {"code": "end", "message": "end of stream"}}
    record["expected_end"] = {"expected_simulations": 4}
    for rank in range(ranks):
        write_rendezvous(directory, rank, ranks, f"tcp://127.0.0.1:{5550 + rank}")
        mark_stopped(directory, rank, f"tcp://127.0.0.1:{5550 + rank}", record)


@pytest.mark.parametrize("ranks", [1, 2])
def test_a_finished_trainer_is_said_once_without_no_file_yet(tmp_path: Path, ranks: int) -> None:
    ended(tmp_path, ranks)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(tmp_path, timeout=0.0)
    said = str(caught.value)
    for rank in range(ranks):  # (one clause a file, as the C client's)
        ended_words = (
            f"rank_{rank}.json: its trainer ended: the study had its expected_simulations=4"
        )
        assert ended_words in said, said
    assert "no rank_{r}.json file yet" not in said, said  # (before: both)


def test_an_empty_rendezvous_still_says_no_file_yet(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError) as caught:  # (the guard)
        fetch_rendezvous(tmp_path, timeout=0.0)
    assert "no rank_{r}.json file yet" in str(caught.value)


def test_a_client_told_of_a_finished_trainer_reads_one_story(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, by_hand: None
) -> None:
    ended(tmp_path, 1)
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    with pytest.raises(TimeoutError) as caught:
        Client(FIELDS, simulation_id=9, tuning=ClientTuning(rendezvous_timeout=0.2))
    said = str(caught.value)
    assert "its trainer ended" in said and "no rank_{r}.json file yet" not in said, said
