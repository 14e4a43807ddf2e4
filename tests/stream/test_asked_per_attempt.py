"""`StepLedger.asked` (client ranks whose close asked a receipt: a later lost connection
is said to be maybe a close that gave up, `connection_lines.lost`) is of one attempt:
the HELLO of a new attempt clears it, so the crash of a restart that never asked is not
said to be a close that gave up because the attempt before asked."""

from __future__ import annotations

import numpy as np
import pytest
from small_ingest import small_ingest

from melissa_trainer.stream.follow_answers import receipt_of
from melissa_trainer.wire import FieldSpec, Hello
from melissa_trainer.wire import receipt as R

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def test_a_new_attempt_s_hello_clears_the_receipts_asked() -> None:
    r = small_ingest()
    hello = lambda rank: Hello(5, rank, 2, (FIELD,), {"a": 5.0})  # noqa: E731
    ask = lambda rank: receipt_of(r, None, R.ReceiptQuery(5, 1, 0, rank, 2, None))  # noqa: E731
    r.hello(hello(0))
    r.hello(hello(1))
    ask(0)
    assert r.sims[5].asked == {0}
    r.hello(hello(0))  # a restart (attempt 2): its closes have asked nothing yet
    assert r.sims[5].asked == set()  # (before: {0}, attempt 1's)
    ask(0)
    r.hello(hello(1))  # the same attempt's other client rank: what it asked stays
    assert r.sims[5].asked == {0}
