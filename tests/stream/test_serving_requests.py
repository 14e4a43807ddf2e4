"""What a prediction request must be: the wire's round trip and rules (mutated requests
raise only protocol errors), the run and the inputs checked before sending, a request
larger than the inputs refused naming the array, inputs the trainer refuses a
`ValueError`, an extra input named.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import VERSION, drain

from melissa_trainer import wire as protocol
from melissa_trainer.client import Predictor, PredictRefused
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e  # its tests start processes (simulations, clients)


def test_wrong_run_and_inputs_checked_before_sending(server: PredictServer, tmp_path: Path) -> None:
    server.serving = True
    with (
        Predictor(0, endpoint=server.endpoint, run_id="run-b") as p,
        pytest.raises(PredictRefused) as refused,
    ):
        p.predict({"u": np.ones(4, np.float32)}, timeout=20)
    assert refused.value.reason == "wrong_run"
    with (
        Predictor(0, rendezvous_dir=tmp_path / "rv", run_id="run-a") as p,
        pytest.raises(ValueError, match="declared <f4 \\(4,\\)"),
    ):
        p.predict({"u": np.ones(4, np.float64)}, timeout=20)
    # a client of another run does not take this run's file for its own
    entry, why = read_serving(tmp_path / "rv", 0, "run-b")
    assert entry is None and "another run" in why


def test_protocol_round_trip_and_rules() -> None:
    arrays = {"u": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array(5, np.int64)}
    frames = [bytes(f) for f in protocol.encode_predict(7, 3, 250, "r1", arrays)]
    req = protocol.decode_predict(frames, 1 << 20)
    assert (req.simulation_id, req.request_id, req.timeout_ms, req.run_id) == (7, 3, 250, "r1")
    np.testing.assert_array_equal(req.arrays["u"], arrays["u"])
    assert req.arrays["s"].shape == () and int(req.arrays["s"]) == 5
    assert not req.arrays["u"].flags.writeable  # a view of the frame
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict(frames, 30)
    assert err.value.reason == "too_large"
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict([frames[0], frames[1]], 1 << 20)
    assert err.value.reason == "missing_frame"
    zero = protocol.encode_predict(7, 3, 0, None, {"u": np.ones(1, np.float32)})[0]
    header = bytearray(zero)
    header[protocol.PREFIX.size + 12] = 0  # the array count
    with pytest.raises(protocol.ProtocolError) as err:
        protocol.decode_predict([bytes(header)], 1 << 20)
    assert err.value.reason == "bad_request"
    reply = protocol.decode_reply([protocol.encode_refused(7, 3, 9, "busy", "full", 100)], 10)
    assert isinstance(reply, protocol.Refusal)
    assert (reply.reason, reply.retry_after_ms, reply.version) == ("busy", 100, 9)


def test_mutated_requests_raise_only_protocol_errors() -> None:
    """5,000 mutations of a valid request (a byte changed, a frame cut, dropped or
    added): each decodes or raises `ProtocolError`, nothing else escapes."""
    rng = np.random.default_rng(0)
    arrays = {"u": np.ones(4, np.float32), "v": np.zeros((2, 3), np.int64)}
    base = [bytes(f) for f in protocol.encode_predict(3, 9, 100, "run-x", arrays)]
    outcomes = set()
    for _ in range(5000):
        frames = [bytearray(f) for f in base]
        which = int(rng.integers(len(frames)))
        kind = int(rng.integers(4))
        if kind == 0:
            frames[which][int(rng.integers(len(frames[which])))] = int(rng.integers(256))
        elif kind == 1:
            del frames[which][int(rng.integers(len(frames[which]) + 1)) :]
        elif kind == 2:
            frames.pop(which)
        else:
            frames.append(bytearray(rng.bytes(int(rng.integers(40)))))
        try:
            protocol.decode_predict([bytes(f) for f in frames], 1 << 20)
            outcomes.add("ok")
        except protocol.ProtocolError as exc:
            outcomes.add(exc.reason)
    assert {"ok", "bad_size", "missing_frame", "unexpected_frame", "truncated"} <= outcomes


def test_a_request_larger_than_the_inputs_is_refused_naming_the_array(
    server: PredictServer,
) -> None:
    """numpy's default float64 for a float32 input (the commonest mistake of a client
    that does not know the inputs: one given `endpoint=` or
    `$MELISSA_TRAINER_SERVE_ENDPOINTS`) is larger than the declared inputs: the
    refusal names the array, its dtype and shape, and what the trainer serves (it said
    only "arrays of more than 16 bytes"), the dtype first. Since DESCRIBE (user trial
    32) the client asks the trainer for its inputs and says so itself, in the same
    words, sending nothing (the trainer's refusal, to a raw socket: the next test)."""
    server.serving = True
    with (
        Predictor(0, endpoint=server.endpoint) as p,
        pytest.raises(ValueError, match="predict") as refused,
    ):
        p.predict({"u": np.ones(4)}, timeout=20)
    # (the dtype first, and the fix: a cast; htrial7 F9)
    assert "input 'u' is <f8 (4,), declared <f4 (4,) (cast it to <f4)" in str(refused.value)
    assert server.telemetry() == {"described": 1}


@pytest.mark.parametrize("inputs", [{"u": np.ones(3, np.float32)}, {"v": np.ones(4, np.float32)}])
def test_inputs_the_trainer_refuses_are_a_value_error_without_a_rendezvous(
    server: PredictServer, inputs: dict[str, np.ndarray]
) -> None:
    """Without a rendezvous the client cannot check the inputs; the trainer's refusal
    is the `ValueError` a rendezvous gives before sending, not a `PredictRefused` that a
    simulation falling back on `PredictionUnavailable` would swallow on every request
    (it fell back silently, forever, for a wrong shape or name). Since DESCRIBE (user
    trial 32) the client checks them itself, before sending, in the rendezvous' words."""
    server.serving = True
    stop = threading.Event()
    thread = drain(server, stop)
    try:
        with Predictor(0, endpoint=server.endpoint) as p:
            with pytest.raises(ValueError, match=r"^predict\(\): (input 'u' is|arrays \['v'\])"):
                p.predict(inputs, timeout=20)
            out, version = p.predict({"u": np.ones(4, np.float32)}, timeout=20)  # then as usual
    finally:
        stop.set()
        thread.join(10)
    assert version == VERSION and out["y"].tolist() == [2.0 + VERSION] * 4


def test_an_extra_input_is_named_not_refused_as_too_large(server: PredictServer) -> None:
    """A request with an array the trainer does not serve (as a C client or a raw
    socket sends it: the Python client checks a serve file's inputs first) is refused
    naming that array; before, the decoder's byte bound read it "too_large". A float64
    array for a float32 input stays "too_large", the dtype named first."""
    server.serving = True
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    u = np.ones(4, np.float32)

    def ask(request_id: int, arrays: dict[str, np.ndarray]) -> protocol.Refusal:
        sock.send_multipart(protocol.encode_predict(2, request_id, 0, None, arrays))
        assert sock.poll(20_000), "no answer"
        reply = protocol.decode_reply([f.buffer for f in sock.recv_multipart(copy=False)], 1000)
        assert isinstance(reply, protocol.Refusal) and reply.request_id == request_id
        return reply

    try:
        sock.connect(server.endpoint or "")
        extra = ask(1, {"u": u, "extra": np.ones(2, np.float32)})
        assert extra.reason == "bad_request"
        assert extra.detail == (
            "bad_inputs: arrays ['extra', 'u'], the trainer serves inputs ['u'] (unknown: 'extra')"
        )
        wide = ask(2, {"u": np.ones(4, np.float64)})
        assert wide.detail.startswith("too_large: input 'u' is <f8 (4,), declared <f4 (4,)")
        counts = server.telemetry()
        assert (counts["rejected_bad_inputs"], counts["rejected_too_large"]) == (1, 1)
    finally:
        sock.close(linger=0)
        ctx.term()
