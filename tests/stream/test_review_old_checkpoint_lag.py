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
(one sample put between the record and the buffer's snapshot)."""

from __future__ import annotations

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.wire import Data, FieldSpec, Hello

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def _data(sid: int, t: int) -> Data:
    payload = np.array([sid, t], np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


@pytest.mark.xfail(
    strict=True,
    reason="hrev10: a pre-SAVE_FIRST checkpoint (buffer one put ahead of the record, "
    "same format version) is refused since fc1009cb; it resumed (warned) before",
)
def test_a_checkpoint_of_the_record_first_order_still_resumes() -> None:
    ingest = small_ingest(recent_size=1016)
    ingest.hello(Hello(3, 0, 1, (FIELD,), {"a": 3.0}))
    for t in range(10):
        ingest.data(_data(3, t), True)
    record = ingest.state_dict()  # the older order: the record first (10 marked)...
    ingest.data(_data(3, 10), True)  # ...a sample put by the receiver's thread...
    buffer_put = 11  # ...then the buffer's snapshot, which holds it
    resumed = small_ingest(recent_size=1016)
    resumed.load_state_dict(record, buffer_put)  # today: ValueError "cannot resume exactly"
    assert resumed.marked == buffer_put
