"""A `Predictor` whose serving endpoint's host never answers the TCP connect (its SYNs
dropped: a wrong host, a firewall, a node down) says so, and a refused one is said as
before: libzmq posts the same events (CLOSED, CONNECT_RETRIED) when it abandons a connect
at ZMQ_CONNECT_TIMEOUT as when the host refuses it (an RST), so a connect bound added
naively would say "refused the connection: nothing listens there" of a host that never
answered (`predict_events`: told apart by the attempt's length).

Before: no connect bound (the kernel's ~2 minutes after a request gave up), and the
timeout said "no connection to the trainer's serving endpoint within 3.0 s (the trainer
is gone or restarting)" (a connect bound shorter than the request's: its whole timeout
too). The host is a listener whose accept queue is full (`backlogged`: the kernel drops
the SYNs, deterministically). The C client: tests/c/test_c_predict_no_answer.py."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
import zmq
from backlogged import backlogged  # noqa: F401 (a fixture)
from held_ports import refused_endpoint

import melissa_trainer.client.predict_link as predict_link
from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_errors import NO_ANSWER_WHY
from melissa_trainer.client.sockets import connect_timeout_ms

INPUTS = {"u": np.ones(4, np.float32)}


def no_answer_words(endpoint: str) -> re.Pattern[str]:
    """The words of a host that never answered, the seconds aside."""
    address = re.escape(endpoint.removeprefix("tcp://"))
    return re.compile(
        rf"^no answer from {address} \(the trainer's serving endpoint\) within "
        rf"\d+\.\d s: {re.escape(NO_ANSWER_WHY)}$"
    )


@pytest.mark.timeout(60)
def test_a_host_that_never_answers_is_said_at_the_timeout(backlogged: str) -> None:  # noqa: F811
    # 2 s: the connect bound's floor (`connect_timeout_ms`), so the bound is the request's
    # timeout, as it was at 3 s, a second sooner
    with Predictor(0, endpoint=backlogged) as predictor, pytest.raises(PredictTimeout) as error:
        predictor.predict(INPUTS, timeout=2.0)
    said = str(error.value)
    assert no_answer_words(backlogged).match(said), said
    assert float(said.split(" within ")[1].split(" s")[0]) >= 1.5, said  # (its connect's age)


@pytest.mark.timeout(60)
def test_a_connect_abandoned_at_its_bound_is_no_answer_not_a_refusal(
    backlogged: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A connect bound shorter than the request's timeout (2 s of 20): libzmq abandons
    the attempt with the events of a refusal, which the request must not read as one."""
    monkeypatch.setattr(predict_link, "connect_timeout_ms", lambda timeout: 2000)
    began = time.monotonic()
    with Predictor(0, endpoint=backlogged) as predictor, pytest.raises(PredictTimeout) as error:
        predictor.predict(INPUTS, timeout=20.0)
    said = str(error.value)
    assert no_answer_words(backlogged).match(said) and " within 2.0 s: " in said, said
    assert time.monotonic() - began < 20.0, said  # (at once, not at the timeout)


@pytest.mark.timeout(60)
def test_a_refused_connect_keeps_its_words_and_the_socket_gets_its_bound() -> None:
    endpoint = refused_endpoint()
    with Predictor(0, endpoint=endpoint) as predictor:
        with pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=30.0)
        said = str(error.value)
        assert said == (
            f"the trainer's serving endpoint {endpoint} refused the connection: nothing "
            "listens there (the trainer is gone or restarting); the next request looks the "
            "endpoint up again"
        ), said
        link = predictor._link
        for timeout in (7.5, 0.5):  # (the request's timeout, at least 2 s: the one rule)
            link.reset()
            sock = link.connect(time.monotonic() + 1, timeout)
            assert sock.getsockopt(zmq.CONNECT_TIMEOUT) == connect_timeout_ms(timeout)
        link.reset()
