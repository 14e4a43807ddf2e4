"""A close that gives up names the setting that bounded its wait, and how to change it
(`melissa_trainer.client.patience.CloseWait`): `close_timeout` for a close that says BYE,
`failed_close_timeout` for a close after a failure (the lower of the two ends it), and,
after a failure, that a disconnected receiver is not waited for (not a
``disconnected_timeout`` of 0 s that no user set). Real sockets on 127.0.0.1.

The "paused trainer" is a TCP listener that accepts and never answers the ZeroMQ
greeting: the client's messages stay queued for as long as the test wants, whatever
the kernel's buffers hold."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest
from held_ports import refused_endpoint

from melissa_trainer.client import Client, ClientTuning

FIELDS = {"u": ((4,), "float32")}


@pytest.fixture
def paused() -> Iterator[str]:
    """The endpoint of a trainer that accepts connections and reads nothing."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_names_failed_close_timeout_not_close_timeout(
    paused: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The user set close_timeout=3600 (far beyond this test's timeout: a close that
    waited for it fails by the timeout marker); the wait after the solver's exception is
    bounded by failed_close_timeout: the warning must name that one (before:
    "close_timeout=...", a setting whose change does nothing to this wait)."""
    tuning = ClientTuning(close_timeout=3600, failed_close_timeout=0.3)
    with (
        caplog.at_level("WARNING", logger="melissa_trainer.client.client"),
        pytest.raises(RuntimeError, match="solver diverged"),
        Client(FIELDS, simulation_id=1, endpoints=paused, tuning=tuning) as client,
    ):
        client.send(0, u=np.ones(4, np.float32))
        raise RuntimeError("solver diverged")
    said = caplog.text  # (the 0.3 s bound ended it: its words, not close_timeout's)
    assert "not delivered within failed_close_timeout=0.3 s" in said, said
    assert "ClientTuning(failed_close_timeout=...)" in said, said
    assert "close_timeout=3600" not in said, said


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_bounded_by_a_lower_close_timeout_names_it(
    paused: str, caplog: pytest.LogCaptureFixture
) -> None:
    tuning = ClientTuning(close_timeout=0.3, failed_close_timeout=20)
    client = Client(FIELDS, simulation_id=2, endpoints=paused, tuning=tuning)
    client.send(0, u=np.ones(4, np.float32))
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        client.close(bye=False)
    assert "not delivered within close_timeout=0.3 s" in caplog.text, caplog.text
    assert "ClientTuning(close_timeout=...)" in caplog.text, caplog.text


@pytest.mark.timeout(30)
def test_a_close_with_bye_names_close_timeout_and_how_to_change_it(paused: str) -> None:
    client = Client(
        FIELDS, simulation_id=3, endpoints=paused, tuning=ClientTuning(close_timeout=0.3)
    )
    client.send(0, u=np.ones(4, np.float32))
    with pytest.raises(TimeoutError) as raised:
        client.close()
    said = str(raised.value)
    assert "not delivered within close_timeout=0.3 s" in said, said
    assert "ClientTuning(close_timeout=...)" in said and "failed_close_timeout" not in said, said


@pytest.mark.timeout(30)
def test_a_close_after_a_failure_does_not_name_a_disconnected_timeout_nobody_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The trainer is gone (refused connections) and a large array is still queued: a
    close after a failure gives up at once, and says so, instead of naming
    "disconnected_timeout=0.0 s" (the user's is 3600). Every bound is an hour, far beyond
    this test's timeout: a close that waited for any fails by the timeout marker."""
    large = np.ones(1 << 16, np.float32)  # 256 KiB: sent without a copy, held until sent
    tuning = ClientTuning(close_timeout=3600, failed_close_timeout=3600, disconnected_timeout=3600)
    client = Client(
        {"u": (large.shape, "float32")},
        simulation_id=4,
        endpoints=refused_endpoint(),
        send_timeout=0.3,
        tuning=tuning,
    )
    with pytest.raises(TimeoutError, match="time step 0"):
        client.send(0, u=large)  # nobody takes it
    with caplog.at_level("WARNING", logger="melissa_trainer.client.client"):
        client.close(bye=False)  # (given up on the gone receiver: its words below)
    said = caplog.text
    assert "the receiver is unreachable" in said, said
    assert "a close after a failure does not wait for a disconnected receiver" in said, said
    assert "disconnected_timeout=0.0" not in said, said
