"""A `Predictor` given its serving endpoint (no serve file) asks the trainer which inputs
it serves (DESCRIBE, docs/protocol.md section 16) before its first request on a
connection, and checks every request against the answer before sending it
(`melissa_trainer.client.predict_describe`; user trial 32). Here: the answer's codec,
the real server's answer and counters, a malformed answer (an error naming the
endpoint, nothing sent), a trainer from before DESCRIBE (requests unchecked, as
before), and a trainer restarted at the same endpoint with other inputs (asked again).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import zmq

from melissa_trainer import wire as protocol
from melissa_trainer.client import PredictionUnavailable, Predictor, PredictTimeout
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.wire import ProtocolError
from melissa_trainer.wire.predict import decode_answer
from melissa_trainer.wire.predict_describe import (
    Description,
    described,
    encode_describe,
    encode_description,
    is_describe,
)

pytestmark = pytest.mark.timeout(60)
SPECS = protocol.field_specs({"u": ((4, 3), "float32"), "k": ((), "int64")})


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)


def test_a_description_round_trips_and_its_describe_is_recognised() -> None:
    ask = encode_describe(7, 5)
    assert len(ask) == 30 and is_describe([ask])
    assert not is_describe(protocol.encode_predict(7, 5, 10, None, {"k": np.int64(1)}))
    answer = decode_answer([described([ask], SPECS, 12)], 1 << 20)
    assert answer == Description(7, 5, 12, SPECS)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda b: b[:-1], "truncated"),  # (the last name cut)
        (lambda b: b + b"x", "bad_size"),
        (lambda b: b[:34] + b"\x63" + b[35:], "bad_dtype"),  # dtype code 99
        (lambda b: b[:35] + b"\x09" + b[36:], "bad_shape"),  # 9 dimensions
        (lambda b: b[:36] + b"\x00" + b[37:], "bad_name"),  # a name of 0 bytes
        (lambda b: b[:37] + b"\x01" + b[38:], "bad_request"),  # the description's reserved
        (lambda b: b[:38] + b"\x00" + b[39:], "bad_shape"),  # a dimension 0
        (lambda b: b[:32] + b"\x00" + b[33:], "bad_request"),  # no inputs
        (lambda b: b[:33] + b"\x01" + b[34:], "bad_request"),  # reserved byte
        (lambda b: b[:20], "truncated"),
    ],
)
def test_a_malformed_description_is_a_protocol_error(
    mutate: Callable[[bytes], bytes], reason: str
) -> None:
    good = encode_description(7, 5, 12, SPECS)
    with pytest.raises(ProtocolError) as error:
        decode_answer([mutate(good)], 1 << 20)
    assert error.value.reason in (reason, "truncated"), error.value


def test_a_description_of_one_input_twice_is_refused() -> None:
    twice = encode_description(7, 5, 12, [SPECS[0], SPECS[0]])
    with pytest.raises(ProtocolError, match="input 'u' given twice"):
        decode_answer([twice], 1 << 20)


def test_the_server_answers_a_describe_and_counts_it_and_rejects_a_malformed_one() -> None:
    srv = PredictServer({"u": ((4, 3), "float32")}, bind="tcp://127.0.0.1:*")
    srv.start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        assert srv.endpoint is not None
        sock.connect(srv.endpoint)
        sock.send(encode_describe(3, 1))  # (not serving yet: described all the same)
        assert sock.poll(20_000)
        answer = decode_answer(sock.recv_multipart(), 1 << 20)
        assert isinstance(answer, Description) and answer.inputs == srv.inputs
        sock.send_multipart([encode_describe(3, 2), b"extra"])
        assert sock.poll(20_000)
        refused = decode_answer(sock.recv_multipart(), 1 << 20)
        assert isinstance(refused, protocol.Refusal) and refused.reason == "bad_request"
        assert "unexpected_frame" in refused.detail
        counts = srv.telemetry()
        assert counts["described"] == 1 and counts["rejected_unexpected_frame"] == 1
    finally:
        sock.close(linger=0)
        ctx.term()
        srv.stop()


class FakeTrainer:
    """A serving ROUTER in a thread: `answer(frames)` gives the reply to each message
    (None: none); the messages received are kept (`received`)."""

    def __init__(self, answer: Callable[[list[bytes]], list[bytes] | None]) -> None:
        self._ctx = zmq.Context()
        self._router = self._ctx.socket(zmq.ROUTER)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.bind("tcp://127.0.0.1:*")
        self.endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.received: list[list[bytes]] = []
        self._answer, self._stop = answer, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._router.poll(50):
                continue
            identity, *frames = self._router.recv_multipart()
            self.received.append(frames)
            reply = self._answer(frames)
            if reply is not None:
                self._router.send_multipart([identity, *reply])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._router.close(linger=0)
        self._ctx.term()


def _ids(frames: list[bytes]) -> tuple[int, int]:
    """(simulation id, request id) of a PREDICT header (a DESCRIBE's too)."""
    sim = protocol.peek_simulation_id(frames[0])
    rid = protocol.peek_request_id(frames[0])
    assert sim is not None and rid is not None
    return sim, rid


@pytest.fixture
def fake() -> Iterator[list[FakeTrainer]]:
    made: list[FakeTrainer] = []
    yield made
    for trainer in made:
        trainer.close()


def test_a_malformed_answer_to_describe_names_the_endpoint_and_nothing_is_sent(
    fake: list[FakeTrainer],
) -> None:
    def answer(frames: list[bytes]) -> list[bytes]:
        sim, rid = _ids(frames)
        return [encode_description(sim, rid, 0, SPECS) + b"junk"]

    trainer = FakeTrainer(answer)
    fake.append(trainer)
    with (
        Predictor(3, endpoint=trainer.endpoint) as predictor,
        pytest.raises(PredictionUnavailable) as error,
    ):
        predictor.predict({"u": np.zeros((4, 3), np.float32)}, timeout=20.0)
    message = str(error.value)
    assert "malformed answer to DESCRIBE" in message and trainer.endpoint in message, message
    assert len(trainer.received) == 1 and is_describe(trainer.received[0])


def test_a_trainer_before_describe_gets_the_requests_unchecked_as_before(
    fake: list[FakeTrainer],
) -> None:
    def answer(frames: list[bytes]) -> list[bytes]:
        sim, rid = _ids(frames)
        if is_describe(frames):  # (what PredictServer before DESCRIBE answered)
            detail = "bad_request: a PREDICT carries at least one array"
            return [protocol.encode_refused(sim, rid, 0, "bad_request", detail)]
        return protocol.encode_prediction(sim, rid, 4, {"y": np.ones(2, np.float32)})

    trainer = FakeTrainer(answer)
    fake.append(trainer)
    with Predictor(3, endpoint=trainer.endpoint) as predictor:
        for _ in range(2):  # (asked once per connection)
            outputs, version = predictor.predict({"v": np.zeros(5)}, timeout=20.0)
            assert version == 4 and outputs["y"].tolist() == [1.0, 1.0]
    assert [is_describe(f) for f in trainer.received] == [True, False, False]


def test_a_trainer_restarted_at_the_same_endpoint_is_asked_again() -> None:
    first = PredictServer({"u": ((4,), "float32")}, bind="tcp://127.0.0.1:*")
    first.start()
    first.serving = True
    assert first.endpoint is not None
    endpoint, second = first.endpoint, None
    try:
        with Predictor(0, endpoint=endpoint) as predictor:
            with pytest.raises(ValueError, match="cast it to <f4"):
                predictor.predict({"u": np.zeros(4)}, timeout=20.0)
            assert first.telemetry() == {"described": 1}  # (nothing else sent)
            first.stop()
            second = PredictServer({"u": ((4,), "float64")}, bind=endpoint)
            second.start()
            second.serving = True
            # (the first request may find the restart's gap: a connection refused is a
            # trainer gone, then a backoff; the new trainer is asked all the same)
            deadline = time.monotonic() + 30
            while True:
                try:
                    predictor.predict({"u": np.zeros(4, np.float32)}, timeout=20.0)
                except PredictTimeout:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
                    continue
                except ValueError as exc:
                    assert "cast it to <f8" in str(exc), exc
                    break
                pytest.fail("a request of the old inputs was answered")
            assert second.telemetry() == {"described": 1}
    finally:
        first.stop()
        if second is not None:
            second.stop()
