"""A receipt counts a step refused for NaN under ``nonfinite="refuse"`` as held: it is
marked (received) and never put, so `Draining` counts it as put (`ingested`); a batch
holding NaN goes record by record and starts the count too."""

from __future__ import annotations

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.stream.follow_answers import receipt_of
from melissa_trainer.stream.ingested import Draining
from melissa_trainer.wire import Batch, FieldSpec, Hello
from melissa_trainer.wire import receipt as R

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def batch(sid: int, steps: list[int], nan_at: int | None = None) -> Batch:
    payloads = np.array([[sid, t] for t in steps], np.float32)
    if nan_at is not None:
        payloads[steps.index(nan_at), 1] = np.nan
    n = len(steps)
    return Batch(
        sid, n, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, np.array(steps, np.uint64), payloads
    )


def test_a_receipt_counts_the_steps_refused_in_a_batch_as_held() -> None:
    puts: list[int] = []
    r = small_ingest(put=lambda sample: puts.append(1) or True)
    r.draining = Draining(lambda: len(puts))  # (every put in at once: none draining)
    r.hello(Hello(5, 0, 1, (FIELD,), {"a": 5.0}))
    r.batch(batch(5, [0, 1, 2, 3]))  # clean: started, then put at once
    r.batch(batch(5, [4, 5, 6, 7], nan_at=5))  # suspect: record by record, step 5 refused
    assert len(puts) == 7 and r.sims[5].completed == 8
    said = receipt_of(r, None, R.ReceiptQuery(5, 1, 8, 0, 1, None))
    assert said[3] == 8  # (before: 7, short by the refused step until the next start)
    assert said[5] == 1  # (the refused count, said apart)


def test_a_suspect_batch_after_another_simulation_s_batch_counts_exactly() -> None:
    puts: list[int] = []
    r = small_ingest(put=lambda sample: puts.append(1) or True)
    r.draining = Draining(lambda: len(puts))
    r.hello(Hello(5, 0, 1, (FIELD,), {"a": 5.0}))
    r.hello(Hello(6, 0, 1, (FIELD,), {"a": 6.0}))
    r.batch(batch(6, [0, 1]))
    r.batch(batch(5, [0, 1, 2], nan_at=0))
    assert r.draining.steps(5, r.sims[5].completed) == 3
    assert r.draining.steps(6, r.sims[6].completed) == 2
