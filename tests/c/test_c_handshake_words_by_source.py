"""The compiled C client's refused CURVE key names where the key came from, as the
Python client's (`handshake_words.KEYED`, tests/client/test_handshake_words_by_source.py):
``mt_set_curve_server_key`` ("the curve_server_key given"), ``MELISSA_TRAINER_KEY``, or
the rendezvous file. Before, each said "check MELISSA_TRAINER_KEY", also to a solver
that gave the key by ``mt_set_curve_server_key`` or read it from a rendezvous file.

The oracle: a real CURVE `Receiver` (in this process), nothing of which arrives; the C
client's message has the same cause as the Python client's for the same key."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import handshake_words as words
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EENV = 6
FLOAT32 = 1  # the protocol's dtype code
RUNNING = " (the receiver's curve_public_key, that of the trainer running now)"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("source", [words.ARGUMENT, words.RENDEZVOUS, words.ENV])
def test_a_refused_key_names_its_source(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    source: str,
) -> None:
    buffer = FIFOBuffer(16)
    wrong = zmq.curve_keypair()[0].decode()
    with running(buffer, curve_secret_key=zmq.curve_keypair()[1], expected_simulations=1) as rec:
        assert rec.endpoint is not None
        env, setup = {"MELISSA_TRAINER_KEY": zmq.curve_keypair()[0].decode()}, ""
        if source == words.ARGUMENT:
            setup = f"endpoints {rec.endpoint}\ncurve_key {wrong}\n"
        elif source == words.RENDEZVOUS:
            rv = tmp_path / "rendezvous"
            write_rendezvous(rv, 0, 1, rec.endpoint, {"curve_public_key": wrong})
            env["MELISSA_TRAINER_RENDEZVOUS"] = str(rv)
        else:
            env["MELISSA_TRAINER_ENDPOINTS"] = rec.endpoint
        sends = "".join(f"send {t} u {FLOAT32} 4 {t}\n" for t in range(3))
        script = f"id 2\n{setup}close_timeout 30\nfield u {FLOAT32} 1 4\nstart\n{sends}close\n"
        result = run_script(script_exe, script, tmp_path, env, timeout=90)
        failed = [(code, text) for _, (code, text) in sorted(result.items()) if code]
        code, text = failed[0]
        mismatch = words.KEYED[source][0]
        assert code == MT_EENV and f"{mismatch}{RUNNING}" in text, result
        assert (source == words.ENV) == ("MELISSA_TRAINER_KEY" in text), text  # (before: all)
        assert len(buffer) == 0
