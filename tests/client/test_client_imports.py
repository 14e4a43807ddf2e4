"""What importing the client loads: nothing of the receiving side, no torch, accelerate or
mpi4py, no heavy module beyond numpy and zmq (logging and socket imported when needed,
and still working then).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import numpy as np
import pytest
from client_runs import GOOD, Receiver, free_port

from melissa_trainer import wire as p
from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.usefixtures("_clean_environment")


CLIENT_SIDE_ONLY = """
import sys
import melissa_trainer.client
shared = {"melissa_trainer.stream", "melissa_trainer.wire",
          "melissa_trainer.stream.endpoints", "melissa_trainer.stream.step_set",
          "melissa_trainer.common", "melissa_trainer.common.checks",
          "melissa_trainer._moved"}  # (the old import paths: standard library only)
loaded = sorted(
    m for m in sys.modules
    if m in ("torch", "accelerate") or m.startswith("melissa_trainer.") and m not in shared
    and not m.startswith("melissa_trainer.client")
)
print(loaded)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_package_loads_no_receiving_side() -> None:
    """`import melissa_trainer.client` loads the client package and the modules both
    sides share (the wire format, the rendezvous, the checks of counts and durations),
    nothing of the receiving side (receiver, ingest, buffers) nor torch."""
    result = subprocess.run(
        [sys.executable, "-c", CLIENT_SIDE_ONLY], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


NO_TORCH = """
import sys
import numpy as np
import melissa_trainer.client as mc
loaded = [m for m in ("torch", "accelerate", "mpi4py") if m in sys.modules]
assert not loaded, loaded
with mc.Client({"u": ((3,), "float32")}, simulation_id=11, endpoints=sys.argv[1],
               tuning=mc.ClientTuning(close_timeout=20)) as client:
    client.send(0, u=np.arange(3, dtype=np.float32))
loaded = [m for m in ("torch", "accelerate", "mpi4py") if m in sys.modules]
assert not loaded, loaded
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_imports_no_torch(receiver: Receiver) -> None:
    """A simulation imports the client without torch or accelerate (a fresh process)."""
    result = subprocess.run(
        [sys.executable, "-c", NO_TORCH, receiver.endpoint],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    hello, data, bye = receiver.until_bye()
    assert isinstance(hello, p.Hello) and hello.simulation_id == 11
    assert isinstance(data, p.Data) and data.payload.tolist() == [0.0, 1.0, 2.0]
    assert bye == p.Bye(11, 0, 1, 1)


# What the client must not add to a process that has imported numpy and pyzmq: the
# trainer's side (torch, accelerate), MPI unless a communicator is given, and what it
# only needs on rare paths, imported there (logging: the client's warnings; socket: a
# receiver's advertised host name): each is milliseconds of every simulation's start-up
# (benchmarks/client_startup.py). Compared with a process that imported numpy and zmq
# alone, so that what they import themselves (in any version) does not count.
NOT_AT_START = ("torch", "accelerate", "mpi4py", "logging", "socket", "selectors", "asyncio")


# ... and the package's own modules of rare paths: predictions, the follow socket's queries
RARE_PATHS = (
    "melissa_trainer.client.predict",
    "melissa_trainer.wire.predict",
    "melissa_trainer.wire.held",
    "melissa_trainer.wire.admission",
    "melissa_trainer.wire.receipt",
    "melissa_trainer.client.confirm",
    "melissa_trainer.client.receipts",
)


CLIENT_ADDS = """
import json, sys
import numpy, zmq
before = set(sys.modules)
from melissa_trainer.client import Client
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_client_import_adds_no_heavy_module_to_numpy_and_zmq() -> None:
    result = subprocess.run(
        [sys.executable, "-c", CLIENT_ADDS], capture_output=True, text=True, timeout=50
    )
    assert result.returncode == 0, result.stderr
    added = set(json.loads(result.stdout))
    assert "melissa_trainer.client.client" in added  # (the oracle sees the import)
    assert not {m.split(".")[0] for m in added} & set(NOT_AT_START), sorted(added)
    assert not added & set(RARE_PATHS), sorted(added)


@pytest.mark.timeout(30)
def test_close_after_an_error_still_logs_with_logging_imported_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client gets its logger when it logs (logging is not imported with it)."""
    endpoint = f"tcp://127.0.0.1:{free_port()}"  # nobody listens there
    c = Client(GOOD, simulation_id=3, endpoints=endpoint, tuning=ClientTuning(close_timeout=0.2))
    c.send(0, u=np.ones((2, 3), np.float32))
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        c.close(bye=False)
    # (which bound ended it depends on whether ZeroMQ saw the refused connect within
    # the 0.2 s: either the close_timeout or "unreachable"; the oracle is that it logged)
    assert "simulation 3 rank 0: queued messages not delivered" in caplog.text, caplog.text
    assert "close_timeout=0.2" in caplog.text or "unreachable" in caplog.text, caplog.text


def test_advertised_names_this_host_for_a_wildcard_address() -> None:
    """`advertised` imports `socket` when it needs the host name (see NOT_AT_START)."""
    from melissa_trainer.stream.receiver_address import advertised

    host = socket.gethostname()
    assert advertised("tcp://0.0.0.0:5555", None) == f"tcp://{host}:5555"
    assert advertised("tcp://*:5555", "") == f"tcp://{host}:5555"
    assert advertised("tcp://[::]:5555", None) == f"tcp://{host}:5555"
    assert advertised("tcp://10.0.0.7:5555", None) == "tcp://10.0.0.7:5555"
    assert advertised("tcp://10.0.0.7:5555", "node3") == "tcp://node3:5555"
    assert advertised("ipc:///tmp/x", "node3") == "ipc:///tmp/x"
