"""The client's configuration: parameters and endpoints from the environment or a
rendezvous directory (waiting for late receivers, its CurveZMQ key), and the errors of a
missing or bad parameter, argument or tuning, each naming what to fix.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from client_runs import GOOD, Receiver

from melissa_trainer import wire as p
from melissa_trainer.client import (
    ENV_ENDPOINTS,
    ENV_PARAMETERS,
    ENV_RENDEZVOUS,
    ENV_SIMULATION_ID,
    Client,
    ClientTuning,
    fetch_endpoints,
)
from melissa_trainer.client.parameters import check_parameters
from melissa_trainer.stream.endpoints import write_rendezvous

pytestmark = pytest.mark.usefixtures("_clean_environment")


@pytest.mark.timeout(30)
def test_a_missing_parameter_names_the_known_ones_or_how_to_give_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENV_PARAMETERS, raising=False)
    none = check_parameters(None)  # a simulation started by hand, without the launcher
    with pytest.raises(KeyError) as info:
        none["diffusivity"]
    assert str(info.value).startswith("this simulation has no parameter 'diffusivity': it has none")
    assert "MELISSA_TRAINER_PARAMETERS='{\"diffusivity\": 0.5}'" in str(info.value)
    given = check_parameters({"t0": 1.0})
    assert given == {"t0": 1.0} and given.get("k") is None and json.dumps(given) == '{"t0": 1.0}'
    with pytest.raises(KeyError, match=r"its parameters are \['t0'\] \(given to the Client\)"):
        given["k"]


@pytest.mark.timeout(30)
def test_parameters_that_are_not_json_say_where(monkeypatch: pytest.MonkeyPatch) -> None:
    # set by hand in external mode, a trailing comma was "is not valid JSON" and nothing
    # more; the C client names the spot, and the value is shown so a shell's quoting shows
    monkeypatch.setenv(ENV_PARAMETERS, '{"k": 0.5,}')
    with pytest.raises(ValueError) as info:
        check_parameters(None)
    # (Python 3.13's words on every Python: 3.10-3.12 said "Expecting property name
    # enclosed in double quotes at character 10", this test's words until then)
    assert str(info.value) == (
        "MELISSA_TRAINER_PARAMETERS is not valid JSON (Illegal trailing comma before end of "
        "object at character 9): '{\"k\": 0.5,}'; give an object of name -> number, e.g. "
        "'{\"k\": 0.5}'"
    )


@pytest.mark.timeout(30)
def test_environment_configuration(
    receiver: Receiver, zctx: zmq.Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SIMULATION_ID, " 17 ")
    monkeypatch.setenv(ENV_ENDPOINTS, f" {receiver.endpoint} ")
    monkeypatch.setenv(ENV_RENDEZVOUS, "/nonexistent")  # ENDPOINTS comes first
    monkeypatch.setenv(ENV_PARAMETERS, '{"b": 2.5, "a": -1}')  # as the launcher sets it
    with Client({"u": ((2,), "float32")}, tuning=ClientTuning(close_timeout=10)) as c:
        assert (c.simulation_id, c.endpoints) == (17, [receiver.endpoint])
        assert list(c.parameters.items()) == [("b", 2.5), ("a", -1.0)]
        with pytest.raises(
            KeyError,
            match=r"no parameter 'k': its parameters are \['a', 'b'\] "
            r"\(from MELISSA_TRAINER_PARAMETERS, set by the launcher\)",
        ):
            c.parameters["k"]  # a typo names the parameters there are
        c.send(0, u=np.zeros(2, np.float32))
    messages = receiver.until_bye()
    assert [type(m) for m in messages] == [p.Hello, p.Data, p.Bye]
    assert messages[0].parameters == {"b": 2.5, "a": -1.0}
    # arguments win over the environment
    other = Receiver(zctx)
    with Client(
        {"u": ((2,), "float32")},
        simulation_id=5,
        endpoints=other.endpoint,
        tuning=ClientTuning(close_timeout=10),
    ) as c:
        c.send(0, u=np.zeros(2, np.float32))
    assert other.recv().simulation_id == 5
    receiver.assert_silent(0.05)


def write_rank_file(directory: Path, rank: int, world: int, endpoint: str) -> None:
    """As a receiver does: a temporary file, then a rename."""
    tmp = directory / f".rank_{rank}.json.tmp"
    tmp.write_text(
        json.dumps({"version": 1, "rank": rank, "world_size": world, "endpoint": endpoint})
    )
    os.replace(tmp, directory / f"rank_{rank}.json")


@pytest.mark.timeout(30)
def test_rendezvous_directory_waits_for_late_receivers(
    zctx: zmq.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receivers = [Receiver(zctx), Receiver(zctx)]
    write_rank_file(tmp_path, 0, 2, receivers[0].endpoint)
    (tmp_path / "rank_1.json.tmp").write_text("{half a fi")  # ignored: not rank_N.json
    (tmp_path / "notes.txt").write_text("ignored")
    late = threading.Timer(0.3, write_rank_file, (tmp_path, 1, 2, receivers[1].endpoint))
    late.start()
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    try:
        client = Client({"u": ((1,), "u1")}, simulation_id=9, tuning=ClientTuning(close_timeout=10))
    finally:
        late.cancel()
    with client:
        # it waited for the late rank file: rank 1's endpoint is known only from it (an
        # event, not a time: no lower bound on the constructor's duration)
        assert client.endpoints == [r.endpoint for r in receivers]
        client.send(0, u=np.array([0], np.uint8))
        client.send(1, u=np.array([1], np.uint8))
    for rank, rec in enumerate(receivers):
        hello, data, bye = rec.until_bye()
        assert isinstance(hello, p.Hello) and isinstance(data, p.Data)
        assert data.time_step == rank and bye == p.Bye(9, 0, 1, 1)  # one step each


@pytest.mark.timeout(30)
def test_fetch_endpoints_errors(tmp_path: Path) -> None:
    with pytest.raises(TimeoutError, match="does not exist"):
        fetch_endpoints(tmp_path / "missing", timeout=0.05)
    with pytest.raises(TimeoutError, match="no rank_"):
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 0, 2, "tcp://a:1")
    started = time.monotonic()
    # its timeout, not the default 60 s (beyond this test's timeout: a wait for it fails
    # by the timeout marker); the words name the bound that ended it
    with pytest.raises(
        TimeoutError, match=r"incomplete after 0.3 s: .*world_size 2, ranks \[1\] missing"
    ):
        fetch_endpoints(tmp_path, timeout=0.3)
    # (a lower bound on the function's own deadline, on the monotonic clock it reads:
    # deterministic, however loaded the machine)
    assert time.monotonic() - started >= 0.3
    write_rank_file(tmp_path, 1, 3, "tcp://b:1")  # a stale file of another run
    with pytest.raises(TimeoutError, match="disagree on world_size"):
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 1, 2, "tcp://b:1")
    assert fetch_endpoints(tmp_path, timeout=0) == ["tcp://a:1", "tcp://b:1"]
    (tmp_path / "rank_1.json").write_text("{not json")
    # (json.loads's reason and position, as the C client says them: json_scan.c)
    said = r"rank_1.json unreadable \(Expecting property name enclosed in double quotes at "
    said += r"character 1\)"
    with pytest.raises(TimeoutError, match=said):
        fetch_endpoints(tmp_path, timeout=0.05)
    (tmp_path / "rank_1.json").write_text(json.dumps({"version": 1, "rank": 1}))
    # (no world_size: a key missing, the file quoted, as the C client says it)
    with pytest.raises(TimeoutError, match=r'rank_1.json invalid \(\{"version": 1, "rank": 1\}\)'):
        fetch_endpoints(tmp_path, timeout=0.05)
    (tmp_path / "rank_1.json").write_text(
        json.dumps({"version": 1, "rank": 0, "world_size": 2, "endpoint": "tcp://b:1"})
    )
    with pytest.raises(TimeoutError, match="rank_1.json invalid"):  # not its name's rank
        fetch_endpoints(tmp_path, timeout=0.05)
    write_rank_file(tmp_path, 1, 2, "tcp://b:1")
    (tmp_path / "rank_1.json").write_text(
        json.dumps({"version": 2, "rank": 1, "world_size": 2, "endpoint": "tcp://b:1"})
    )
    with pytest.raises(TimeoutError, match="rank_1.json invalid"):
        fetch_endpoints(tmp_path, timeout=0.05)


@pytest.mark.timeout(30)
@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_a_client_uses_the_curve_key_its_rendezvous_publishes(
    zctx: zmq.Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver with CURVE (the documented way across nodes) publishes its public key
    beside its endpoint; a client configured by the launcher's environment uses it, or
    its HELLO would never pass the handshake."""
    public, secret = zmq.curve_keypair()
    receiver = Receiver(zctx, CURVE_SERVER=1, CURVE_SECRETKEY=secret)
    write_rendezvous(tmp_path, 0, 1, receiver.endpoint, {"curve_public_key": public.decode()})
    monkeypatch.setenv(ENV_RENDEZVOUS, str(tmp_path))
    with Client({"u": ((1,), "uint8")}, simulation_id=4) as client:
        client.send(0, u=np.array([7], np.uint8))
    hello, data, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and hello.simulation_id == 4
    assert isinstance(data, p.Data) and bye == p.Bye(4, 0, 1, 1)
    write_rendezvous(tmp_path, 0, 1, receiver.endpoint, {"curve_public_key": "short"})
    with pytest.raises(TimeoutError, match="rank_0.json invalid"):
        fetch_endpoints(tmp_path, timeout=0.05)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fields": {}}, ValueError, "at least one field"),
        ({"fields": {"time_step": ((1,), "f4")}}, ValueError, "reserved"),
        ({"fields": {"": ((1,), "f4")}}, ValueError, "1 to 255"),
        ({"fields": {"é" * 128: ((1,), "f4")}}, ValueError, "1 to 255"),
        ({"fields": {"u": ((2,), "complex64")}}, ValueError, "cannot be streamed"),
        ({"fields": {"u": ((2,), ">f4")}}, ValueError, "cannot be streamed"),
        ({"fields": {"u": ((2,), "no_such_type")}}, ValueError, "is not a dtype"),
        ({"fields": {"u": ((2,), None)}}, ValueError, "is not a dtype"),
        ({"fields": {"u": ((0, 2), "f4")}}, ValueError, "positive"),
        ({"fields": {"u": ((1,) * 9, "f4")}}, ValueError, "at most 8"),
        ({"fields": {"u": ((2.5,), "f4")}}, ValueError, "tuple of ints"),
        ({"fields": {"u": "float32"}}, ValueError, "global shape, dtype"),
        ({"fields": ["u"]}, ValueError, "FieldSpecs"),
        ({"fields": {"u": ((1 << 20, 1 << 10), "f8")}}, ValueError, "max_message_bytes"),
        ({"parameters": {"a": float("nan")}}, ValueError, "not finite"),
        ({"parameters": {"a": "x"}}, ValueError, "not a number"),
        ({"parameters": {1: 2.0}}, ValueError, "must be strings"),
        ({"simulation_id": -1}, ValueError, "out of range"),
        ({"simulation_id": 2**64}, ValueError, "out of range"),
        ({"simulation_id": 1.0}, ValueError, "must be an integer"),
        ({"simulation_id": True}, ValueError, "must be an integer"),
        ({"endpoints": "127.0.0.1:5555"}, ValueError, "tcp://HOST:PORT"),
        ({"endpoints": []}, ValueError, "tcp://HOST:PORT"),
        ({"endpoints": "tcp://no host here"}, ValueError, "has no port"),  # (endpoint_form)
        ({"endpoints": "nosuch://x"}, ValueError, "cannot connect to endpoint 'nosuch://x'"),
        ({"send_timeout": -1}, ValueError, "send_timeout"),
    ],
)
@pytest.mark.timeout(10)
def test_construction_errors(kwargs: dict[str, Any], error: type, match: str) -> None:
    args: dict[str, Any] = {"fields": GOOD, "simulation_id": 1, "endpoints": "tcp://127.0.0.1:1"}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        Client(**args)


def test_missing_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=f"{ENV_ENDPOINTS}.*{ENV_RENDEZVOUS}"):
        Client(GOOD, simulation_id=1)
    with pytest.raises(ValueError, match=ENV_SIMULATION_ID):
        Client(GOOD, endpoints="tcp://127.0.0.1:1")
    monkeypatch.setenv(ENV_SIMULATION_ID, "sim-3")
    with pytest.raises(
        ValueError, match=f"{ENV_SIMULATION_ID}='sim-3' is not a simulation id: give"
    ):
        Client(GOOD, endpoints="tcp://127.0.0.1:1")
    monkeypatch.setenv(ENV_SIMULATION_ID, "3")
    for bad, match in (("{oops", "not valid JSON"), ("[1, 2]", "JSON object"), ('{"x": "a"}', "x")):
        monkeypatch.setenv(ENV_PARAMETERS, bad)
        with pytest.raises(ValueError, match=match):
            Client(GOOD, endpoints="tcp://127.0.0.1:1")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"batch_bytes": -1}, r"ClientTuning\.batch_bytes must be a non-negative int"),
        ({"batch_bytes": 1.5}, r"ClientTuning\.batch_bytes must be a non-negative int"),
        ({"batch_bytes": 10, "max_message_bytes": 8}, r"batch_bytes=10 is more than .*lower"),
        ({"batch_delay": 0}, r"ClientTuning\.batch_delay must be > 0 .*batch_bytes=0 disables"),
        ({"batch_delay": "1"}, r"ClientTuning\.batch_delay must be > 0"),
        ({"sndhwm": True}, r"ClientTuning\.sndhwm must be a non-negative int"),
        ({"max_message_bytes": -1}, r"ClientTuning\.max_message_bytes must be"),
        ({"socket_options": [1]}, r"ClientTuning\.socket_options must be a mapping"),
        ({"close_timeout": -1}, r"ClientTuning\.close_timeout must be None .*or a number"),
        ({"close_timeout": float("nan")}, r"ClientTuning\.close_timeout must be"),
        ({"sndhwm": -1}, r"ClientTuning\.sndhwm must be a non-negative int"),
        ({"rendezvous_timeout": None}, r"ClientTuning\.rendezvous_timeout must be a number"),
    ],
)
def test_tuning_is_checked_when_created(options: dict[str, Any], match: str) -> None:
    """Every tuning mistake fails at `ClientTuning(...)`, naming the field and the fix."""
    with pytest.raises(ValueError, match=match):
        ClientTuning(**options)


def test_client_checks_its_own_arguments() -> None:
    """What a user sets is checked by `Client`, naming the argument."""
    endpoint = "tcp://127.0.0.1:1"
    with pytest.raises(ValueError, match="send_timeout must be None .*or a number of seconds"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, send_timeout=-1)
    with pytest.raises(ValueError, match="tuning must be a ClientTuning"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, tuning={"sndhwm": 2})  # type: ignore[arg-type]
    small = ClientTuning(max_message_bytes=16, batch_bytes=0)
    with pytest.raises(ValueError, match=r"'u' is 24 bytes, more than max_message_bytes=16"):
        Client(GOOD, simulation_id=1, endpoints=endpoint, tuning=small)
    with pytest.raises(TypeError, match="sndhwm"):  # tuning is no longer a keyword of Client
        Client(GOOD, simulation_id=1, endpoints=endpoint, sndhwm=2)  # type: ignore[call-arg]


class _ManyRanks:
    """A communicator of 2**16 ranks: one more than a u16 client count can say."""

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return 0

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return 1 << 16


def test_rank_count_must_fit_the_wire() -> None:
    """2**16 ranks used to pass the check and fail in struct.pack; now a ValueError."""
    with pytest.raises(ValueError, match="65536 ranks: the protocol allows at most 65535"):
        Client(GOOD, simulation_id=1, endpoints="tcp://127.0.0.1:1", comm=_ManyRanks())
