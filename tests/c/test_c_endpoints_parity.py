"""The receivers' endpoint list is accepted or refused alike by the C client
(clients/c/src/env.c, client.c ``mt_set_endpoints``) and the Python `Client`
(client/config.py ``resolve_receivers``), in the same words: the same inputs, from
``MELISSA_TRAINER_ENDPOINTS`` and as the argument (``mt_set_endpoints`` /
``endpoints=``), run through both, their verdicts (taken or refused) and messages
compared. The rule both follow: client/predict_lookup.py ``endpoint_fault`` (a serving
endpoint's, with the form "the trainer's rank_N.json"), after ``str.strip`` of the value
and of each item.

Before (hcenv): a value in quotes (a shell's or a Slurm script's left in it) was
"Protocol not supported" from ZeroMQ in both (MT_EZMQ in C); a port with leading zeros
past 5 digits (``:000009``) was refused by C only; port 0, port ``*`` and host ``*``
were taken by C (to dial nowhere) and ``tcp://host:55x``, ``tcp://localhost`` got
ZeroMQ's words (or a connection to port 55) in Python; a value or item wrapped in a
no-break space, ``\\x1c``-``\\x1f`` or U+3000 was refused by C only (its isspace strip);
a quote in a refused list was written raw by C where Python writes its repr; and the
"endpoints must be like" error did not name the variable in Python."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from c_driver import run_script

from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EENV, MT_EZMQ = 6, 9
FIELDS = {"u": ((4,), "float32")}
OK = "tcp://127.0.0.1:9"  # (nothing listens: a start is taken, its close given no time)
#: (name, the endpoint list): each given as the variable and as the argument
TABLE = [
    ("plain", OK),
    ("two", f"{OK}, tcp://127.0.0.1:8"),
    ("double-quoted", f'"{OK}"'),
    ("single-quoted", f"'{OK}'"),
    ("one-item-quoted", f'{OK},"tcp://127.0.0.1:8"'),
    ("quote-at-end", f'{OK}"'),
    ("leading-zero", "tcp://127.0.0.1:09"),
    ("leading-zeros-past-5-digits", "tcp://127.0.0.1:000009"),
    ("port-0", "tcp://127.0.0.1:0"),
    ("port-00000", "tcp://127.0.0.1:00000"),
    ("port-65536", "tcp://127.0.0.1:65536"),
    ("port-star", "tcp://127.0.0.1:*"),
    ("host-star", "tcp://*:9"),
    ("no-port", "tcp://localhost"),
    ("empty-port", "tcp://localhost:"),
    ("ipv6-no-port", "tcp://[::1]"),
    ("ipv6", "tcp://[::1]:9"),
    ("ipv6-bracket-after", "tcp://[::1]:9]"),
    ("no-host", "tcp://:9"),
    ("nothing", "tcp://"),
    ("source", "tcp://127.0.0.1:0;127.0.0.1:9"),
    ("source-no-target", "tcp://127.0.0.1:9;"),
    ("port-letters", "tcp://host:55x"),
    ("port-non-ascii-digit", "tcp://host:\u0669"),
    ("apostrophe", "tcp://it's:5x"),
    ("no-scheme", "localhost:5"),
    ("no-scheme-apostrophe", "it's:5"),
    ("trailing-comma", f"{OK},"),
    ("ipc-no-path", "ipc://"),
    ("inproc-no-name", "inproc://"),
    ("ipc", "ipc:///nowhere/x"),
    ("unknown-transport", "TCP://127.0.0.1:9"),
    ("item-wrapped-unicode-space", f"{OK},\u3000tcp://127.0.0.1:8\xa0"),
    ("control-in-host", "tcp://a\x01b:5x"),
]
#: only from the variable: its value is stripped (Python's str.strip) before anything
ENV_ONLY = [
    ("wrapped-unicode-space", f"\xa0\x1c{OK}\x85\u2028"),
    ("blank-unicode", "\x1f\u3000"),
]
#: the Python client's words with the C API's names
C_NAMES = [("pass endpoints=", "call mt_set_endpoints")]


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def python_verdict(endpoints: str | None) -> tuple[bool, str]:
    """(taken, the error's words in C's names) of a Python `Client` of simulation 1."""
    try:
        tuning = ClientTuning(failed_close_timeout=0)  # (nothing listens: no wait)
        Client(FIELDS, simulation_id=1, endpoints=endpoints, tuning=tuning).close(bye=False)
    except (ValueError, RuntimeError) as error:
        words = str(error)
        for python, c in C_NAMES:
            words = words.replace(python, c)
        return False, words
    return True, ""


def c_verdict(result: dict[int, tuple[int, str]]) -> tuple[bool, str]:
    """(taken, the first error's words) of an mt_script run up to its "start"."""
    for line in sorted(n for n in result if n > 0):
        status, message = result[line]
        if status != 0:
            return False, message
    return True, ""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "value", [v for _, v in TABLE + ENV_ONLY], ids=[n for n, _ in TABLE + ENV_ONLY]
)
def test_the_variable_is_judged_as_python_judges_it(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    env = {"MELISSA_TRAINER_ENDPOINTS": value}
    got = c_verdict(run_script(script_exe, "id 1\nfield u 1 1 4\nstart\nabort\n", tmp_path, env))
    monkeypatch.setenv("MELISSA_TRAINER_ENDPOINTS", value)
    assert got == python_verdict(None)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in TABLE], ids=[n for n, _ in TABLE])
def test_the_argument_is_judged_as_python_judges_it(
    script_exe: Path,
    tmp_path: Path,
    by_hand: None,
    value: str,
) -> None:
    script = f"id 1\nendpoints {value}\nfield u 1 1 4\nstart\nabort\n"
    assert c_verdict(run_script(script_exe, script, tmp_path)) == python_verdict(value)


#: what the C client says at the start for some of them (status, words: a promise of
#: docs/how-to/compiled-solver.md, "What the C client refuses"); (0, ""): taken
WHY = {
    "double-quoted": (MT_EENV, "has a quote mark at its start or end"),
    "leading-zeros-past-5-digits": (0, ""),
    "port-0": (MT_EENV, "has a port that is not a number 1 to 65535"),
    "host-star": (MT_EENV, "has a host * (a bind's, not a connection's)"),
    "no-scheme": (MT_EENV, "endpoints must be like tcp://HOST:PORT, got 'localhost:5'"),
    "wrapped-unicode-space": (0, ""),
    "unknown-transport": (MT_EZMQ, "cannot connect to endpoint 'TCP://127.0.0.1:9': "),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(WHY))
def test_what_the_c_client_says(
    script_exe: Path,
    tmp_path: Path,
    name: str,
) -> None:
    value = dict(TABLE + ENV_ONLY)[name]
    env = {"MELISSA_TRAINER_ENDPOINTS": value}
    code, words = run_script(script_exe, "id 1\nfield u 1 1 4\nstart\nabort\n", tmp_path, env)[3]
    assert code == WHY[name][0] and WHY[name][1] in words, (code, words)
    if code == MT_EENV:
        assert words.startswith("MELISSA_TRAINER_ENDPOINTS: "), words
