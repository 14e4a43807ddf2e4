"""The C client checks an endpoint's form before it connects (clients/c/src/env.c), as a
user trial found (htrial10): ``tcp://localhost`` (no port) failed at start with ZeroMQ's
bare "Invalid argument". Now: the endpoint, what it lacks and the form to give, with the
client's status for bad configuration (MT_EENV from MELISSA_TRAINER_ENDPOINTS, MT_EINVAL
from mt_set_endpoints, at the call). Before the change each bad case failed: five started
with ZeroMQ's "Invalid argument" (MT_EZMQ), four started with MT_OK (to connect nowhere),
and mt_set_endpoints took 'tcp://localhost'."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import lines_of, run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EINVAL, MT_EENV = 1, 6
FORM = "give tcp://HOST:PORT (the trainer's rank_N.json)"
NOT_A_PORT = "a port that is not a number 1 to 65535"

BAD = {
    "tcp://localhost": f"endpoint 'tcp://localhost' has no port: {FORM}",
    "tcp://localhost:": f"endpoint 'tcp://localhost:' has no port: {FORM}",
    "tcp://[::1]": f"endpoint 'tcp://[::1]' has no port: {FORM}",
    "tcp://:5555": f"endpoint 'tcp://:5555' has no host: {FORM}",
    "tcp://": f"endpoint 'tcp://' has no host and no port: {FORM}",
    "tcp://host:55x": f"endpoint 'tcp://host:55x' has {NOT_A_PORT}: {FORM}",
    "tcp://host:70000": f"endpoint 'tcp://host:70000' has {NOT_A_PORT}: {FORM}",
    "ipc://": "endpoint 'ipc://' has no path: give ipc://PATH",
    "inproc://": "endpoint 'inproc://' has no name: give inproc://NAME",
}


@pytest.mark.parametrize("endpoint", sorted(BAD))
@pytest.mark.timeout(60)
def test_a_malformed_endpoint_is_said_at_start_from_the_environment(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    endpoint: str,
) -> None:
    env = {"MELISSA_TRAINER_ENDPOINTS": f"tcp://127.0.0.1:9, {endpoint}"}
    got = lines_of(run_script(script_exe, "id 1\nfield u 1 1 2\nstart\nabort\n", tmp_path, env))
    assert got[2] == (MT_EENV, f"MELISSA_TRAINER_ENDPOINTS: {BAD[endpoint]}")


@pytest.mark.timeout(60)
def test_a_malformed_endpoint_is_refused_by_mt_set_endpoints(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    script = "id 1\nendpoints tcp://localhost\nfield u 1 1 2\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path))
    assert got[1] == (MT_EINVAL, BAD["tcp://localhost"])


@pytest.mark.parametrize(
    "endpoints",
    ["tcp://127.0.0.1:9", "tcp://[::1]:9", "tcp://127.0.0.1:0;localhost:9", "ipc:///nowhere/x"],
)
@pytest.mark.timeout(60)
def test_well_formed_endpoints_pass(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    endpoints: str,
) -> None:
    """(nothing listens there: the start succeeds, the close is given no time)"""
    script = f"id 1\nendpoints {endpoints}\nfield u 1 1 2\nstart\nabort\n"
    got = lines_of(run_script(script_exe, script, tmp_path))
    assert got[1][0] == 0 and got[3][0] == 0, got
