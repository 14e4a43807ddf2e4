"""The specification's numbers (docs/protocol.md): its hex dumps, of the stream and of
serving, are the encoder's output, and its dtype table is the wire's.
"""

from __future__ import annotations

import re

import numpy as np
from protocol_messages import SPEC, spec_dump

from melissa_trainer import wire as p


def test_spec_hex_dumps_are_encoder_output() -> None:
    payload = np.array([-0.5, 0.25], dtype="<f4").tobytes()
    # what a client that checked the payload sends: INLINE and FINITE
    data = p.encode_data_header(7, 3, 1, 2, b"u", 1, (2, 2), 2, 2, True, finite=True) + payload
    assert spec_dump("data") == data
    msg = p.decode(data)
    assert isinstance(msg, p.Data) and msg.offset == 2 and msg.elements == 2 and msg.finite
    u = [p.FieldSpec("u", np.dtype("<f4"), (2, 2))]
    hello = p.encode_hello(7, 1, 2, u, {"t0": 300.0}, client="python")  # as the client sends
    assert spec_dump("hello") == hello
    assert spec_dump("bye") == p.encode_bye(7, 1, 2, 10)


def test_spec_serving_hex_dumps_are_encoder_output() -> None:
    """Section 16's worked example: PREDICT, PREDICTION and REFUSED as encoded."""
    u = np.array([1.5, -2.0], "<f4")
    predict = p.encode_predict(7, 5, 500, None, {"u": u})
    assert spec_dump("predict") == predict[0] and bytes(predict[1]).hex() == "0000c03f000000c0"
    request = p.decode_predict([spec_dump("predict"), u.tobytes()], 1 << 20)
    assert (request.simulation_id, request.request_id, request.timeout_ms) == (7, 5, 500)
    y = np.array([0.75], "<f4")
    prediction = p.encode_prediction(7, 5, 120, {"prediction": y})
    assert spec_dump("prediction") == prediction[0] and bytes(prediction[1]).hex() == "0000403f"
    refused = p.encode_refused(7, 5, 120, "busy", "64 requests wait already", 100)
    assert spec_dump("refused") == refused


def test_spec_dtype_table() -> None:
    spec = SPEC.read_text().replace("\\|", "|")  # markdown escapes | in table cells
    rows = re.findall(r"^\| (\d+) \| `(.+?)` \| (\w+) \| (\d+) \|", spec, re.MULTILINE)
    assert {int(c): (s, n, int(i)) for c, s, n, i in rows} == {
        code: (dt.str, dt.name, dt.itemsize) for code, dt in p.DTYPES.items()
    }
