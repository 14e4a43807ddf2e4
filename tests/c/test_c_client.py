"""The C client (clients/c) against the Python client and the real receiver.

* Conformance: for the same sequence of sends, the C client puts on the wire exactly the
  frames the Python `Client` does, byte for byte and message by message (which frames
  form one ZeroMQ message), captured at plain PULL sockets. Batching is made
  deterministic with a batch delay of 1000 s (so only "batch full", `flush` and `close`
  send batches, and the first step, which has no predecessor, goes as DATA in both)
  or batch_bytes = 0. Nothing on the wire is free: both clients must agree on every byte.
* End to end into a real `Receiver` and buffer: every (simulation, step) once, bit for bit.
* Errors: the status codes and the message texts.
* Rendezvous: endpoints from the receivers' files, and the timeout's message.

The C side is driven by `clients/c/tests/mt_script.c` (see `c_driver`); MPI, sanitizer
and installation tests are in test_c_client_build.py.
"""

from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from c_driver import (  # noqa: F401 (fixtures)
    OTHER_COUNTS,
    SCENARIOS,
    Scenario,
    as_c_client,
    both,
    c_script,
    capture,
    lines_of,
    payload,
    run_script,
    script_exe,
    seed_of,
)
from compiled import CClient, c_client  # noqa: F401
from helpers import drain, running
from hypothesis import given, settings
from hypothesis import strategies as st

from melissa_trainer import wire as P
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher.systematic import SystematicFailure
from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_frames_equal_the_python_clients_byte_for_byte(
    name: str,
    script_exe: Path,  # noqa: F811
    capture: Any,  # noqa: F811
    tmp_path: Path,  # noqa: F811
) -> None:
    want, got = both(script_exe, SCENARIOS[name], capture, tmp_path, OTHER_COUNTS.get(name, ()))
    want = as_c_client(want)  # the same bytes but for the client the HELLO names
    for receiver, (w, g) in enumerate(zip(want, got, strict=True)):
        assert [len(m) for m in g] == [len(m) for m in w], f"receiver {receiver}: frame counts"
        for i, (wm, gm) in enumerate(zip(w, g, strict=True)):
            assert gm == wm, f"receiver {receiver}, message {i} ({P.KIND_NAMES[wm[0][5]]})"
    kinds = {m[0][P.KIND_AT] for r in want for m in r}
    if name == "batched_two_receivers":
        assert P.BATCH in kinds and P.DATA in kinds  # both kinds were compared
        assert any(len(m) > 2 and m[0][P.KIND_AT] == P.BATCH for r in want for m in r)


class _Buf(ctypes.Structure):  # src/encode.h's mt_buf
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("cap", ctypes.c_size_t),
        ("oom", ctypes.c_bool),
    ]


@pytest.fixture(scope="module")
def c_library(c_client: CClient) -> ctypes.CDLL:  # noqa: F811
    if c_client.sanitize:  # (ASan's runtime must be a process's first library: not Python's)
        pytest.skip("loads the library into Python (ctypes): not under MT_TEST_SANITIZE")
    return ctypes.CDLL(str(c_client.lib_dir / "libmelissa_trainer_client.so"))


@settings(max_examples=3000, deadline=None)
@given(
    value=st.floats(allow_nan=False, allow_infinity=False),
    text=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),  # valid UTF-8
)
def test_hello_numbers_and_strings_are_written_as_python_json_writes_them(
    c_library: ctypes.CDLL, value: float, text: str
) -> None:
    """The HELLO's parameter values (repr) and names (json.dumps, ensure_ascii): the
    library's own formatters, called through ctypes, over any float and any string."""
    out = ctypes.create_string_buffer(32)
    c_library.mt_format_double.argtypes = [ctypes.c_double, ctypes.c_char_p]
    c_library.mt_format_double(value, out)
    assert out.value.decode() == repr(value)
    raw = text.encode()
    buf = _Buf()
    c_library.mt_buf_json_string.argtypes = [ctypes.POINTER(_Buf), ctypes.c_char_p, ctypes.c_size_t]
    c_library.mt_buf_json_string(ctypes.byref(buf), raw, len(raw))
    try:
        assert not buf.oom
        assert ctypes.string_at(buf.data, buf.len).decode() == json.dumps(text)
    finally:
        ctypes.CDLL(None).free(ctypes.c_void_p(buf.data))


# -- end to end ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_into_a_real_receiver_every_step_once_bit_for_bit(script_exe: Path, tmp_path: Path) -> None:  # noqa: F811
    fields = [("u", 1, (8, 4)), ("big", 2, (9000,)), ("flags", 12, (5,)), ("n", 7, ())]
    steps = list(range(12))
    buf = FIFOBuffer(500)
    # (the payloads are random bytes, NaN patterns among them: bits, not numbers here)
    with running(
        buf, expected_simulations=2, rendezvous_dir=str(tmp_path / "rv"), nonfinite="accept"
    ) as rec:
        assert rec.endpoint is not None
        results = []
        for sim in (3, 2**63 + 5):
            s = Scenario(fields=fields, steps=steps, simulation_id=sim, receivers=1)
            script = c_script(s, ["unused://"]).replace("endpoints unused://\n", "")
            script = script.replace(f"id {sim}\n", "").replace("param", "#param")
            env = {
                "MELISSA_TRAINER_SIMULATION_ID": str(sim),
                "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv"),
                "MELISSA_TRAINER_PARAMETERS": f'{{"a": {sim}, "b": 0.5}}',
            }
            results.append(run_script(script_exe, script, tmp_path, env))
        samples = drain(buf)
    for result in results:
        assert all(status == 0 for status, _ in result.values()), result
    keys = sorted((int(s["simulation_id"]) % 2**64, int(s["time_step"])) for s in samples)
    assert keys == sorted((sim, t) for sim in (3, 2**63 + 5) for t in steps)
    for s in samples:
        sim, t = int(s["simulation_id"]) % 2**64, int(s["time_step"])
        for k, (name, code, shape) in enumerate(fields):
            want = payload(code, int(np.prod(shape, dtype=np.int64)), seed_of(t, k))
            assert s[name].dtype == P.DTYPES[code] and s[name].shape == shape
            assert s[name].tobytes() == want.tobytes(), (sim, t, name)
        assert s["parameters"].tolist() == [float(sim), 0.5]


# -- errors -------------------------------------------------------------------------------

BASE = "id 1\nendpoints tcp://127.0.0.1:9\nclose_timeout 0\nfield temperature 1 2 4 4\n"


@pytest.mark.timeout(30)
def test_send_errors_give_their_codes_and_messages(script_exe: Path, tmp_path: Path) -> None:  # noqa: F811
    script = (
        BASE
        + "field p 2 1 3\nstart\n"
        + "\n".join(
            [
                "send 0 temperature 2 16 1",  # wrong dtype
                "send 0 temperature 1 15 1",  # wrong count
                "send 0 nope 1 16 1",  # unknown field
                "send 0 temperature 1 16 1",
                "send 1 temperature 1 16 1",  # step 0 lacks p
                "send 0 temperature 1 16 1",  # twice in step 0
                "abort",
            ]
        )
    )
    got = lines_of(run_script(script_exe, script, tmp_path))[-7:]
    assert got[0] == (
        3,
        "field 'temperature' is declared float32, mt_send was given float64 (convert the data "
        "to float32, dtype MT_FLOAT32)",
    )
    assert got[1] == (
        4,
        "field 'temperature': mt_send was given 15 elements, this rank's part has 16 "
        "(global shape (4, 4))",
    )
    assert got[2] == (
        2,
        "field 'nope' is not declared; the declared fields are ['temperature', 'p']",
    )
    assert got[3] == (0, "")
    assert got[4] == (2, "time step 1 sent before time step 0 was complete: field(s) 'p' missing")
    assert got[5] == (2, "field 'temperature' sent twice for time step 0, before field(s) 'p'")


@pytest.mark.timeout(30)
def test_close_with_an_incomplete_step_is_an_error_without_bye(
    script_exe: Path,  # noqa: F811
    capture: Any,  # noqa: F811
    tmp_path: Path,  # noqa: F811
) -> None:
    cap = capture(1)
    script = (
        f"id 1\nendpoints {cap.endpoints[0]}\nfield a 1 1 2\nfield b 1 1 2\nstart\n"
        "send 0 a 1 2 1\nsend 0 b 1 2 1\nsend 1 a 1 2 1\nclose\n"
    )
    got = lines_of(run_script(script_exe, script, tmp_path))
    assert got[-1] == (
        2,
        "closed with time step 1 incomplete: field(s) 'b' missing; no BYE sent (the run did "
        "not finish)",
    )
    kinds = []
    while cap.socks[0].poll(2000):
        kinds.append(cap.socks[0].recv_multipart()[0][P.KIND_AT])
        if len(kinds) == 4:
            break
    # what was sent arrives (step 1, batched, leaves in the flush of close); no BYE
    assert kinds == [P.HELLO, P.DATA, P.DATA, P.BATCH]
    assert not cap.socks[0].poll(200)


@pytest.mark.timeout(30)
def test_a_send_timeout_leaves_the_client_for_abort_only(script_exe: Path, tmp_path: Path) -> None:  # noqa: F811
    # nobody receives: the queue (high-water mark 1, the HELLO in it) stays full
    script = (
        "id 1\nendpoints tcp://127.0.0.1:9\nsndhwm 1\nsend_timeout 0.2\nbatching 0 1\n"
        "field u 1 1 4\nstart\n" + "".join(f"send {t} u 1 4 {t}\n" for t in range(4))
    )
    got = lines_of(run_script(script_exe, script + "close\n", tmp_path))
    sends = got[7:11]
    first = next(i for i, (status, _) in enumerate(sends) if status != 0)
    assert sends[first] == (
        8,
        f"simulation 1 rank 0: could not send time step {first} within send_timeout=0.2 s: "
        "no receiver ever accepted a connection at tcp://127.0.0.1:9: check the endpoint (the "
        "trainer's rank_N.json) or start the trainer first; close the client with "
        "mt_client_abort",
    )
    for status, message in sends[first + 1 :]:
        assert (status, message) == (
            5,
            "mt_send: the client failed earlier (a send timed out or ZeroMQ failed): only "
            "mt_client_abort may follow",
        )
    assert got[-1] == (
        5,
        "the client failed earlier (a send timed out or ZeroMQ failed): closed without BYE, "
        "as mt_client_abort does",
    )


@pytest.mark.timeout(30)
def test_close_says_when_queued_messages_were_not_delivered(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    script = "id 4\nendpoints tcp://127.0.0.1:9\nclose_timeout 0.2\nfield u 1 0\nstart\nclose\n"
    got = lines_of(run_script(script_exe, script, tmp_path))
    assert got[-1] == (
        8,
        "simulation 4 rank 0: queued messages not delivered within close_timeout=0.2 s to "
        "['tcp://127.0.0.1:9']: no receiver ever accepted a connection at tcp://127.0.0.1:9: "
        "check the endpoint (the trainer's rank_N.json) or start the trainer first",
    )


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("env", "code", "message"),
    [
        (
            {},
            6,
            "no simulation id: call mt_set_simulation_id, or set MELISSA_TRAINER_SIMULATION_ID",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "x1"},
            6,
            "MELISSA_TRAINER_SIMULATION_ID='x1' is not a simulation id: give a whole number "
            "in ASCII digits 0-9, e.g. MELISSA_TRAINER_SIMULATION_ID=42",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "18446744073709551616"},
            6,
            "MELISSA_TRAINER_SIMULATION_ID='18446744073709551616' is out of range [0, 2**64)",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3"},
            6,
            "no receiver endpoint: call "
            "mt_set_endpoints, or set MELISSA_TRAINER_ENDPOINTS (comma-separated, e.g. "
            "tcp://127.0.0.1:5555) or MELISSA_TRAINER_RENDEZVOUS (the trainer's rendezvous "
            "directory, {output_dir}/rendezvous)",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_ENDPOINTS": "localhost:5"},
            6,
            "MELISSA_TRAINER_ENDPOINTS: endpoints must be like tcp://HOST:PORT, got 'localhost:5'",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_PARAMETERS": "[1]"},
            6,
            "MELISSA_TRAINER_PARAMETERS must be a JSON object of name -> number",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_PARAMETERS": "{'a': 1}"},
            6,
            "MELISSA_TRAINER_PARAMETERS is not valid JSON (Expecting property name enclosed in "
            "double quotes at character 1): \"{'a': 1}\"; give an object of name -> number, "
            "e.g. '{\"k\": 0.5}'",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_PARAMETERS": '{"a": "x"}'},
            6,
            "MELISSA_TRAINER_PARAMETERS: parameter 'a': 'x' is not a number",
        ),
        (
            {"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_PARAMETERS": '{"a": 1e400}'},
            6,
            "MELISSA_TRAINER_PARAMETERS: parameter 'a': inf is not finite",
        ),
    ],
)
def test_bad_environment(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    env: dict[str, str],
    code: int,
    message: str,  # noqa: F811
) -> None:
    script = "field u 1 1 2\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path, env))
    assert got[1] == (code, message)


# -- rendezvous ---------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_rendezvous_endpoints_in_rank_order(script_exe: Path, capture: Any, tmp_path: Path) -> None:  # noqa: F811
    cap = capture(2)
    rv = tmp_path / "rv"
    for rank in (1, 0):  # written in any order; other files ignored
        write_rendezvous(rv, rank, 2, cap.endpoints[rank])
    (rv / ".rank_2.json.tmp").write_text("{")
    script = f"id 5\nrendezvous {rv} 5\nfield u 1 0\nstart\ninfo\nsend 1 u 1 1 3\nclose\n"
    result = run_script(script_exe, script, tmp_path)
    assert all(status == 0 for status, _ in result.values()), result
    assert result[-5] == (0, "id=5 receivers=2")
    got = cap.until_bye()
    assert [m[0][P.KIND_AT] for m in got[0]] == [P.HELLO, P.BYE]
    assert [m[0][P.KIND_AT] for m in got[1]] == [P.HELLO, P.DATA, P.BYE]


@pytest.mark.timeout(30)
def test_rendezvous_timeout_says_what_is_missing(script_exe: Path, tmp_path: Path) -> None:  # noqa: F811
    rv = tmp_path / "rv"
    write_rendezvous(rv, 1, 3, "tcp://127.0.0.1:9")
    env = {"MELISSA_TRAINER_SIMULATION_ID": "1", "MELISSA_TRAINER_RENDEZVOUS": str(rv)}
    script = "rendezvous_timeout_only\n"
    script = f"rendezvous {rv} 0.3\nfield u 1 0\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path, env))
    assert got[2] == (
        7,
        f"rendezvous directory '{rv}' incomplete after 0.3 s: world_size 3, ranks [0, 2] "
        "missing (is the trainer running, with this output directory?)",
    )
    missing = tmp_path / "nowhere"
    script = f"rendezvous {missing} 0.05\nfield u 1 0\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path, env))
    assert got[2] == (
        7,
        f"rendezvous directory '{missing}' incomplete after 0.05 s: the directory does not "
        "exist (is the trainer running, with this output directory?)",
    )


@pytest.mark.timeout(30)
def test_an_empty_rendezvous_is_said_in_the_python_clients_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A directory without a file yet: the same words as `fetch_rendezvous`'s (the C
    client said "no rank_<r>.json file yet (rank_0.json ...)")."""
    rv = tmp_path / "rv"
    rv.mkdir()
    with pytest.raises(TimeoutError) as python:
        fetch_rendezvous(rv, timeout=0.05)
    assert "no rank_{r}.json file yet" in str(python.value)  # (the oracle)
    script = f"rendezvous {rv} 0.05\nfield u 1 0\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path, {"MELISSA_TRAINER_SIMULATION_ID": "1"}))
    assert got[2] == (7, str(python.value))


def test_a_c_solver_asking_for_a_parameter_the_sampler_lacks_blames_the_sampler(
    c_library: ctypes.CDLL, tmp_path: Path
) -> None:
    """The C client's message for a missing parameter (`mt_client_parameter`, read back
    through ctypes), printed as a solver's last line, is read by the launcher's check as
    a Python solver's `UnknownParameterError` is: the sampler is blamed, naming the key
    (it blamed "the solver or its environment": the check knew only Python's words)."""
    lib = c_library
    lib.mt_client_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.mt_set_parameter.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double]
    lib.mt_client_parameter.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)
    ]  # fmt: skip
    lib.mt_client_error.argtypes, lib.mt_client_error.restype = [ctypes.c_void_p], ctypes.c_char_p
    lib.mt_client_abort.argtypes = [ctypes.c_void_p]
    client = ctypes.c_void_p()
    assert lib.mt_client_create(ctypes.byref(client)) == 0
    try:
        assert lib.mt_set_parameter(client, b"t_init", 0.5) == 0
        value = ctypes.c_double()
        assert lib.mt_client_parameter(client, b"t_initial", ctypes.byref(value)) != 0
        message = lib.mt_client_error(client).decode()
    finally:
        lib.mt_client_abort(client)
    check = SystematicFailure(4, parameters=("t_init",))
    verdicts = []
    for attempt, sid in enumerate((0, 1, 0, 1)):
        log = tmp_path / f"sim-{sid}-{attempt}.log"
        log.write_text(f"starting\nmy_solver: {message}\n")
        verdicts.append(check.failed(sid, 1, log))
    assert verdicts[:3] == [None, None, None] and verdicts[3] is not None
    assert "One side has the wrong name" in verdicts[3], verdicts[3]
    assert "parameter 't_initial'" in verdicts[3] and "['t_init']" in verdicts[3]
