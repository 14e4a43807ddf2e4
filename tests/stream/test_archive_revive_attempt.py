"""A simulation archived on rank 0 (finished before the checkpoint) that runs again
after the resume is a new attempt there, as on the ranks that read its HELLO into a
ledger: its revived HELLO goes through the same path (`Ingest.hello`), counted by the
`NonFiniteGuard` (`attempt`, `helloed`).

Before (hcpar), `Archive.revive` returned before `NonFiniteGuard.hello`: rank 0 stayed
on attempt 0 of it. Its rerun sending NaN to rank 1 (whose checkpoint lacked its data,
the reason it runs again) under ``nonfinite="fail"``: rank 1 handed the failure of
attempt 1 to rank 0, which holds a hand-off until it has read that attempt's HELLO
(`helloed`, `IngestLoop._hear_handoffs`), and it never would: the failure never reached
the launcher, the rerun was not killed nor restarted, and rank 1 waited for its step
until stall_timeout."""

from __future__ import annotations

import json

import numpy as np
import pytest

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))
RECENT = 2  # a finished ledger is archived 2 puts later
X = 5  # the simulation that finished before the checkpoint and runs again


def ingest(rank: int) -> Ingest:
    return Ingest(
        rank,
        2,
        put=lambda sample: True,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 20,
        recent_size=RECENT,
        nonfinite="fail",
    )


def hello(sid: int) -> Hello:
    return Hello(sid, 0, 1, (FIELD,), {"a": float(sid)})


def data(sid: int, t: int, value: float) -> Data:
    payload = np.full(2, value, np.float32).tobytes()
    return Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)


def run(ing: Ingest, sid: int, steps: range) -> None:
    """Rank `ing.rank`'s share (t % 2) of simulation `sid`: HELLO, DATA, BYE."""
    ing.hello(hello(sid))
    mine = [t for t in steps if t % 2 == ing.rank]
    for t in mine:
        ing.data(data(sid, t, 1.0), True)
    ing.bye(Bye(sid, 0, 1, len(mine)))


@pytest.mark.timeout(30)
def test_a_revived_simulation_is_a_new_attempt_on_rank_0() -> None:
    rank0 = ingest(0)
    rank0.nonfinite.launcher = True  # (rank 0 of a study: its launcher reads `refused`)
    for sid in (X, 6, 7, 8):  # X finished, then enough puts after it to archive it
        run(rank0, sid, range(4))
    assert X in rank0.archive
    state = json.loads(json.dumps(rank0.state_dict()))
    rank0 = ingest(0)  # the resume (rank 1's checkpoint lacked X: it runs again)
    rank0.nonfinite.launcher = True
    rank0.load_state_dict(state, buffer_put=int(state["marked"]))
    assert X in rank0.archive and rank0.nonfinite.attempt(X) == 0

    rank1 = ingest(1)
    handed: list[tuple[int, int, str, int, int]] = []
    rank1.nonfinite.hand = lambda *failure: handed.append(failure) is None
    rank0.hello(hello(X))  # the rerun's HELLO, to each rank
    rank1.hello(hello(X))
    assert rank0.sims[X].finished  # revived: a finished ledger, as before
    rank1.data(data(X, 1, float("nan")), True)  # NaN to rank 1 only: handed to rank 0
    assert len(handed) == 1
    sid, t, why, seen, attempt = handed[0]
    # rank 0 judges it as `IngestLoop._hear_handoffs` does: once it read that HELLO
    assert rank0.nonfinite.helloed(sid, attempt), "held until a HELLO already read"
    assert rank0.nonfinite.attempt(X) == rank1.nonfinite.attempt(X) == 1
    assert rank0.nonfinite.failed_elsewhere(rank0.sims.get(sid), sid, t, why, seen)
    assert [s for s, _ in rank0.refused] == [X]  # the launcher kills and restarts it
    rank0.hello(hello(X))  # its restart: attempt 2, failed afresh if it sends NaN again
    assert rank0.nonfinite.attempt(X) == 2 and not rank0.nonfinite.failed_now(X)
    assert sum(rank0.rejected.values()) == 0
    for sid in (9, 10, 11):  # puts after it: the revived ledger is archived again, and
        run(rank0, sid, range(4))  # its HELLO counts per client rank dropped with it
    assert X in rank0.archive and X not in rank0.nonfinite._hellos
    assert rank0.nonfinite.attempt(X) == 2  # (kept: a hand-off, the study's end read it)
