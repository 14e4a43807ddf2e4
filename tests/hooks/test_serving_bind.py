"""An explicit serving endpoint, ``ServingHook(bind="tcp://host:port")``, on several
ranks of one host (found by a user: on two ranks the second rank's bind failed with
ZeroMQ's bare "Address already in use", and the run died). Each rank now binds the
port offset by its rank, as the receivers do (``ReceiverConfig(bind=...)``), and a bind
that fails says which rank, which endpoint and what to do. Real sockets, real requests.
"""

from __future__ import annotations

import errno
from types import SimpleNamespace

import numpy as np
import pytest
from held_ports import held_port

from melissa_trainer.client import Predictor, PredictRefused
from melissa_trainer.hooks.serving_socket import rank_server
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.wire import field_specs

INPUTS = field_specs({"x": ((3,), "float32")})


def _trainer(rank: int, world_size: int) -> SimpleNamespace:
    """What `rank_server` reads of a trainer (no stream source: the explicit bind)."""
    return SimpleNamespace(source=None, process_index=rank, num_processes=world_size, run_id=None)


def test_the_ranks_of_one_host_bind_the_port_offset_by_their_rank() -> None:
    port = held_port(2)  # (p and p + 1 held till the end: bound and closed, either was
    # free for any other test's socket to take before the ranks bind them)
    servers: list[PredictServer] = []
    try:
        for rank in (0, 1):
            server = rank_server(INPUTS, _trainer(rank, 2), f"tcp://127.0.0.1:{port}", None, 4)
            assert server is not None
            server.start()  # (rank 1 failed here: EADDRINUSE)
            servers.append(server)
        assert [s.endpoint for s in servers] == [
            f"tcp://127.0.0.1:{port}",
            f"tcp://127.0.0.1:{port + 1}",
        ]
        for server in servers:  # each rank's socket answers (refuses: not serving yet)
            client = Predictor(0, endpoint=server.endpoint)
            with client, pytest.raises(PredictRefused) as refused:
                client.predict({"x": np.zeros(3, np.float32)}, timeout=30)
            assert refused.value.reason == "not_serving"
            assert server.telemetry()["requests"] == 1
    finally:
        for server in servers:
            server.stop()


def test_a_bind_that_fails_names_the_rank_the_endpoint_and_the_fix() -> None:
    first = PredictServer(INPUTS, bind="tcp://127.0.0.1:*")
    first.start()
    try:
        taken = first.endpoint
        assert taken is not None
        second = PredictServer(INPUTS, rank=0, bind=taken)
        with pytest.raises(OSError) as failed:
            second.start()
        assert failed.value.errno == errno.EADDRINUSE
        message = str(failed.value)
        assert f"rank 0 cannot bind {taken}" in message
        assert "ServingHook(bind=...)" in message and "port + r" in message
    finally:
        first.stop()


@pytest.mark.parametrize(
    "bind, rank, expected",
    [
        ("tcp://127.0.0.1:6000", 0, "tcp://127.0.0.1:6000"),
        ("tcp://127.0.0.1:6000", 3, "tcp://127.0.0.1:6003"),
        ("tcp://*:6000", 1, "tcp://*:6001"),
        ("tcp://127.0.0.1:*", 1, "tcp://127.0.0.1:*"),  # a random port: as it is
        ("tcp://127.0.0.1:0", 1, "tcp://127.0.0.1:0"),
        ("ipc:///tmp/serve", 0, "ipc:///tmp/serve"),
        ("ipc:///tmp/serve", 2, "ipc:///tmp/serve.2"),
        ("inproc://x", 1, "inproc://x"),
    ],
)
def test_the_rank_offset(bind: str, rank: int, expected: str) -> None:
    from melissa_trainer.stream.serving_rendezvous import serving_rank_bind

    assert serving_rank_bind(bind, rank) == expected
