"""A review's finding (failed before the fix): a `Predictor` without a ``run_id`` (the
standalone recipe of docs/how-to/neural-operator.md and serve-while-training.md) takes
any run's stop record for its own (`predict_lookup.stop_reason`: ``None`` run_id). Since
hpred, a record ``end`` (or ``error``, ``nonfinite``) fails a request at its first look
("no resume follows on its own"). A stale record left by an earlier run in the same
rendezvous directory (a rerun of the example with the same ``--output_dir``, a resume:
a new run id at each trainer start) therefore fails the requests made while the new
trainer starts, at once and with untrue words, where before the merge they waited for
its serve file and were answered.

The test: run "run-a" ended there (a real `Receiver`, its rank file marked stopped,
``end``); a predictor without run id asks with a 30 s timeout; once its first look
has read the stale record, a new trainer ("run-b": a real `Receiver` and a real
`PredictServer`) publishes there. Expected: the request is answered. Failed before
(hpred): it failed at once, "the trainer that ran there stopped (end: ...): the run
ended, no resume follows on its own". Now a record already there at a run-id-less
predictor's first look is waited past (`EndpointLookup.find`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import running
from predict_server import answering_server

import melissa_trainer.client.stop_look as stop_look
from melissa_trainer.client import Predictor
from melissa_trainer.stream.stop_record import StopReason

FIELDS = {"u": ((4,), np.float32)}


@pytest.mark.timeout(60)
def test_a_stale_end_record_does_not_fail_a_new_runs_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendezvous = tmp_path / "rv"
    with running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-a") as receiver:
        receiver.note_stop(StopReason("end", "max_steps 5 reached"))
    looked = threading.Event()
    story = stop_look.stopped_story  # (what a lookup's look calls: `StopLook`)

    def first_look(*args: Any, **kwargs: Any) -> Any:
        said = story(*args, **kwargs)
        looked.set()  # (the request has read the stale record: the new run may start)
        return said

    monkeypatch.setattr(stop_look, "stopped_story", first_look)
    predictor = Predictor(0, rendezvous_dir=rendezvous)
    caught: list[BaseException] = []
    answered: list[Any] = []

    def ask() -> None:
        try:
            answered.append(predictor.predict({"u": np.ones(4, np.float32)}, timeout=30))
        except BaseException as error:  # (the test reads it)
            caught.append(error)

    asking = threading.Thread(target=ask)
    try:
        asking.start()
        assert looked.wait(30)
        with (
            running(rendezvous_dir=str(rendezvous), fields=FIELDS, run_id="run-b"),
            answering_server(rendezvous, run_id="run-b"),
        ):
            asking.join(40)
    finally:
        predictor.close()
    assert not caught, [str(e) for e in caught]
    assert answered and answered[0].version is not None
