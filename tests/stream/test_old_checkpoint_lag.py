"""Review finding (hrev10): `ingest_record.lag_problem` refuses a checkpoint that an
earlier version wrote and that resumed before, with no format change to tell them apart.

Before a843e2a5 (2026-11-29) the registry wrote the receiver's record *before* the
buffer's snapshot, so a sample put in between left the buffer one put (or more) ahead of
the record. That resumed with a WARNING ("receiver record ... and buffer ... disagree")
and at worst put such a sample twice. Since fc1009cb the same pair is refused outright
("cannot resume exactly ... written by a version that saved the record before the
buffer ... start the run afresh"), and the checkpoint format version was not bumped
(`checkpoint.format`), so the refusal cannot tell an old checkpoint from files mixed
from two saves: a study checkpointed by the older version during ingest can no longer
resume at all. The oracle: the record and put count such a version wrote, built by hand
(one sample put between the record and the buffer's snapshot), without the key
``buffer_saved_first`` that such a version did not write (`ingest_record.BUFFER_SAVED_FIRST`,
which tells the two apart since).

Fixed (hfix10): a record without the key resumes, warned of, against a buffer ahead by
no more than the keys it kept; beyond that it is refused, as is any gap of a record with
the key (tests/stream/test_resume_lag.py)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.stream.reshard import reshard_states
from melissa_trainer.wire import Data, FieldSpec, Hello

pytestmark = pytest.mark.timeout(60)

#: the record's key since hfix10 (`ingest_record.BUFFER_SAVED_FIRST`), as the file says it
BUFFER_SAVED_FIRST = "buffer_saved_first"
FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def _data(sid: int, t: int) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


def _older(steps: int, recent_size: int = 1016) -> dict[str, Any]:
    """The record of `steps` samples as a version before 2026-11-29 wrote it."""
    ingest = small_ingest(recent_size=recent_size)
    ingest.hello(Hello(3, 0, 1, (FIELD,), {"a": 3.0}))
    for t in range(steps):
        ingest.data(_data(3, t), True)
    record = ingest.state_dict()
    record.pop(BUFFER_SAVED_FIRST, None)  # (this version's records say it: the test below)
    return record


def test_a_checkpoint_of_the_record_first_order_still_resumes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    record = _older(10)  # the older order: the record first (10 marked)...
    buffer_put = 11  # ...a sample put by the receiver's thread, then the buffer's snapshot
    resumed = small_ingest(recent_size=1016)
    with caplog.at_level(logging.WARNING, "melissa_trainer.stream.receiver"):
        resumed.load_state_dict(record, buffer_put)  # before: ValueError "cannot resume"
    assert resumed.marked == buffer_put
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and "the buffer holds 1 put more than the record took" in said[0]
    assert "saved the record before the buffer" in said[0]


def test_this_versions_record_with_the_same_gap_is_refused() -> None:
    ingest = small_ingest(recent_size=1016)
    ingest.hello(Hello(3, 0, 1, (FIELD,), {"a": 3.0}))
    for t in range(10):
        ingest.data(_data(3, t), True)
    record = ingest.state_dict()
    assert record[BUFFER_SAVED_FIRST] is True  # (the buffer saved first: never ahead)
    with pytest.raises(ValueError, match="the buffer holds 1 put more than the record took"):
        small_ingest(recent_size=1016).load_state_dict(record, 11)


def test_an_older_record_beyond_repair_is_refused() -> None:
    with pytest.raises(ValueError, match="the buffer holds 9 puts more") as info:
        small_ingest(recent_size=8).load_state_dict(_older(5, 8), 14)  # 9 ahead, 8 kept
    assert "saved the record before the buffer (before 2026-11-29) beyond" in str(info.value)
    with pytest.raises(ValueError, match="9 samples recorded after the buffer's snapshot"):
        small_ingest(recent_size=8).load_state_dict(_older(20, 8), 11)  # 9 behind: lost


def test_a_reshard_resumes_an_older_record_and_marks_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "melissa_trainer.stream.receiver"):
        merged = reshard_states([_older(10)], [11], 0, 2, 0)
    assert any("the buffer holds 1 put more" in r.getMessage() for r in caplog.records)
    assert merged[BUFFER_SAVED_FIRST] is True
