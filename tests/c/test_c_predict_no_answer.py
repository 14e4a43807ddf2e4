"""The C client's `mt_predict` to a serving endpoint whose host never answers the TCP
connect (its SYNs dropped: a wrong host, a firewall, a node down) says so, in the Python
`Predictor`'s words (tests/client/test_predict_no_answer.py), and a refused one is said
as before: libzmq abandons a connect at ZMQ_CONNECT_TIMEOUT (the request's timeout, at
least 2 s: predict.c) with a refusal's events, told apart by the attempt's length
(clients/c/src/predict_dial.c).

Before: "no connection to the trainer's serving endpoint within 3.0 s (the trainer is
gone or restarting)". The host is a listener whose accept queue is full (`backlogged`:
the kernel drops the SYNs, deterministically)."""

from __future__ import annotations

import re

import pytest
from backlogged import backlogged  # noqa: F401 (a fixture)
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT, dead_endpoint

from melissa_trainer.client.predict_errors import NO_ANSWER_WHY, no_answer

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(90)
def test_a_host_that_never_answers_is_said_in_the_python_words(
    c_predict: CPredict,
    backlogged: str,  # noqa: F811
) -> None:
    env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": backlogged}
    ((code, message),) = c_predict.statuses(env, 3)
    assert code == MT_ETIMEDOUT, message
    address = re.escape(backlogged.removeprefix("tcp://"))
    assert re.fullmatch(
        rf"no answer from {address} \(the trainer's serving endpoint\) within (\d+\.\d) s: "
        + re.escape(NO_ANSWER_WHY),
        message,
    ), message
    seconds = float(message.split(" within ")[1].split(" s")[0])
    assert seconds >= 1.5 and message == str(no_answer(backlogged, seconds)), message


@pytest.mark.timeout(90)
def test_a_refused_connect_keeps_its_words(c_predict: CPredict) -> None:
    endpoint = dead_endpoint()
    env = {"MELISSA_TRAINER_SERVE_ENDPOINTS": endpoint}
    ((code, message),) = c_predict.statuses(env, 30)
    assert code == MT_ETIMEDOUT, message
    assert message == (
        f"the trainer's serving endpoint {endpoint} refused the connection: nothing listens "
        "there (the trainer is gone or restarting); the next request looks the endpoint up "
        "again"
    ), message
