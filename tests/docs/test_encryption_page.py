"""docs/how-to/encryption.md runs as written: a user trial found no page on encrypting the
stream, and a key-pair recipe ("make one with `zmq.curve_keypair()`") that gave no
command. Every code block of the page is taken from it and run, in order, as a user
would: the key one-liner in bash, the trainer's configuration, a solver started with the
rendezvous, one with `MELISSA_TRAINER_KEY` in the shell, one with it set from Python code.

The oracle: a real `Receiver` made from the page's configuration, whose buffer shows
every step of the three simulations arriving; and, for the mistakes, the messages that
real refused handshakes raise, which must hold the words the page quotes."""

from __future__ import annotations

import dataclasses
import os
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq
from helpers import drain, running

from melissa_trainer import ReceiverConfig
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, Client, ClientTuning
from melissa_trainer.stream.receiver import Receiver

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "encryption.md"
#: the page's code blocks, in order: what each is (the test runs each as such)
BLOCKS = ["bash", "python", "bash", "bash", "python"]
KEY_PAIR, TRAINER, WITH_RENDEZVOUS, WITH_KEY, KEY_FROM_CODE = range(5)
#: the endpoint the page shows, replaced by the receiver's own
PAGE_ENDPOINT = "tcp://node3:41234"
STEPS = 3
#: the solver the page's commands run (own-solver.md's, cut down)
SOLVER = f"""\
import numpy as np
from melissa_trainer.client import Client

with Client({{"u": ((4,), "float32")}}) as client:
    for t in range({STEPS}):
        client.send(t, {{"u": np.full(4, t, np.float32)}})
"""
#: what each refused handshake's message says, as the page quotes it
NO_KEY = (
    "no CURVE key is known for it here: set MELISSA_TRAINER_KEY to its public key, or use "
    "the rendezvous (MELISSA_TRAINER_RENDEZVOUS: its files carry the key)"
)
WRONG_KEY = (
    "the server key does not match: check MELISSA_TRAINER_KEY / the rendezvous file (the "
    "receiver's curve_public_key, that of the trainer running now)"
)
#: a key for a receiver without CURVE: what every such message holds (the plain
#: receiver's words when ZeroMQ said why it refused, else the wrong key's, which add it)
PLAIN = "the receiver takes plain (unencrypted) connections"
REFUSED = "the receiver refused this client's handshake, nothing sent to it was delivered:"


def page_text() -> str:
    """The page, its whitespace runs made single spaces (table cells, wrapped lines)."""
    return " ".join(PAGE.read_text(encoding="utf-8").split())


def blocks() -> list[tuple[str, str]]:
    """The page's fenced code blocks, in order: (language, code)."""
    return re.findall(r"```(\w*)\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """None of the stream's variables from the caller's shell; those a snippet sets
    (`os.environ[...]`) are undone after the test (set first, so that they are)."""
    for name in (ENV_ENDPOINTS, ENV_KEY, ENV_RENDEZVOUS, "MELISSA_TRAINER_RUN_ID"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    yield


def test_the_page_has_the_blocks_this_test_runs() -> None:
    """A block added to the page without a run here fails, so that none goes untested."""
    assert [language for language, _ in blocks()] == BLOCKS
    assert PAGE_ENDPOINT in blocks()[WITH_KEY][1] and PAGE_ENDPOINT in blocks()[KEY_FROM_CODE][1]


def shell(code: str, cwd: Path, **env: str) -> None:
    """Run `code` in bash in `cwd`, `python` being this interpreter, as a user's shell."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    full = {**os.environ, "PATH": path, "PYTHONPATH": python_path, **env}
    done = subprocess.run(
        ["bash", "-c", code], cwd=cwd, env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{code}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"


def private(path: Path) -> bool:
    """Whether only its owner may read or write `path`."""
    return stat.S_IMODE(path.stat().st_mode) & 0o077 == 0


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_page_s_commands_stream_encrypted_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the page's files are relative: stream.key, outputs/
    code = [c for _, c in blocks()]
    shell(code[KEY_PAIR], tmp_path)
    secret = (tmp_path / "stream.key").read_text()
    public = (tmp_path / "stream.pub").read_text()
    assert len(secret.strip()) == 40 and len(public.strip()) == 40  # Z85 text, a newline
    assert zmq.curve_public(secret.strip().encode()) == public.strip().encode()
    assert private(tmp_path / "stream.key") and private(tmp_path / "stream.pub")

    namespace: dict[str, object] = {}
    exec(compile(code[TRAINER], str(PAGE), "exec"), namespace)
    config = namespace["config"]
    assert isinstance(config, ReceiverConfig)
    # (the page's wildcard bind advertises this machine's host name: loopback here)
    config = dataclasses.replace(config, advertise_host="127.0.0.1")
    buffer = FIFOBuffer(100)
    receiver = Receiver(buffer, 0, 1, config)
    receiver.start()
    try:
        assert receiver.endpoint is not None
        published = tmp_path / "outputs" / "rendezvous" / "rank_0.json"
        assert f'"curve_public_key": "{public.strip()}"' in published.read_text()
        assert private(published)  # (the page: readable by you only)

        (tmp_path / "my_solver.py").write_text(SOLVER)
        shell(code[WITH_RENDEZVOUS], tmp_path)  # no key given: the rendezvous's
        shell(code[WITH_KEY].replace(PAGE_ENDPOINT, receiver.endpoint), tmp_path)

        snippet = code[KEY_FROM_CODE].replace(PAGE_ENDPOINT, receiver.endpoint)
        namespace = {}
        exec(compile(snippet, str(PAGE), "exec"), namespace)
        client = namespace["client"]
        assert isinstance(client, Client)
        with client:
            for t in range(STEPS):
                client.send(t, {"u": np.full(4, t, np.float32)})
        got = drain(buffer)  # (the stream ends at the third simulation's BYE)
    finally:
        receiver.stop()
    received = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in got)
    assert received == [(sim, t) for sim in range(3) for t in range(STEPS)]
    for s in got:
        assert s["u"].tolist() == [float(s["time_step"])] * 4


#: no bound but the refusal: a close that does not see it waits for the test's timeout
UNBOUNDED = ClientTuning(close_timeout=None, disconnected_timeout=None)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mistake", ["no_key", "wrong_key", "key_for_plain_receiver"])
def test_each_mistake_s_message_holds_the_page_s_words(
    monkeypatch: pytest.MonkeyPatch, mistake: str
) -> None:
    """The three mistakes of the page's table, against a real receiver: the error names
    the endpoint and holds the words the page quotes. The wrong key is the page's
    swapped pair: the public key given as the secret, `stream.pub` to the client."""
    public, secret = (k.decode() for k in zmq.curve_keypair())
    server_secret = {"no_key": secret, "wrong_key": public, "key_for_plain_receiver": None}
    said = {"no_key": NO_KEY, "wrong_key": WRONG_KEY, "key_for_plain_receiver": PLAIN}
    assert said[mistake] in page_text()
    buffer = FIFOBuffer(10)
    config = {"curve_secret_key": server_secret[mistake], "expected_simulations": 1}
    with running(buffer, **config) as receiver:
        assert receiver.endpoint is not None
        if mistake != "no_key":
            monkeypatch.setenv(ENV_KEY, public)
        client: Client | None = None
        with pytest.raises(ValueError) as error:
            try:  # (the refusal may come at the HELLO, in Client(), on a loaded machine)
                client = Client(
                    {"u": ((4,), "float32")},
                    simulation_id=7,
                    endpoints=receiver.endpoint,
                    tuning=UNBOUNDED,
                )
                client.send(0, {"u": np.zeros(4, np.float32)})
            finally:
                if client is not None:
                    client.close()
        text = " ".join(str(error.value).split())
        assert said[mistake] in text and receiver.endpoint in text, text
        # (the page: every message says so after the endpoint, but the no-key one may
        # begin otherwise)
        if f"{receiver.endpoint}: not a melissa-trainer receiver" not in text:
            assert f"{receiver.endpoint}: {REFUSED}" in text, text
        if mistake == "key_for_plain_receiver":
            assert "unset MELISSA_TRAINER_KEY" in text, text
        assert len(buffer) == 0


def test_the_keys_the_page_says_are_refused_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret key that is not 40 characters, at the configuration; a public key that is
    not, before a client sends anything (the page quotes both messages)."""
    text = page_text()
    with pytest.raises(ValueError) as error:
        ReceiverConfig(curve_secret_key="not-a-key")
    assert f"ValueError: {error.value}" in text
    monkeypatch.setenv(ENV_KEY, "abc")
    with pytest.raises(ValueError) as error:
        Client({"u": ((4,), "float32")}, simulation_id=1, endpoints="tcp://127.0.0.1:1")
    said, quoted = str(error.value), "not 'abc' (it must be 40 characters, not 3)"
    assert quoted in said
    assert "ValueError: " + said.replace(quoted, "not '...' (it must be ...)") in text
