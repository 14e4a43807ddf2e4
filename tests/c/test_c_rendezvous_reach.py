"""A loopback endpoint that the C client reads from a rendezvous published on another
machine, or in another network namespace, is said at once: `mt_client_start` returns
`MT_EUNREACHABLE` with the Python client's words (`stream.host_scope.out_of_reach`,
`ReceiverUnreachable`; clients/c/src/host_scope.c), instead of starting, sending into
the void and failing after the disconnected timeout (60 s) as a receiver "not started".
Before, `mt_client_start` returned MT_OK there.

The oracles: the words of Python's `out_of_reach` on the same entry (its "endpoints="
being the C client's "mt_set_endpoints"), and a real receiver that takes the step of
the same program run in this namespace. What cannot be told (a file without
``loopback_scope``, of an older trainer; an endpoint not a loopback one) and endpoints
given directly (``MELISSA_TRAINER_ENDPOINTS``: a tunnel may carry them) are not
checked, as for Python (tests/stream/test_host_scope.py). This host's name counts as
loopback where it resolves to loopback only, as in Python (`_loopback_name`; the C
client waited its 60 s there before)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import netns
import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import host_scope
from melissa_trainer.stream.host_scope import HOST_KEY, SCOPE_KEY, out_of_reach
from melissa_trainer.stream.receiver_address import is_loopback
from melissa_trainer.stream.trainer_process import published_process

pytestmark = [
    pytest.mark.e2e,  # every test here starts a process
    pytest.mark.skipif(sys.platform != "linux", reason="the scope is read from /proc"),
]

FLOAT32 = 1  # the protocol's dtype code
MT_EUNREACHABLE = 15
IN_OWN_NET = [netns.UNSHARE, "--net"]  # (a network namespace of its own: a loopback of its own)
#: endpoints: loopback ones (Python's `is_loopback`), and one that is not
#: and this host's name: loopback by name where it resolves to loopback only (as on the
#: two-node test cluster's shared /etc/hosts), else not: C and Python alike either way
ENDPOINTS = ["tcp://localhost:9", "tcp://[::1]:9", "tcp://127.3.2.1:9", "ipc:///tmp/x",
             "tcp://192.0.2.1:9", f"tcp://{socket.gethostname()}:9"]  # fmt: skip
#: scopes: another machine's, another namespace of this machine's ({boot}: this one's),
#: none (an older trainer's file), not a string
SCOPES = ["other-boot/1:2", "{boot}/0:1", None, 3]


def c_words(rv: Path, why: str) -> str:
    """Python's `out_of_reach` words as the C client says them (its setter for
    endpoints given directly), after the rendezvous (client/config.py)."""
    return f"rendezvous {rv}: " + why.replace(
        "endpoints= or MELISSA_TRAINER_ENDPOINTS", "mt_set_endpoints or MELISSA_TRAINER_ENDPOINTS"
    )


def start(script_exe: Path, rv: Path, tmp_path: Path) -> tuple[int, str]:  # noqa: F811
    """(status, message) of `mt_client_start` on the rendezvous `rv` (mt_set_rendezvous)."""
    script = f"rendezvous {rv} 1\nid 1\nfield u {FLOAT32} 1 4\nstart\nabort\n"
    return run_script(script_exe, script, tmp_path)[4]


def hand_written(rv: Path, endpoint: str, **keys: object) -> dict[str, object]:
    """A rank_0.json of one rank publishing `endpoint` and `keys`, written by this process
    (alive here: a client's start does not dial its endpoint, `trainer_listens`, which
    nothing listens on); returns the entry."""
    rv.mkdir(exist_ok=True)
    entry = {"version": 1, "rank": 0, "world_size": 1, "endpoint": endpoint,
             **published_process(), **keys}  # fmt: skip
    (rv / "rank_0.json").write_text(json.dumps(entry))
    return entry


@pytest.mark.timeout(60)
def test_a_loopback_endpoint_of_another_machine_is_said_at_once(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    mine = host_scope.loopback_scope()
    assert mine is not None
    boot, _, netns = mine.partition("/")
    rv = tmp_path / "rendezvous"
    entry = hand_written(rv, "tcp://127.0.0.1:9", host="gpu01", loopback_scope=f"x{boot}/{netns}")
    why = out_of_reach("tcp://127.0.0.1:9", entry, loopback=True)
    assert why is not None and f"runs on host {socket.gethostname()!r}, another machine" in why
    code, message = start(script_exe, rv, tmp_path)
    assert (code, message) == (MT_EUNREACHABLE, c_words(rv, why))  # (before: 0, started)
    assert "(its host 'gpu01')" in message and "bind='tcp://*:*'" in message


@pytest.mark.timeout(120)
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("scope", SCOPES)
def test_what_is_checked_is_what_python_checks(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    endpoint: str,
    scope: object,
) -> None:
    """Loopback endpoints (Python's `is_loopback`) of another scope are refused, with
    Python's words; a file without a scope, or one not a string, and an endpoint that
    is not a loopback one, are not."""
    boot = str(host_scope.loopback_scope()).partition("/")[0]
    keys = {} if scope is None else {SCOPE_KEY: scope}
    if isinstance(scope, str):
        keys[SCOPE_KEY] = scope.format(boot=boot)
    rv = tmp_path / "rendezvous"
    entry = hand_written(rv, endpoint, **{HOST_KEY: "node7", **keys})
    why = out_of_reach(endpoint, entry, is_loopback(endpoint))
    code, message = start(script_exe, rv, tmp_path)
    if why is None:
        assert code == 0, message
    else:
        assert (code, message) == (MT_EUNREACHABLE, c_words(rv, why))


FORTRAN = """
program far
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  character(len=4096) :: rv
  real(c_float) :: u(4)
  integer :: ierr
  call get_command_argument(1, rv)
  call mt_create(client)
  call mt_set_simulation_id(client, 1_c_int64_t)
  call mt_set_rendezvous(client, trim(rv), 1.0_c_double)
  call mt_declare_field(client, 'u', MT_FLOAT32, shape(u))
  call mt_start(client, ierr)
  print '(l1,1x,i0,1x,a)', ierr == MT_EUNREACHABLE, ierr, mt_error_message(client)
end program
"""


@pytest.mark.timeout(240)
def test_a_fortran_solver_reads_mt_eunreachable(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The status in `ierr`, named MT_EUNREACHABLE in the Fortran module too."""
    binary = compile_fortran_program(c_client, FORTRAN, tmp_path, "far")
    rv = tmp_path / "rendezvous"
    entry = hand_written(rv, "tcp://127.0.0.1:9", host="gpu01", loopback_scope="other-boot/1:2")
    why = out_of_reach("tcp://127.0.0.1:9", entry, loopback=True)
    assert why is not None
    run = subprocess.run([str(binary), str(rv)], capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == f"T {MT_EUNREACHABLE} {c_words(rv, why)}", run


@pytest.mark.timeout(120)
def test_a_c_solver_in_another_network_namespace_is_told_at_once(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A real receiver's rendezvous read by the C client in a network namespace of its
    own (``unshare --net``: a loopback of its own, as a compute node's): MT_EUNREACHABLE
    at `mt_client_start`, before any connection attempt; the same program in this
    namespace streams to it; given the endpoint directly, it is not checked there."""
    why_not = netns.cannot_unshare()
    if why_not is not None:
        pytest.skip(why_not)
    rv = tmp_path / "rendezvous"
    with ExitStack() as stack:
        buffer = FIFOBuffer(8)
        receiver = stack.enter_context(
            running(buffer, rendezvous_dir=str(rv), expected_simulations=1)
        )
        env = {"MELISSA_TRAINER_RENDEZVOUS": str(rv), "MELISSA_TRAINER_SIMULATION_ID": "7"}
        script = f"field u {FLOAT32} 1 4\nstart\nabort\n"
        away = run_script(script_exe, script, tmp_path, env, timeout=60, wrap=IN_OWN_NET)
        entry = json.loads((rv / "rank_0.json").read_text())
        assert entry[SCOPE_KEY] == host_scope.loopback_scope()  # (this namespace's)
        boot = entry[SCOPE_KEY].partition("/")[0]  # (the words of another namespace's)
        why = out_of_reach(receiver.endpoint, {**entry, SCOPE_KEY: f"{boot}/0:1"}, True)
        assert why is not None and "another network namespace" in why
        assert away[2] == (MT_EUNREACHABLE, c_words(rv, why)), away  # (before: 0)
        given = {**env, "MELISSA_TRAINER_ENDPOINTS": receiver.endpoint}  # (it wins)
        direct = run_script(script_exe, script, tmp_path, given, timeout=60, wrap=IN_OWN_NET)
        assert direct[2] == (0, ""), direct  # (not checked: a tunnel may carry it)
        here = f"close_timeout 20\nfield u {FLOAT32} 1 4\nstart\nsend 0 u {FLOAT32} 4 0\nclose\n"
        result = run_script(script_exe, here, tmp_path, env, timeout=60)
        assert all(code == 0 for code, _ in result.values()), result
        got = drain(buffer)  # (the stream ends at the BYE of the one simulation)
    assert [int(s["time_step"]) for s in got] == [0] and int(got[0]["simulation_id"]) == 7
