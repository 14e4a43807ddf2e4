"""A client with several receivers routes its steps between them and counts in each BYE
the steps it sent there; it asks for predictions as the run it followed.
"""

from __future__ import annotations

import numpy as np
import pytest
import zmq
from client_runs import Receiver

from melissa_trainer import wire as p
from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.usefixtures("_clean_environment")


@pytest.mark.timeout(30)
def test_routing_to_two_receivers(zctx: zmq.Context) -> None:
    receivers = [Receiver(zctx), Receiver(zctx)]
    endpoints = ",".join(r.endpoint for r in receivers)
    big = np.ones(20_000, np.float64)  # two frames
    with Client(
        {"u": ((20_000,), "f8"), "v": ((), "f4")},
        simulation_id=4,
        endpoints=endpoints,
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in range(7):
            c.send(step, u=big * step, v=np.float32(step))
    for rank, rec in enumerate(receivers):
        messages = rec.until_bye()
        assert isinstance(messages[0], p.Hello)
        assert messages[-1] == p.Bye(4, 0, 1, len(range(rank, 7, 2)))  # steps sent to it
        steps = [(m.time_step, m.name) for m in messages[1:-1]]  # type: ignore[union-attr]
        # small "v" is batched: it may come after later "u"s
        assert sorted(steps) == [(t, n) for t in range(rank, 7, 2) for n in ("u", "v")]


@pytest.mark.timeout(30)
def test_bye_counts_the_steps_sent_to_each_receiver(zctx: zmq.Context) -> None:
    """Every tenth step: all go to receiver 0 (t % 2 == 0), none to receiver 1; each
    receiver's BYE says how many it got (it finishes on that count)."""
    receivers = [Receiver(zctx), Receiver(zctx)]
    with Client(
        {"u": ((3,), "f4")},
        None,
        5,
        [r.endpoint for r in receivers],
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        for step in (0, 10, 20, 30, 7):
            c.send(step, u=np.full(3, step, np.float32))
        assert c.steps_sent == 5
    assert receivers[0].until_bye()[-1] == p.Bye(5, 0, 1, 4)
    assert receivers[1].until_bye()[-1] == p.Bye(5, 0, 1, 1)


@pytest.mark.timeout(30)
def test_predict_asks_as_the_run_the_client_followed(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A solver that followed a restarted trainer (external mode) sends as the new run but
    # asked for predictions as the old one, every request refused until its end ("the
    # trainer serving there belongs to another run"): the predictor follows the run too
    from melissa_trainer.client import PredictionUnavailable

    monkeypatch.setenv("MELISSA_TRAINER_SERVE_ENDPOINTS", "tcp://127.0.0.1:1")  # nothing there
    with Client(
        {"u": ((2,), "float32")},
        simulation_id=3,
        endpoints=receiver.endpoint,
        run_id="run-a",
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        with pytest.raises(
            PredictionUnavailable, match="refused the connection: nothing listens there"
        ):
            c.predict({"u": np.zeros(2, np.float32)}, timeout=0.05)
        predictor = c._asking.predictor
        assert predictor is not None and predictor.run_id == "run-a"
        c.run_id = "run-b"  # what `Client._follow` does when it switches to the new run
        with pytest.raises(
            PredictionUnavailable, match="refused the connection: nothing listens there"
        ):
            c.predict({"u": np.zeros(2, np.float32)}, timeout=0.05)
        assert c._asking.predictor is predictor and predictor.run_id == "run-b"
        c.send(0, u=np.zeros(2, np.float32))
    receiver.until_bye()
