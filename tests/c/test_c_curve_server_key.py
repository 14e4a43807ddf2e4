"""The C client's `mt_set_curve_server_key`: the stream's CURVE key as an argument, as
the Python client's ``Client(curve_server_key=...)`` (tests/client/test_server_key_argument.py).
Before, a C solver could give the key only by ``MELISSA_TRAINER_KEY`` or a rendezvous.

It takes precedence over the variable for endpoints given directly (`mt_set_endpoints`,
``MELISSA_TRAINER_ENDPOINTS``); a key that is not Z85 is ``MT_EINVAL`` at the call, before
anything connects, in the Python client's words; with a rendezvous it must be the key its
files publish (else ``MT_EINVAL`` at `mt_client_start`, in the Python client's words too).
The C message is the Python one with the C API's names for Python's (`C_NAMES`).

The oracle: a real CURVE `Receiver` (in this process) takes the steps of the compiled C
client (mt_script) only when it holds the receiver's public key. Each test failed before
(mt_script, whose ``curve_key`` line calls mt_set_curve_server_key, did not compile: the
header declared no such function)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EINVAL, MT_EENV = 1, 6
FLOAT32 = 1  # the protocol's dtype code
FIELDS = {"u": ((4,), "float32")}
#: the Python client's names and the C API's, in the messages (all else word for word)
C_NAMES = [
    ("zmq.curve_keypair()[0]", "zmq_curve_keypair()"),
    ("; or None for receivers", "; or NULL for receivers"),
    ("publishes (None;", "publishes (NULL;"),
    ("; None: its receivers", "; NULL: its receivers"),
    ("drop curve_server_key=", "drop mt_set_curve_server_key"),
    ("pass endpoints=", "call mt_set_endpoints"),
]


def in_c_names(python_message: str) -> str:
    """The Python client's message with the C API's names (`C_NAMES`)."""
    for python, c in C_NAMES:
        python_message = python_message.replace(python, c)
    return python_message


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def stream(exe: Path, tmp_path: Path, env: dict[str, str], *setup: str) -> dict:
    """mt_script: simulation 2, `setup`, three steps of u, close."""
    sends = "".join(f"send {t} u {FLOAT32} 4 {t}\n" for t in range(3))
    lines = "".join(f"{line}\n" for line in setup)
    script = f"id 2\n{lines}close_timeout 20\nfield u {FLOAT32} 1 4\nstart\n{sends}close\n"
    return run_script(exe, script, tmp_path, env, timeout=90)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("given_by", ["variable", "mt_set_endpoints"])
def test_the_key_argument_wins_over_the_variable(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    given_by: str,
) -> None:
    public, secret = zmq.curve_keypair()
    other = zmq.curve_keypair()[0].decode()  # (another trainer's, in the variable)
    buffer = FIFOBuffer(16)
    with running(buffer=buffer, expected_simulations=1, curve_secret_key=secret) as receiver:
        env = {"MELISSA_TRAINER_KEY": other}
        endpoints = [f"endpoints {receiver.endpoint}"]
        if given_by == "variable":
            env["MELISSA_TRAINER_ENDPOINTS"], endpoints = receiver.endpoint, []
        # (the control: the variable's key alone is refused by this receiver)
        refused = stream(script_exe, tmp_path, env, *endpoints)
        assert refused[max(refused)][0] == MT_EENV, refused
        assert "refused this client's handshake" in refused[max(refused)][1], refused
        result = stream(script_exe, tmp_path, env, *endpoints, f"curve_key {public.decode()}")
        assert all(code == 0 for code, _ in result.values()), result
        got = [int(s["time_step"]) for s in buffer.get_batch(3, timeout=30)]
    assert sorted(got) == [0, 1, 2]  # the oracle: it arrived (before: no such function)


@pytest.mark.timeout(60)
def test_the_variable_is_not_read_when_the_argument_is_given(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # (as the Python client: the variable, even malformed, is not read then; nothing
    # listens at the endpoint: a start connects without waiting for it)
    env = {"MELISSA_TRAINER_KEY": "not-a-key", "MELISSA_TRAINER_ENDPOINTS": "tcp://127.0.0.1:9"}
    key = zmq.curve_keypair()[0].decode()
    script = f"id 1\ncurve_key {key}\nfield u {FLOAT32} 1 4\nstart\nabort\n"
    result = run_script(script_exe, script, tmp_path, env)
    assert result[4] == (0, ""), result
    without = run_script(script_exe, script.replace(f"curve_key {key}", "# none"), tmp_path, env)
    assert without[4][0] == MT_EENV and "MELISSA_TRAINER_KEY" in without[4][1], without


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "bad",
    [
        "x" * 39,  # the length
        "#" * 40,  # each 5 characters over 2**32
        "é" + "x" * 39,  # a character outside Z85 (40 characters: 41 bytes)
        'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"',  # (Python quotes it '...')
        "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf'",  # (Python quotes it "...")
        "\ufeffrq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]y",  # a pasted byte-order mark
        "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]y\u200b\t",  # zero-width space, tab
    ],
    ids=["short", "overflow", "non-ascii", "dquote", "squote", "bom", "invisible"],
)
def test_a_bad_key_errs_at_the_call_in_the_python_clients_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    by_hand: None,
    bad: str,
) -> None:
    # the call fails (before mt_client_start: nothing connects), nothing kept
    script = f"id 1\ncurve_key {bad}\n"
    code, message = run_script(script_exe, script, tmp_path)[2]
    with pytest.raises(ConfigError) as python_error:
        Client(FIELDS, simulation_id=1, endpoints="tcp://127.0.0.1:9", curve_server_key=bad)
    assert (code, message) == (MT_EINVAL, in_c_names(str(python_error.value)))
    assert message.startswith("curve_server_key="), message


@pytest.mark.timeout(90)
@pytest.mark.parametrize("published", [True, False], ids=["another-key", "plain"])
@pytest.mark.parametrize("rendezvous", ["variable", "mt_set_rendezvous"])
def test_a_key_other_than_the_rendezvous_errs_naming_the_fix(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    published: bool,
    rendezvous: str,
) -> None:
    rv = tmp_path / "rendezvous"
    theirs = zmq.curve_keypair()[0].decode()
    write_rendezvous(
        rv, 0, 1, "tcp://127.0.0.1:9", {"curve_public_key": theirs} if published else {}
    )
    mine = zmq.curve_keypair()[0].decode()
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv)} if rendezvous == "variable" else {}
    where = "" if env else f"rendezvous {rv} 10\n"
    script = f"{where}id 1\ncurve_key {mine}\nfield u {FLOAT32} 1 4\nstart\nabort\n"
    result = run_script(script_exe, script, tmp_path, env)
    code, message = result[max(n for n in result if n > 0) - 1]  # (the start's)
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rv))
    with pytest.raises(ConfigError) as python_error:
        Client(FIELDS, simulation_id=1, curve_server_key=mine)
    assert (code, message) == (MT_EINVAL, in_c_names(str(python_error.value))), result
    assert (
        "so drop mt_set_curve_server_key" in message
        and (theirs if published else "NULL") in message
    )


@pytest.mark.timeout(120)
def test_the_published_key_given_again_streams(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    # (the guard: the rendezvous' own key is no conflict)
    public, secret = zmq.curve_keypair()
    rv = tmp_path / "rendezvous"
    buffer = FIFOBuffer(16)
    with running(buffer=buffer, expected_simulations=1, curve_secret_key=secret, rendezvous_dir=rv):
        env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv), "MELISSA_TRAINER_ATTEMPT": "1"}
        result = stream(script_exe, tmp_path, env, f"curve_key {public.decode()}")
        assert all(code == 0 for code, _ in result.values()), result
        got = [int(s["time_step"]) for s in buffer.get_batch(3, timeout=30)]
    assert sorted(got) == [0, 1, 2]
