"""A `Predictor` whose key comes from a serve file, refused by the serving socket with a
detail (a mechanism mismatch: the file says CURVE, the socket takes plain connections),
named the key's source wrongly: "the key given (curve_server_key or
MELISSA_TRAINER_SERVE_KEY) is not its public key", where none was given (a user looks
for a variable they never set). It names the serve file now, in the C client's words
(clients/c/src/predict_watch.c: "the key of its serve file (curve_public_key)"). Failed
before. (A key given still says "the key given": tests/c/test_c_predict_curve_refused.py.)

Real sockets: a real `PredictServer` without CURVE, its serve file given a key."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import zmq
from predict_server import answering_server

from melissa_trainer.client import Predictor, PredictTimeout
from melissa_trainer.client.predict_link import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

#: the C client's words for the key's source (predict_watch.c refused_handshake)
SERVE_FILE_KEY = (
    "refused this client's CURVE handshake: the key of its serve file (curve_public_key) "
    "is not its public key, or it takes no CURVE"
)


@pytest.mark.timeout(120)
def test_a_serve_files_key_refused_with_a_detail_names_the_serve_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    source = Path(__file__).parents[2] / "clients" / "c" / "src" / "predict_watch.c"
    assert SERVE_FILE_KEY.split(": ", 1)[1] in re.sub(r'"\s*"', "", source.read_text())
    said: list[str] = []
    with answering_server(tmp_path / "rv") as (server, _):
        entry = json.loads((tmp_path / "rv" / "serve_0.json").read_text())
        entry["curve_public_key"] = zmq.curve_keypair()[0].decode("ascii")
        (tmp_path / "stale").mkdir()
        (tmp_path / "stale" / "serve_0.json").write_text(json.dumps(entry))
        with Predictor(0, rendezvous_dir=tmp_path / "stale") as predictor:
            # (ZeroMQ may lose the mismatch's detail, under load: then the request waits
            # its timeout, a serve file's key being maybe stale; a detail comes soon)
            for _ in range(10):
                try:
                    predictor.predict({"u": np.zeros(4, np.float32)}, timeout=2)
                except PredictTimeout:
                    continue
                except ValueError as error:
                    said.append(str(error))
                    break
    assert said, "no request saw the mismatch's detail in 10"
    assert f"the serving endpoint {server.endpoint} {SERVE_FILE_KEY}" in said[0], said
    assert "the key given" not in said[0], said  # (before)
    # (before: "serve_{rank}.json", unformatted, where the C client says the rank's)
    assert "the `endpoint` of serve_0.json" in said[0] and "{rank}" not in said[0], said
