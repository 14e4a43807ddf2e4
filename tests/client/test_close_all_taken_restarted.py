"""A second run of a simulation (a solver restarted from its own restart file, a hand
rerun) whose trainer ended (``end``) before it read any of that run's steps is not told
"nothing was lost": the stop record's ``unfinished`` says the steps the receiver holds
of the simulation over every run of it (`StepLedger.completed`), and the close compared
that count with the steps this run sent (`StopRecords._taken`: held >= sent), so the
earlier run's steps stood for this run's lost ones (review hrev6, finding 1). Now the row
says the first and last step held too, and the close confirms only as many steps held
as sent, from the least to the greatest sent.

Real parts: the receiver's `Ingest` fed the two runs' HELLOs and the first run's DATA,
its record (`build_record`) written in a rendezvous file as a stopping receiver marks
it, and the close's reader of it. The oracle: none of the second run's 5 steps reached
the receiver (they were never fed to it), so its close must not be confirmed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.step_set import StepSet
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.wire import Data, FieldSpec, Hello
from melissa_trainer.wire.routing import SIMULATION_STEP, receiver_of

pytestmark = pytest.mark.timeout(30)

EP, SID = "tcp://127.0.0.1:9", 3
FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def hello() -> Hello:
    return Hello(SID, 0, 1, (FIELD,), {"a": 1.0})


def test_a_restarted_runs_lost_steps_are_not_confirmed(tmp_path: Path) -> None:
    ingest = Ingest(
        0, 1, put=lambda sample: True, end=lambda why: None, expected=None,
        max_field_bytes=1 << 20, max_pending=8, max_pending_bytes=1 << 20,
        max_time_step=1 << 20, recent_size=8,
    )  # fmt: skip
    payload = np.zeros(2, np.float32).tobytes()
    ingest.hello(hello())  # the first run: steps 0..9 taken, then killed (no BYE)
    for t in range(10):
        ingest.data(Data(SID, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    ingest.hello(hello())  # the second run, from its restart file: its HELLO read, then
    # its steps 10..14 and its BYE sent, none read: the trainer ended (max_steps)
    record = build_record(ingest, None, StopReason("end", "max_steps 9 reached"))
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 1, EP, {})
    mark_stopped(rv, 0, EP, record)
    said = StopRecords(str(rv), [EP], None, SID, 0, f"simulation {SID} rank 0")
    assert not said.all_taken([5], [(10, 14)]), record["unfinished"]
    assert record["unfinished"] == [[SID, 10, 0, 0, 9]]  # (every run's steps, first, last)


@pytest.mark.parametrize("routing", [None, SIMULATION_STEP])
def test_each_receivers_first_and_last_are_the_time_steps_it_took(
    tmp_path: Path, routing: str | None
) -> None:
    """Two receivers, each taking its share of steps 0 .. 9 (``t % 2``, or ``(s + t) %
    2``: `wire.routing`): each row's first and last are time steps (not the receiver's
    local ones), the least and greatest the client sent that receiver, so that the
    close of a client that sent them all is confirmed. The oracle: the steps fed to
    each, routed by `receiver_of`, as the client routes them."""
    rv, world = tmp_path / "rv", 2
    endpoints = [f"tcp://127.0.0.1:{9 + r}" for r in range(world)]
    sent = [StepSet() for _ in range(world)]
    for t in range(10):
        sent[receiver_of(SID, t, world, routing)].add(t)
    for rank in range(world):
        ingest = Ingest(
            rank, world, put=lambda sample: True, end=lambda why: None, expected=None,
            max_field_bytes=1 << 20, max_pending=8, max_pending_bytes=1 << 20,
            max_time_step=1 << 20, recent_size=8,
        )  # fmt: skip
        ingest.hello(Hello(SID, 0, 1, (FIELD,), {"a": 1.0}, routing=routing))
        payload = np.zeros(2, np.float32).tobytes()
        for t in sent[rank]:
            data = Data(SID, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload)
            assert ingest.data(data, True) is None, (rank, t)  # (taken, not rejected)
        record = build_record(ingest, None, StopReason("end", "max_steps 9 reached"))
        first, last = sent[rank].span() or (-1, -1)
        assert record["unfinished"] == [[SID, 5, 0, first, last]], (rank, record)
        write_rendezvous(rv, rank, world, endpoints[rank], {})
        mark_stopped(rv, rank, endpoints[rank], record)
    said = StopRecords(str(rv), endpoints, None, SID, 0, f"simulation {SID} rank 0")
    assert said.all_taken([s.count for s in sent], [s.span() for s in sent])
