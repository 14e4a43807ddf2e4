"""A simulation refused at its HELLO, whose client then closes without a BYE (a user trial,
htrial17 e_client.py: a simulation declaring another field than the study's, then
``close(bye=False)``): its connection carried nothing the study takes (every message of a
simulation unknown here is rejected), so nothing is lost with it. Its close was counted
(``connections_lost`` 1) and warned of in the ~600-character paragraph of causes and loss
("that data is lost until the simulation runs again"), after the refusal's own warning.
It is now neither counted nor warned of: one DEBUG line."""

from __future__ import annotations

import logging

import pytest
import reference_protocol as R
import zmq
from helpers import running
from named_hellos import Named
from waiting import wait_until

U = R.Field("u", "<f4", (4,))
V = R.Field("v", "<f4", (4,))  # (not the study's field: the HELLO is refused)
LOGGER = "melissa_trainer.stream.receiver"
REFUSED_CLOSE = "simulation 0 client rank 0: connection closed; its HELLO was refused"


@pytest.mark.timeout(60)
def test_a_connection_refused_at_its_hello_closing_without_bye_is_not_a_lost_one(
    caplog: pytest.LogCaptureFixture, named: Named
) -> None:
    caplog.set_level(logging.DEBUG, LOGGER)
    ctx = zmq.Context()
    accepted, refused = ctx.socket(zmq.PUSH), ctx.socket(zmq.PUSH)
    try:
        with running(expected_simulations=2) as rec:
            accepted.connect(rec.endpoint)  # (its HELLO sets the study's fields: u)
            accepted.send(R.encode_hello(1, 0, 1, R.hello_body([U], {})))
            wait_until(lambda: 1 in rec.ingest.sims, "simulation 1's HELLO read", 30)
            refused.connect(rec.endpoint)
            refused.send(R.encode_hello(0, 0, 1, R.hello_body([V], {})))
            wait_until(lambda: rec.telemetry()["rejected_schema_mismatch"] >= 1, "the refusal", 30)
            # (the refusal is counted before the watch is told: a close read in between
            # is not said, `named`)
            assert named.wait(2), "the refused HELLO not given to the watch"
            refused.close(linger=-1)  # close(bye=False) after the refusal

            def judged() -> bool:  # (the close read: said, or counted as it was before)
                said = any(r.getMessage().startswith(REFUSED_CLOSE) for r in caplog.records)
                return said or rec.telemetry()["connections_lost"] >= 1

            wait_until(judged, "the refused connection's close read", 30)
            telemetry = rec.telemetry()
    finally:
        accepted.close(linger=0)
        refused.close(linger=0)
        ctx.term()
    assert telemetry["connections_lost"] == 0
    warned = [r.getMessage() for r in caplog.records if "before its BYE" in r.getMessage()]
    assert warned == []
    said = [r for r in caplog.records if r.getMessage().startswith(REFUSED_CLOSE)]
    assert [r.levelno for r in said] == [logging.DEBUG]
    assert telemetry["simulations_finished"] == 0 and 0 not in rec.ingest.sims
