"""A `Predictor` whose key comes from a serve file, refused by the serving socket with a
detail (a mechanism mismatch: the file says CURVE, the socket takes plain connections),
named the key's source wrongly: "the key given (curve_server_key or
MELISSA_TRAINER_SERVE_KEY) is not its public key", where none was given (a user looks
for a variable they never set). It names the serve file now, in the C client's words
(clients/c/src/predict_watch.c). Failed before. That detail says the serving socket is
plain: the words are now `PLAIN_SERVE` with the serve file's (`PLAIN_SERVE_FILE`: a
stale serve file?), not the generic "is not its public key, or it takes no CURVE"
(tests/client/test_predict_serve_file_key_words.py). (A key given still says "the key
given": tests/c/test_c_predict_curve_refused.py.)

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
from melissa_trainer.client.predict_endpoint import ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import PLAIN_SERVE, PLAIN_SERVE_FILE

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

#: the words of a serve file's key refused by a plain serving socket (predict_watch.c
#: refused_handshake: "%lld" for the rank, its variable for `{env_rendezvous}`)
SERVE_FILE_KEY = f"refused this client's CURVE handshake: {PLAIN_SERVE}{PLAIN_SERVE_FILE}"


@pytest.mark.timeout(120)
def test_a_serve_files_key_refused_with_a_detail_names_the_serve_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (ENV_SERVE_ENDPOINTS, ENV_SERVE_KEY, "MELISSA_TRAINER_RENDEZVOUS"):
        monkeypatch.delenv(name, raising=False)
    source = Path(__file__).parents[2] / "clients" / "c" / "src" / "predict_watch.c"
    in_c = PLAIN_SERVE_FILE.format(rank="%lld", env_rendezvous="MELISSA_TRAINER_RENDEZVOUS")
    assert in_c in re.sub(r'"(?:\s|\\\n)*"', "", source.read_text())
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
    words = SERVE_FILE_KEY.format(rank=0, env_rendezvous="MELISSA_TRAINER_RENDEZVOUS")
    assert said[0] == f"the serving endpoint {server.endpoint} {words}", said
    assert "the key given" not in said[0], said  # (before)
    assert "{rank}" not in said[0], said  # (before: "serve_{rank}.json", unformatted)
