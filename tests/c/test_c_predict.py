"""The C client's `mt_predict` (docs/protocol.md, section 16) against the Python side.

* The wire, with the Python codec as the oracle: a PREDICT the C client sends, read at
  a plain ROUTER socket, decodes with `decode_predict` to the arrays, ids, timeout and
  run id it was given, and its header is byte for byte `encode_predict`'s; replies
  made by `encode_prediction` and `encode_refused` come out of the C client as those
  arrays, that version, that reason. A late answer to an earlier request is dropped; a
  malformed reply is `MT_EREPLY`, and the next request reconnects.
* Against the real `PredictServer` (the trainer's serving socket): a round trip, a
  request before serving (no serve file: `MT_ETIMEDOUT`; bound but not serving:
  refused `not_serving`), another run (`wrong_run`), inputs that are not the published
  ones (refused before anything is sent), outputs that do not fit their buffers.

The C side is `clients/c/tests/mt_script.c` (its ``input``, ``output``, ``predict``
commands; `predict_script`). The Fortran module's `mt_predict` and these paths under
sanitizers are in test_c_predict_builds.py. The simulations of a real trainer (C and Fortran) are in
tests/c/test_c_predict_study.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_runs import CPredict
from predict_script import (
    MT_EDTYPE,
    MT_EENV,
    MT_EFIELD,
    MT_EREFUSED,
    MT_EREPLY,
    MT_ESHAPE,
    MT_ETIMEDOUT,
    outputs_of,
    status,
)
from predict_server import INPUTS, VERSION, answering_server

from melissa_trainer import wire as P
from melissa_trainer.client.predict_errors import UNANSWERED
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_rendezvous import check_inputs
from melissa_trainer.wire.predict_describe import encode_description, is_describe

pytestmark = pytest.mark.e2e  # every test here starts a process


#: the inputs the ROUTER of `test_request_and_replies_through_the_python_codec` describes
SPECS = P.field_specs({"u": ((4,), "float32"), "k": ((2, 3), "int64")})


def recv_request(router: zmq.Socket) -> tuple[bytes, list[bytes]]:
    """The next PREDICT; a DESCRIBE before it (each new connection's first, the
    endpoint given) is answered with `SPECS`, as a trainer does."""
    while True:
        assert router.poll(30_000), "no request from the C client"
        identity, *frames = router.recv_multipart()
        if not is_describe(frames):
            return identity, frames
        sim, rid = P.peek_simulation_id(frames[0]), P.peek_request_id(frames[0])
        assert sim is not None and rid is not None
        router.send_multipart([identity, encode_description(sim, rid, 0, SPECS)])


def test_request_and_replies_through_the_python_codec(
    c_predict: CPredict, zctx: zmq.Context
) -> None:
    router = zctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    serve = router.getsockopt_string(zmq.LAST_ENDPOINT)
    with c_predict.script({"MELISSA_TRAINER_RUN_ID": "run-7"}, ask=[f"serve {serve}"]) as script:
        u = np.array([1.5, -2.0, 0.25, 3.0], np.float32)
        k = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
        ask = script.send(
            "input u 1 1 4 : 1.5 -2 0.25 3",
            "input k 7 2 2 3 : 1 2 3 4 5 6",
            "output y 2 8",
            "output n 6 1",
            "predict 2.5",
        )
        identity, frames = recv_request(router)
        request = P.decode_predict(frames, 1 << 20)
        assert (request.simulation_id, request.request_id) == (7, 2)  # (1: the DESCRIBE)
        assert (request.timeout_ms, request.run_id) == (2500, "run-7")
        assert list(request.arrays) == ["u", "k"]
        np.testing.assert_array_equal(request.arrays["u"], u)
        np.testing.assert_array_equal(request.arrays["k"], k)
        assert request.arrays["k"].dtype == np.int64
        want = P.encode_predict(7, 2, 2500, "run-7", {"u": u, "k": k})
        assert frames == [bytes(f) for f in want]  # byte for byte
        y = np.arange(6, dtype=np.float64).reshape(3, 2) / 8
        n = np.array([42], np.int32)
        router.send_multipart([identity, *P.encode_prediction(7, 2, 120, {"y": y, "n": n})])

        refused = script.send("predict 2.5")
        identity, frames = recv_request(router)
        assert P.decode_predict(frames, 1 << 20).request_id == 3
        detail = "64 requests wait already"
        router.send_multipart([identity, P.encode_refused(7, 3, 121, "busy", detail, 250)])

        late = script.send("predict 2.5")
        identity, frames = recv_request(router)
        assert P.decode_predict(frames, 1 << 20).request_id == 4
        stale = P.encode_prediction(7, 3, 122, {"y": np.zeros((3, 2)), "n": n})  # request 3's
        router.send_multipart([identity, *stale])
        router.send_multipart([identity, *P.encode_prediction(7, 4, 123, {"y": -y, "n": n})])

        broken = script.send("predict 2.5")
        identity, frames = recv_request(router)
        bad = bytearray(P.encode_refused(7, 5, 124, "busy"))
        bad[0:4] = b"XXXX"
        router.send_multipart([identity, bytes(bad)])

        again = script.send("predict 2.5")  # a new socket: a new identity at the ROUTER
        identity2, frames = recv_request(router)
        # (6: the new connection's DESCRIBE)
        assert identity2 != identity and P.decode_predict(frames, 1 << 20).request_id == 7
        router.send_multipart([identity2, *P.encode_prediction(7, 7, 125, {"y": y, "n": n})])

        unanswered = script.send("predict 0.3")  # read, never answered: a timeout
        identity3, frames = recv_request(router)
        assert P.decode_predict(frames, 1 << 20).request_id == 8
        after = script.send("predict 2.5")  # asked again on a new socket (9: its DESCRIBE)
        identity4, frames = recv_request(router)
        assert identity4 != identity3 and P.decode_predict(frames, 1 << 20).request_id == 10
        router.send_multipart([identity3, *P.encode_prediction(7, 8, 126, {"y": y, "n": n})])
        router.send_multipart([identity4, *P.encode_prediction(7, 10, 127, {"y": y, "n": n})])
        lines, _ = script.finish()
    assert status(lines, ask) == (0, "")
    version, outs = outputs_of(lines, ask)
    assert version == 120
    np.testing.assert_array_equal(outs["y"], y)
    np.testing.assert_array_equal(outs["n"], n)
    assert lines[refused][0] == "refusal 1 0.25"
    code, message = status(lines, refused)
    assert code == MT_EREFUSED and f"(busy): {detail}" in message
    version, outs = outputs_of(lines, late)
    assert version == 123 and status(lines, late)[0] == 0
    np.testing.assert_array_equal(outs["y"], -y)
    code, message = status(lines, broken)
    assert code == MT_EREPLY and "magic" in message
    assert outputs_of(lines, again)[0] == 125
    code, message = status(lines, unanswered)
    where = f"the trainer's serving endpoint {serve}"
    assert code == MT_ETIMEDOUT
    assert message == f"no prediction from {where} within 0.3 s: {UNANSWERED}"
    assert outputs_of(lines, after)[0] == 127  # (the late answer went to the closed socket)


def test_against_the_serving_socket(c_predict: CPredict, tmp_path: Path) -> None:
    """Round trips through the rendezvous; bad inputs and outputs refused before
    anything is sent (the server counts only the good requests)."""
    env = {"MELISSA_TRAINER_RUN_ID": "run-a", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    with (
        answering_server(tmp_path / "rv", run_id="run-a", max_queue=4) as (server, _),
        c_predict.script(env, 3, ask=[]) as script,
    ):
        good = script.send("input u 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20")
        shape = script.send("unstage", "input u 1 1 3 : 1 2 3", "output y 1 4", "predict 20")
        dtype = script.send("unstage", "input u 2 1 4 : 1 2 3 4", "output y 1 4", "predict 20")
        name = script.send("unstage", "input v 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20")
        extra = script.send("input u 1 1 4 : 1 2 3 4", "predict 20")
        small = script.send("unstage", "input u 1 1 4 : 5 6 7 8", "output y 1 2", "predict 20")
        other = script.send("unstage", "input u 1 1 4 : 5 6 7 8", "output z 1 4", "predict 20")
        kind = script.send("unstage", "input u 1 1 4 : 5 6 7 8", "output y 2 4", "predict 20")
        last = script.send("unstage", "input u 1 1 4 : 0 0 0 1", "output y 1 4", "predict 20")
        lines, _ = script.finish()
    version, outs = outputs_of(lines, good)
    assert version == VERSION and status(lines, good) == (0, "")
    np.testing.assert_array_equal(outs["y"], [19, 21, 23, 25])
    assert status(lines, shape) == (
        MT_ESHAPE,
        "mt_predict: input 'u' is <f4 (3,), declared <f4 (4,)",
    )
    assert status(lines, dtype) == (
        MT_EDTYPE,
        "mt_predict: input 'u' is <f8 (4,), declared <f4 (4,) (cast it to <f4: convert the "
        "data to float32, dtype MT_FLOAT32)",
    )
    # the Python client's words, which name what to fix (unknown, missing; user trial 39:
    # C said only the two lists)
    spec = [P.FieldSpec("u", np.dtype("float32"), (4,))]
    four = np.zeros(4, np.float32)
    assert status(lines, name) == (
        MT_EFIELD,
        f"mt_predict: {check_inputs({'v': four}, spec)}",
    )
    assert status(lines, name)[1].endswith("(unknown: 'v'; missing: 'u')")
    assert status(lines, extra) == (
        MT_EFIELD,
        f"mt_predict: {check_inputs({'v': four, 'u': four}, spec)}",
    )
    assert status(lines, extra)[1].startswith("mt_predict: arrays ['u', 'v'],")  # (sorted)
    # outputs are checked against the answer (sent, answered, then not written)
    assert status(lines, small) == (
        MT_ESHAPE, "mt_predict: output 'y' is float32 (4,): 4 elements, the buffer holds 2"
    )  # fmt: skip
    assert status(lines, other) == (
        MT_EFIELD, "mt_predict: output 'z' is not in the prediction, whose outputs are ['y']"
    )  # fmt: skip
    assert status(lines, kind) == (
        MT_EDTYPE, "mt_predict: output 'y' is float32 (4,), the buffer is for float64 (give a "
        "float32 buffer, dtype MT_FLOAT32)"
    )  # fmt: skip
    np.testing.assert_array_equal(outputs_of(lines, last)[1]["y"], [17, 17, 17, 19])
    assert server.telemetry() == {"requests": 5, "answered": 5}


def test_before_serving_a_timeout_then_not_serving(c_predict: CPredict, tmp_path: Path) -> None:
    """No serve file yet: MT_ETIMEDOUT (the simulation falls back); a socket bound but
    not serving: refused ``not_serving``. Neither blocks past its timeout."""
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    lines, [early] = c_predict.replies(env, 0.3, sim=0)
    code, message = status(lines, early)
    assert code == MT_ETIMEDOUT
    assert message.endswith("within 0.3 s: no trainer serves predictions there (yet)")
    server = PredictServer(INPUTS, rendezvous_dir=tmp_path)
    server.start()
    try:
        lines, [refused] = c_predict.replies(env, 20, sim=0)
    finally:
        server.stop()
    assert lines[refused][0].startswith("refusal 2 ")
    code, message = status(lines, refused)
    assert code == MT_EREFUSED and "(not_serving)" in message


def test_another_runs_trainer_refuses_or_is_ignored(c_predict: CPredict, tmp_path: Path) -> None:
    """A simulation of run-b: told the endpoint, the trainer of run-a refuses it
    ``wrong_run``; through the rendezvous, run-a's serve file is ignored: the request
    fails at once, naming both runs (the words: test_c_predict_other_run.py)."""
    server = PredictServer(INPUTS, rendezvous_dir=tmp_path, run_id="run-a")
    server.start()
    server.serving = True
    try:
        env = {
            "MELISSA_TRAINER_RUN_ID": "run-b",
            "MELISSA_TRAINER_SERVE_ENDPOINTS": server.endpoint or "",
        }
        lines, [told] = c_predict.replies(env, 20)
        env = {"MELISSA_TRAINER_RUN_ID": "run-b", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
        # (past the test's timeout: at once, or fail)
        lines2, [looked] = c_predict.replies(env, 300)
    finally:
        server.stop()
    assert lines[told][0].startswith("refusal 3 ")
    assert status(lines, told)[0] == MT_EREFUSED
    code, message = status(lines2, looked)
    assert code == MT_ETIMEDOUT and "belongs to another run (['run-a']), not run 'run-b'" in message


def test_curve_key_of_the_serve_file_is_used(c_predict: CPredict, tmp_path: Path) -> None:
    """A serving socket with CURVE keys: the C client that reads the serve file (its
    public key) is answered; one given the endpoint without the key gets no answer, and
    never a reply it cannot trust: MT_EENV as soon as the handshake fails, naming the
    missing key (as the Python client's ValueError; test_c_predict_curve_refused.py)."""
    with answering_server(tmp_path, curve=True) as (server, _):
        lines, [keyed] = c_predict.replies({"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}, 20)
        listed = {"MELISSA_TRAINER_SERVE_ENDPOINTS": server.endpoint or ""}
        lines2, [plain] = c_predict.replies(listed, 60)  # (said at once: not waited out)
    code, message = status(lines, keyed)
    if code != 0 and "built without" in message:
        pytest.skip(f"the C client's libzmq: {message}")
    assert code == 0 and outputs_of(lines, keyed)[0] == VERSION
    code, message = status(lines2, plain)
    assert code == MT_EENV and "no CURVE key is known for it here" in message, message
    assert server.telemetry() == {"requests": 1, "answered": 1}
