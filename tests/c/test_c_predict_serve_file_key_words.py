"""The compiled C client's `mt_predict` names a serve file's CURVE key as the serve
file's, in the Python client's words (tests/client/test_predict_serve_file_key_words.py,
tests/client/test_predict_handshake_serve_file_key.py):

* refused by a plain serving socket with ZeroMQ's mechanism-mismatch detail, it says the
  socket is not encrypted and the serve file may be stale (`PLAIN_SERVE` +
  `PLAIN_SERVE_FILE`), not the generic "the key of its serve file (curve_public_key) is
  not its public key, or it takes no CURVE";
* a key that is not a 40-character Z85 key is MT_EENV naming the file
  (`malformed_serve_key`), not MT_EZMQ "CURVE keys for 'E': Invalid argument".

Real serve files (a real `PredictServer`'s, rewritten), real sockets; for the first, a
serve file naming a socket without CURVE whose refusal always carries the mismatch's
detail (`predict_runs.plain_zmtp_peer`: a `PredictServer`'s loses it to a race now and
then, and the test asked 5 times hoping one kept it). Failed before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq
from predict_runs import CPredict
from predict_script import MT_EENV
from predict_server import answering_server
from silent_peer import plain_zmtp_peer

from melissa_trainer.client.predict_endpoint import ENV_SERVE_KEY
from melissa_trainer.client.predict_errors import (
    PLAIN_SERVE,
    PLAIN_SERVE_FILE,
    malformed_serve_key,
)
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]


def stale_copy(tmp_path: Path, key: str) -> Path:
    """A rendezvous directory whose serve_0.json is the live server's in `tmp_path/rv`
    with `key` as its curve_public_key."""
    entry = json.loads((tmp_path / "rv" / "serve_0.json").read_text())
    entry["curve_public_key"] = key
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "serve_0.json").write_text(json.dumps(entry))
    return tmp_path / "stale"


@pytest.mark.timeout(120)
def test_a_serve_files_key_refused_by_a_plain_socket_says_the_file_may_be_stale(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """Each request on a new socket (the one before was refused): each refusal has the
    mismatch's detail (`plain_zmtp_peer`), and each says the file may be stale."""
    with plain_zmtp_peer() as endpoint:
        key = zmq.curve_keypair()[0].decode("ascii")
        write_serving(tmp_path / "stale", 0, 1, endpoint, field_specs({"u": ((4,), "float32")}),
                      None, key)  # fmt: skip
        env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "stale")}
        results = c_predict.statuses(env, 5, 5, sim=0)
    if any("built without" in message for _, message in results):
        pytest.skip(f"the C client's libzmq: {results}")
    where = PLAIN_SERVE_FILE.format(rank=0, env_rendezvous="MELISSA_TRAINER_RENDEZVOUS")
    said = (
        f"mt_predict: the serving endpoint {endpoint} refused this client's CURVE "
        f"handshake: {PLAIN_SERVE}{where}"
    )
    assert results == [(MT_EENV, said)] * 2, results  # (before: "... or it takes no CURVE")


@pytest.mark.timeout(120)
def test_a_malformed_key_of_a_serve_file_names_the_file_as_python(
    c_predict: CPredict, tmp_path: Path
) -> None:
    with answering_server(tmp_path / "rv"):
        stale = stale_copy(tmp_path, "x" * 39)
    [(code, message)] = c_predict.statuses({"MELISSA_TRAINER_RENDEZVOUS": str(stale)}, 5, sim=0)
    file = f"{stale}/serve_0.json"  # (the Python client's: its Path, of a path without "/")
    python = malformed_serve_key("x" * 39, "40 characters, not 39", ENV_SERVE_KEY, file)
    assert (code, message) == (MT_EENV, str(python))  # (before: MT_EZMQ, "CURVE keys for")
