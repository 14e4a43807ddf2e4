"""A refused CURVE key's words name where the key came from: an argument
(``Client(curve_server_key=...)``, C ``mt_set_curve_server_key``), ``MELISSA_TRAINER_KEY``,
or the rendezvous file (its ``curve_public_key``). Before, every refused key said "check
MELISSA_TRAINER_KEY" (and a key for a plain receiver "unset MELISSA_TRAINER_KEY"), also
to a user who never set it (the key given as an argument, or read from a rendezvous
file). `handshake_words.KEYED` holds each source's words; the C client's handshake.c
says them word for word (read here from its source: no build).

Real sockets: a real `Receiver` (CURVE on or off), nothing of which arrives; real
rendezvous files. Failed before (no `KEYED`; the words of ``MELISSA_TRAINER_KEY``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.client import handshake_words as words
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

SOURCE = Path(__file__).resolve().parents[2] / "clients" / "c" / "src" / "handshake.c"
#: what `Handshakes.refused` adds to a refused key's mismatch words
RUNNING = " (the receiver's curve_public_key, that of the trainer running now)"
#: a close after a failure does not wait long (nothing listens after the refusal)
TUNING = ClientTuning(close_timeout=60.0, failed_close_timeout=0.1)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, "MELISSA_TRAINER_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    yield


def causes(source: str) -> list[str]:
    """The causes `Handshakes.refused` words for a key from `source`: the mismatch, the
    plain receiver's, and the refusal without detail's."""
    mismatch, plain, undetailed = words.KEYED[source]
    return [mismatch + RUNNING, plain, f"{mismatch}{RUNNING}; or {undetailed}"]


@pytest.mark.parametrize("source", [words.ARGUMENT, words.ENV, words.RENDEZVOUS])
def test_each_sources_words_are_the_c_client_s(source: str) -> None:
    literals = re.sub(r'"(?:\s|\\\n)*"', "", SOURCE.read_text())
    for cause in causes(source):
        assert f'"{cause}"' in literals, cause  # (a whole literal of handshake.c's KEYED)


@pytest.mark.parametrize("source", [words.ARGUMENT, words.RENDEZVOUS])
def test_no_word_of_another_source_names_the_variable(source: str) -> None:
    for cause in causes(source):
        assert ENV_KEY not in cause, cause


def refusal(endpoint: str, **client: Any) -> str:
    """The ValueError of a client of simulation 7 that streams 3 steps then closes."""
    with pytest.raises(ValueError) as error:
        c = Client({"u": ((4,), "float32")}, simulation_id=7, tuning=TUNING, **client)
        try:
            for t in range(3):
                c.send(t, {"u": np.full(4, t, np.float32)})
        finally:
            c.close()
    text = str(error.value)
    assert endpoint in text and "nothing sent to it was delivered" in text, text
    return text


def said(source: str, plain_receiver: bool, text: str) -> bool:
    """Whether `text` gives the words of `source` for a wrong key, or for a plain
    receiver (its mechanism mismatch's detail may be lost, under load: the words of a
    refusal without detail then, which name the plain receiver too)."""
    mismatch, plain, detailless = causes(source)
    return (plain in text or detailless in text) if plain_receiver else mismatch in text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("plain_receiver", [False, True], ids=["wrong_key", "plain_receiver"])
def test_a_key_given_as_an_argument_is_named_so(plain_receiver: bool) -> None:
    buffer = FIFOBuffer(100)
    secret = None if plain_receiver else zmq.curve_keypair()[1]
    with running(buffer, curve_secret_key=secret, expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        key = zmq.curve_keypair()[0].decode()
        text = refusal(receiver.endpoint, endpoints=receiver.endpoint, curve_server_key=key)
        assert said(words.ARGUMENT, plain_receiver, text), text
        assert ENV_KEY not in text, text  # (before: "check/unset MELISSA_TRAINER_KEY")
        assert len(buffer) == 0  # (the oracle: nothing arrived, as the message says)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("plain_receiver", [False, True], ids=["stale_key", "plain_receiver"])
def test_a_key_read_from_a_rendezvous_file_is_named_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, plain_receiver: bool
) -> None:
    buffer = FIFOBuffer(100)
    secret = None if plain_receiver else zmq.curve_keypair()[1]
    with running(buffer, curve_secret_key=secret, expected_simulations=1) as receiver:
        assert receiver.endpoint is not None
        stale = zmq.curve_keypair()[0].decode()  # (an earlier trainer's, say)
        write_rendezvous(tmp_path, 0, 1, receiver.endpoint, {"curve_public_key": stale})
        monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
        monkeypatch.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())  # (not read then)
        text = refusal(receiver.endpoint)
        assert said(words.RENDEZVOUS, plain_receiver, text), text
        assert ENV_KEY not in text, text  # (before: "check/unset MELISSA_TRAINER_KEY")
        assert len(buffer) == 0


@pytest.mark.timeout(60)
def test_a_key_of_the_variable_still_names_it() -> None:
    """(the guard: the variable's words are those of before, `MISMATCH`)"""
    buffer = FIFOBuffer(100)
    with running(buffer, curve_secret_key=zmq.curve_keypair()[1], expected_simulations=1) as rec:
        assert rec.endpoint is not None
        with pytest.MonkeyPatch.context() as env:
            env.setenv(ENV_KEY, zmq.curve_keypair()[0].decode())
            text = refusal(rec.endpoint, endpoints=rec.endpoint)
        assert said(words.ENV, False, text) and words.MISMATCH in text, text
