"""A receiver, and a serving socket, with a CURVE secret key say their public key in
their start-up log line (the Z85 text, never the secret), so that an operator can hand
it to solvers started by hand (``MELISSA_TRAINER_KEY``; ``MELISSA_TRAINER_SERVE_KEY``
for the serving socket) without a Python session to derive it: before, a receiver
with CURVE logged nothing of the kind, and only the rendezvous files carried the key
(docs/how-to/encryption.md says so). Real sockets; each test failed before."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq
from helpers import running

from melissa_trainer import ReceiverConfig, StreamSource
from melissa_trainer.client.predict_errors import SILENT
from melissa_trainer.hooks.serving import ServingHook

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")


def test_a_curve_receiver_logs_its_public_key_not_its_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    public, secret = (k.decode() for k in zmq.curve_keypair())
    level = caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver")
    with level, running(curve_secret_key=secret) as receiver:
        endpoint = receiver.endpoint
    said = [r.getMessage() for r in caplog.records if "with CURVE" in r.getMessage()]
    assert said == [
        f"receiver of rank 0 bound to {endpoint} with CURVE; its public key: {public} "
        "(MELISSA_TRAINER_KEY for a solver given the endpoint; the rendezvous files carry it)"
    ], caplog.text
    assert secret not in caplog.text


def test_a_plain_receiver_beyond_loopback_still_says_any_peer_may_send(
    caplog: pytest.LogCaptureFixture,
) -> None:
    level = caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver")
    with level, running(bind="tcp://0.0.0.0:*") as receiver:
        endpoint = receiver.endpoint
    assert f"receiver of rank 0 bound to {endpoint} without CURVE: any peer may send" in (
        caplog.text
    ), caplog.text
    assert "public key" not in caplog.text


def test_a_curve_serving_socket_logs_its_public_key(caplog: pytest.LogCaptureFixture) -> None:
    public, secret = (k.decode() for k in zmq.curve_keypair())
    source = StreamSource(ReceiverConfig(curve_secret_key=secret))
    trainer = SimpleNamespace(source=source, process_index=0, num_processes=1, run_id=None)
    hook = ServingHook({"u": ((4,), "float32")})
    with caplog.at_level(logging.INFO, logger="melissa_trainer.hooks.serving"):
        hook.on_source_started(trainer, None, None)  # type: ignore[arg-type]
        try:
            endpoint = hook.endpoint
        finally:
            hook.close()
    assert (
        f"serving socket of rank 0 bound to {endpoint} with CURVE; its public key: {public} "
        "(MELISSA_TRAINER_SERVE_KEY for a solver given the endpoint; the rendezvous files "
        "carry it)"
    ) in caplog.text, caplog.text
    assert secret not in caplog.text


def test_the_encryption_page_quotes_the_log_lines_and_the_silent_words() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "encryption.md"
    text = " ".join(page.read_text(encoding="utf-8").split())
    assert (
        "receiver of rank 0 bound to tcp://node3:41234 with CURVE; its public key: <the 40 "
        "characters> (MELISSA_TRAINER_KEY for a solver given the endpoint; the rendezvous "
        "files carry it)"
    ) in text
    assert "(MELISSA_TRAINER_SERVE_KEY for a solver given the endpoint; ...)" in text
    assert f"no ZeroMQ handshake completed within T s: {SILENT}`" in text
