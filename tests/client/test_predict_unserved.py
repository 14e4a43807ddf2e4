"""A trainer that runs without a `ServingHook` (its receivers' ``rank_0.json`` live in the
rendezvous, no ``serve_0.json`` there) is said by a `Predictor`'s requests
(`predict_lookup.Unserved`): the timeout's error adds "the trainer is running but serves
no predictions: add ServingHook to its hooks (...)", and a WARNING once, 3 s
(`NOTICE_AFTER`) into the lookups counted over requests, says it while they wait.

Before, a user trial's solver lost its whole timeout at every step of every simulation,
told only "no trainer serves predictions there (yet)", and the trainer's log said
nothing. Not refused: a serving hook may publish after the receivers. Controls: a
rendezvous whose trainer stopped (its files marked stopped) says no such thing.

A rendezvous whose trainer ran and stopped (its ``rank_0.json`` marked stopped, with its
stop record) is said so (`predict_lookup.stopped_note`): "; the trainer that ran there
stopped (CODE: MESSAGE): a resumed one would serve there", at the timeout and in the
warning once. Before, a user trial read only "no trainer serves predictions there (yet)"
and waited for a first trainer.

A real `Receiver` (what a trainer's rank runs) writes the rendezvous file."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import running

from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.client.predict_lookup import UNSERVED
from melissa_trainer.stream.endpoints import NOTICE_AFTER
from melissa_trainer.stream.stop_record import StopReason

INPUTS = {"u": np.zeros(2, np.float32)}
FIELDS = {"u": ((2,), np.float32)}


def timeout_words(rendezvous: Path, timeout: float = 0.25) -> str:
    predictor = Predictor(3, rendezvous_dir=rendezvous)
    try:
        with pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=timeout)
    finally:
        predictor.close()
    return str(error.value)


@pytest.mark.timeout(60)
def test_a_trainer_running_without_serving_is_said_at_the_timeout(tmp_path: Path) -> None:
    rendezvous = tmp_path / "rv"
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a"):
        said = timeout_words(rendezvous)
    assert said == (
        f"no serving endpoint in '{rendezvous}' within 0.25 s: no trainer serves "
        f"predictions there (yet); {UNSERVED}"
    )
    assert "add ServingHook to its hooks (docs/how-to/serve-while-training.md)" in said
    # (control: the trainer stopped, its file marked so: nothing runs there to blame,
    # but the trainer that ran there is said, with its stop record's reason)
    assert timeout_words(rendezvous) == (
        f"no serving endpoint in '{rendezvous}' within 0.25 s: the trainer that ran there "
        "stopped (stopped: the receiver was stopped by its owner; no trainer serves "
        "predictions there): a resumed one would serve there"
    )


@pytest.mark.timeout(60)
def test_a_trainer_that_ran_and_stopped_is_said_with_its_stop_reason(tmp_path: Path) -> None:
    """A trainer preempted (its owner noted why before stopping it): the record's code and
    the first line of its message; an empty directory says no such thing (control)."""
    rendezvous = tmp_path / "rv"
    rendezvous.mkdir()
    assert timeout_words(rendezvous) == (
        f"no serving endpoint in '{rendezvous}' within 0.25 s: no trainer serves "
        "predictions there (yet)"
    )
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("preempted", "SIGTERM received\nsecond line"))
    assert timeout_words(rendezvous) == (
        f"no serving endpoint in '{rendezvous}' within 0.25 s: the trainer that ran there "
        "stopped (preempted: SIGTERM received; no trainer serves predictions there): a "
        "resumed one would serve there"
    )


@pytest.mark.timeout(60)
def test_a_trainer_running_without_serving_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests of 1 s until `NOTICE_AFTER` s of lookups have passed, then two more: one
    WARNING in all, naming the directory and the fix."""
    rendezvous = tmp_path / "rv"
    predictor = Predictor(3, rendezvous_dir=rendezvous)
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a"):
        try:
            with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.predict"):
                end = time.monotonic() + NOTICE_AFTER
                while time.monotonic() < end + 2.0:  # (two requests past the notice)
                    with pytest.raises(PredictTimeout, match="add ServingHook"):
                        predictor.predict(INPUTS, timeout=1)
        finally:
            predictor.close()
    said = [r.getMessage() for r in caplog.records if UNSERVED in r.getMessage()]
    assert said == [
        f"Predictor: {rendezvous}: {UNSERVED}; each request waits up to its timeout for a "
        "serve file (then fails: PredictTimeout)"
    ], said


@pytest.mark.timeout(60)
def test_a_trainer_that_ran_and_stopped_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As a running trainer without serving: requests of 1 s until `NOTICE_AFTER` s of
    lookups have passed, then two more: one WARNING in all."""
    rendezvous = tmp_path / "rv"
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a"):
        pass
    predictor = Predictor(3, rendezvous_dir=rendezvous)
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.predict"):
            end = time.monotonic() + NOTICE_AFTER
            while time.monotonic() < end + 2.0:  # (two requests past the notice)
                with pytest.raises(PredictTimeout, match="a resumed one would serve there"):
                    predictor.predict(INPUTS, timeout=1)
    finally:
        predictor.close()
    said = [r.getMessage() for r in caplog.records if "serve" in r.getMessage()]
    assert said == [
        f"Predictor: {rendezvous}: the trainer that ran there stopped (stopped: the receiver "
        "was stopped by its owner; no trainer serves predictions there): a resumed one would "
        "serve there; each request waits up to its timeout for a serve file (then fails: "
        "PredictTimeout)"
    ], said
