"""A finished simulation's HELLO again is a WARNING in a run that did not resume (a
rerun by hand, most likely a mistake: `stream/run_again.py`), but the expected path
after a resume: the launcher runs again every simulation some rank's checkpoint lacked,
finished on rank 0 or not. Before, rank 0 warned of each such rerun on every resume
("Harmless if the launcher ran it again ..."), up to 8 lines and a ninth."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.run_again import SAID_AT_MOST
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
LOGGER = "melissa_trainer.stream.receiver"


def run(ing: Ingest, sid: int) -> None:
    """Simulation `sid`, 3 time steps: HELLO, DATA, BYE."""
    ing.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in range(3):
        payload = np.full(2, 1.0, np.float32).tobytes()
        ing.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    ing.bye(Bye(sid, 0, 1, 3))


def levels(caplog: pytest.LogCaptureFixture) -> list[int]:
    return [r.levelno for r in caplog.records if "HELLO again" in r.getMessage()]


@pytest.mark.timeout(30)
def test_reruns_are_warned_in_a_fresh_run(caplog: pytest.LogCaptureFixture) -> None:
    ing = small_ingest(recent_size=2)
    for sid in range(SAID_AT_MOST + 2):
        run(ing, sid)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for sid in range(SAID_AT_MOST + 2):  # each run again (by hand)
            run(ing, sid)
    assert levels(caplog) == [logging.WARNING] * (SAID_AT_MOST + 1)
    assert ing.run_again.count == SAID_AT_MOST + 2


@pytest.mark.timeout(30)
def test_reruns_after_a_resume_are_said_at_info(caplog: pytest.LogCaptureFixture) -> None:
    ing = small_ingest(recent_size=2)
    for sid in range(SAID_AT_MOST + 2):  # finished, most archived, before the checkpoint
        run(ing, sid)
    state = json.loads(json.dumps(ing.state_dict()))
    ing = small_ingest(recent_size=2)
    ing.load_state_dict(state, buffer_put=int(state["marked"]))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for sid in range(SAID_AT_MOST + 2):  # the launcher's reruns for another rank's data
            run(ing, sid)
    assert levels(caplog) == [logging.INFO] * (SAID_AT_MOST + 1)
    assert ing.run_again.count == SAID_AT_MOST + 2
