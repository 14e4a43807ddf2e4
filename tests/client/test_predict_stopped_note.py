"""What a `Predictor` says of the trainer that ran in its rendezvous directory and stopped
(`predict_lookup.stop_reason`, `stopped_story`), beyond tests/client/test_predict_unserved.py:

* what would serve there, per stop code: "a resumed one would serve there" was said of
  every code, also of a run that ended normally (``end``) or failed (``error``,
  ``nonfinite``), after which no resume follows on its own;
* a run that ended or failed fails a request at its next look, with those words: each
  request waited its whole timeout (failed before: a request of 120 s outlived the
  test's 60 s); a trainer that a resume may follow (``preempted``, ``broken``,
  ``stopped``), and a directory no trainer ran in, are still waited for;
* one story in every case: "(yet)" (awaiting a first trainer) only where no trainer
  ran, never beside "no resume follows on its own" (said so before);
* a stopped trainer of another run than the predictor's ``run_id`` (an older run in the
  same directory) is not quoted as this run's; a predictor of any run (no ``run_id``)
  waits past a record already there at its first look (an earlier run's, maybe:
  tests/client/test_predict_stale_end_record.py) and fails at once on one that came later;
* a predictor that was served and lost its trainer (stopped mid-use) is told the stop
  reason too: it was told only "the trainer that served this simulation stopped (no
  trainer serves predictions there)";
* a reason's message is cut at 200 characters, never inside one (the C client the same:
  tests/c/test_c_predict_stopped_note.py).

A real `Receiver` (what a trainer's rank runs) writes the rendezvous file; a real
`PredictServer` serves."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import running
from predict_server import answering_server

import melissa_trainer.client.predict_link as predict_link
from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.stream.endpoints import NOTICE_AFTER
from melissa_trainer.stream.stop_record import StopReason

INPUTS = {"u": np.zeros(4, np.float32)}
FIELDS = {"u": ((4,), np.float32)}
YET = "no trainer serves predictions there (yet)"
NOW = "no trainer serves predictions there"
RESUMED = "a resumed one would serve there"
ENDED = (
    "the run ended, no resume follows on its own (after max_steps, one resumed with a "
    "larger --max_steps would serve there)"
)
FAILED = "no resume follows on its own (one resumed once that is fixed would serve there)"
#: after an end at the stream's end, where a larger --max_steps trains nothing (its
#: ENDED advice was said there too)
STREAM_ENDED = (
    "the run ended at its stream's end, no resume follows on its own (a larger "
    "--max_steps trains nothing past it: a new run would serve there, or one resumed "
    "with more --pseudo_epochs if its buffer has samples to replay)"
)


def timeout_words(rendezvous: Path, run_id: str | None = None) -> str:
    """The error of one request of 0.25 s by a `Predictor` of simulation 3."""
    predictor = Predictor(3, rendezvous_dir=rendezvous, run_id=run_id)
    try:
        with pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=0.25)
    finally:
        predictor.close()
    return str(error.value)


def stopped_with(rendezvous: Path, reason: StopReason, run_id: str = "run-a") -> None:
    """A trainer's rank of `run_id` that ran in `rendezvous` and stopped for `reason`."""
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id=run_id) as receiver:
        receiver.note_stop(reason)


def at_once_words(rendezvous: Path, run_id: str | None = None) -> str:
    """The error of one request of 120 s (longer than the test's timeout: one that waits
    for it fails the test) by a `Predictor` of simulation 3."""
    predictor = Predictor(3, rendezvous_dir=rendezvous, run_id=run_id)
    try:
        with pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=120)
    finally:
        predictor.close()
    return str(error.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (StopReason("end", "max_steps 5 reached"), f"(end: max_steps 5 reached; {NOW}): {ENDED}"),
        (
            StopReason("end", "end of stream, before max_steps 5"),
            f"(end: end of stream, before max_steps 5; {NOW}): {STREAM_ENDED}",
        ),
        (
            StopReason("error", "training stopped: boom"),
            f"(error: training stopped: boom; {NOW}): {FAILED}",
        ),
        (
            StopReason("nonfinite", "NaN in u", simulation_id=2, time_step=7),
            f"(nonfinite: NaN in u; {NOW}): {FAILED}",
        ),
    ],
    ids=["end", "end-of-stream", "error", "nonfinite"],
)
def test_a_run_that_ended_or_failed_fails_a_request_at_once(
    tmp_path: Path, reason: StopReason, said: str
) -> None:
    """No resume follows on its own: the request fails at its first look, with the
    record's words (no "within T s": it did not wait), and the backoff's next one too."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, reason)
    assert at_once_words(rendezvous, "run-a") == (
        f"no serving endpoint in '{rendezvous}': the trainer that ran there stopped {said}; "
        "the next request looks the endpoint up again"
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("reason", "said"),
    [
        (StopReason("preempted", "SIGTERM received"), "(preempted: SIGTERM received; "),
        (StopReason("broken", "a collective timed out"), "(broken: a collective timed out; "),
        (StopReason("stopped", "stopped by its owner"), "(stopped: stopped by its owner; "),
    ],
    ids=["preempted", "broken", "stopped"],
)
def test_a_trainer_a_resume_may_follow_is_waited_for(
    tmp_path: Path, reason: StopReason, said: str
) -> None:
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, reason)
    assert timeout_words(rendezvous) == (
        f"no serving endpoint in '{rendezvous}' within 0.25 s: the trainer that ran there "
        f"stopped {said}{NOW}): {RESUMED}"
    )


@pytest.mark.timeout(60)
def test_no_trainer_ever_is_waited_for(tmp_path: Path) -> None:
    """The rendezvous directory exists, no trainer ran there: "(yet)", after the wait."""
    rendezvous = tmp_path / "rv"
    rendezvous.mkdir()
    assert (
        timeout_words(rendezvous) == f"no serving endpoint in '{rendezvous}' within 0.25 s: {YET}"
    )


@pytest.mark.timeout(60)
def test_a_run_that_ended_is_not_warned_of_as_waited_for(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests until `NOTICE_AFTER` s of lookups have passed, and more: no WARNING that
    each request waits up to its timeout for a serve file (none waits). Failed before:
    the warning of a trainer a resume may follow was said of it."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("end", "max_steps 5 reached"))
    predictor = Predictor(3, rendezvous_dir=rendezvous, run_id="run-a")
    try:
        with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.predict"):
            end = time.monotonic() + NOTICE_AFTER + 2.0  # (two backoffs past the notice)
            while time.monotonic() < end:
                with pytest.raises(PredictTimeout, match="no resume follows on its own"):
                    predictor.predict(INPUTS, timeout=120)
                time.sleep(0.05)  # (pacing the requests, as a solver's steps)
    finally:
        predictor.close()
    said = [r.getMessage() for r in caplog.records if "Predictor" in r.getMessage()]
    assert not said, said


@pytest.mark.timeout(60)
def test_a_waiting_request_fails_at_its_next_look_once_the_run_ends(tmp_path: Path) -> None:
    """A request of 120 s waits while the trainer runs without a serve file; the trainer
    then ends (its rank file marked stopped, ``end``): the request fails at its next look
    of the directory, not at its timeout (the test's 60 s would fail first)."""
    rendezvous = tmp_path / "rv"
    predictor = Predictor(3, rendezvous_dir=rendezvous)
    caught: list[BaseException] = []

    def ask() -> None:
        try:
            predictor.predict(INPUTS, timeout=120)
        except BaseException as error:  # (the test reads it)
            caught.append(error)

    asking = threading.Thread(target=ask)
    try:
        with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
            asking.start()
            receiver.note_stop(StopReason("end", "max_steps 5 reached"))
        # (stopped on exit: its rank file marked stopped, with the record)
        asking.join()
    finally:
        predictor.close()
    assert len(caught) == 1 and isinstance(caught[0], PredictTimeout), caught
    assert str(caught[0]) == (
        f"no serving endpoint in '{rendezvous}': the trainer that ran there stopped (end: "
        f"max_steps 5 reached; {NOW}): {ENDED}; the next request looks the endpoint up again"
    )


@pytest.mark.timeout(60)
def test_a_stopped_trainer_of_another_run_is_not_quoted(tmp_path: Path) -> None:
    """An older run ("run-a") stopped there; a predictor of run "run-b" awaits its own
    trainer (a resumed run-a would not serve it): "(yet)", no stop reason of run-a.
    Controls: the run's own predictor and one of any run (None) are told it."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("end", "max_steps 5 reached"))
    where = f"no serving endpoint in '{rendezvous}' within 0.25 s"
    assert timeout_words(rendezvous, "run-b") == f"{where}: {YET}"
    said = (
        f"no serving endpoint in '{rendezvous}': the trainer that ran there stopped (end: "
        f"max_steps 5 reached; {NOW}): {ENDED}; the next request looks the endpoint up again"
    )
    assert at_once_words(rendezvous, "run-a") == said
    # (any run's: quoted too, but waited for, as the record was there at its first look)
    assert timeout_words(rendezvous) == (
        f"{where}: the trainer that ran there stopped (end: max_steps 5 reached; {NOW}): {ENDED}"
    )


@pytest.mark.timeout(60)
def test_a_message_is_cut_at_200_characters(tmp_path: Path) -> None:
    """300 two-byte characters: the first 200 (400 bytes), none cut."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("error", "é" * 300))
    assert at_once_words(rendezvous, "run-a").endswith(
        f": the trainer that ran there stopped (error: {'é' * 200}; {NOW}): {FAILED}; "
        "the next request looks the endpoint up again"
    )


@pytest.mark.timeout(60)
def test_a_predictor_served_then_left_by_its_trainer_is_told_why_it_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Served by a trainer of run "run-a" (its receiver's rank file and its serve file),
    which then ends on max_steps: the request that finds its serve file gone says why
    it stopped. (The first request after the stop may meet the closed socket first:
    "refused"; each request looks again: no backoff.)"""
    monkeypatch.setattr(predict_link, "_BACKOFF", (0.0, 0.0))
    rendezvous = tmp_path / "rv"
    with Predictor(0, rendezvous_dir=rendezvous, run_id="run-a") as predictor:
        with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
            with answering_server(rendezvous, run_id="run-a"):
                assert predictor.predict({"u": np.ones(4, np.float32)}, timeout=30).version
            receiver.note_stop(StopReason("end", "max_steps 5 reached"))
        errors = []
        for _ in range(3):
            with pytest.raises(PredictTimeout) as error:
                predictor.predict(INPUTS, timeout=30)
            errors.append(str(error.value))
            if "served this simulation" in errors[-1]:
                break
    assert errors[-1] == (
        f"no serving endpoint in '{rendezvous}': the trainer that served this simulation "
        f"stopped (end: max_steps 5 reached; no trainer serves predictions there): {ENDED}; "
        "the next request looks the endpoint up again"
    ), errors


@pytest.mark.timeout(60)
def test_a_predictor_asks_as_the_launchers_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No ``run_id`` given: `$MELISSA_TRAINER_RUN_ID` (the launcher's) is its run, as a
    `Client`'s. An ended run-a there fails a predictor of run-a at once (the record names
    its run, though there at its first look); one of run-b awaits its own trainer, "(yet)"
    (failed before: run-a's record was quoted to it and failed it at once)."""
    rendezvous = tmp_path / "rv"
    stopped_with(rendezvous, StopReason("end", "max_steps 5 reached"))
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "run-a")
    assert at_once_words(rendezvous) == (
        f"no serving endpoint in '{rendezvous}': the trainer that ran there stopped (end: "
        f"max_steps 5 reached; {NOW}): {ENDED}; the next request looks the endpoint up again"
    )
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", " run-b ")
    where = f"no serving endpoint in '{rendezvous}' within 0.25 s"
    assert timeout_words(rendezvous) == f"{where}: {YET}"
    monkeypatch.setenv("MELISSA_TRAINER_RUN_ID", "no way")
    with pytest.raises(ValueError, match="MELISSA_TRAINER_RUN_ID"):
        Predictor(3, rendezvous_dir=rendezvous)
