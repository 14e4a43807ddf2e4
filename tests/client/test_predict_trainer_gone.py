"""A trainer killed (SIGKILL) while a simulation waits for its prediction, and the
requests after that: the simulation falls back as soon as the connection says the
trainer is gone, not at the end of its timeout.

Found by a user: after ``kill -9`` of the trainer, a solver asking with
``timeout=2`` waited 2 s on every time step for the rest of its run (its steps took
0.1 s), and a request already waiting waited its whole timeout, though the
connection had been dropped at once (a dead process's port refuses connections: the
ZeroMQ monitor says so within milliseconds). Now a request whose connection drops
while it waits, and a request to an endpoint that refuses the connection, raise
`PredictTimeout` at once (caught as `PredictionUnavailable`, as before), saying
which; a trainer that comes back is found again by the next request.

Real processes and sockets: the server is a `PredictServer` in a process of its own,
killed with SIGKILL. The requests' timeouts (120 s) are longer than the test's (60 s):
a request that waited for its timeout fails the test.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import numpy as np
import pytest
from server_process import kill_all, start_server

import melissa_trainer.client.predict_link as predict_link
from melissa_trainer.client import PredictionUnavailable, Predictor, PredictTimeout
from melissa_trainer.client.predict_link import PredictLink
from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 120.0


@pytest.mark.timeout(60)
def test_a_request_waiting_when_the_trainer_is_killed_falls_back_at_once(
    tmp_path: Path,
) -> None:
    first, endpoint = start_server(tmp_path, 1, hold=True)
    second = None
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            u = np.ones(4, np.float32)
            assert client.predict({"u": u}, timeout=LONG).version == 1
            caught: list[BaseException] = []

            def ask() -> None:
                try:
                    client.predict({"u": u}, timeout=LONG)
                except BaseException as exc:  # (checked below)
                    caught.append(exc)

            waiting = threading.Thread(target=ask)
            waiting.start()
            assert first.stdout is not None and first.stdout.readline().strip() == "holding"
            first.send_signal(signal.SIGKILL)  # while the request waits for its answer
            first.wait()
            waiting.join()  # (before the fix: LONG seconds, past the test's timeout)
            assert len(caught) == 1 and isinstance(caught[0], PredictTimeout), caught
            assert "lost" in str(caught[0]) and endpoint in str(caught[0])

            # The dead trainer's serve file stays (SIGKILL): its port refuses the
            # connection; the next requests fail at once (the backoff's, then the
            # refusal's: the next test).
            entry, _ = read_serving(tmp_path / "rv", 0, None)
            assert entry is not None and entry["endpoint"] == endpoint
            for _ in range(3):
                with pytest.raises(
                    PredictionUnavailable,
                    match=r"the trainer stopped or died|the trainer is gone or restarting",
                ):
                    client.predict({"u": u}, timeout=LONG)

            second, endpoint2 = start_server(tmp_path, 2, hold=False)  # a trainer again
            assert endpoint2 != endpoint
            outputs, version = client.predict({"u": u}, timeout=LONG)
            assert version == 2
            np.testing.assert_array_equal(outputs["y"], 2 * u + 2)
    finally:
        kill_all(first, second)


@pytest.mark.timeout(60)
def test_after_a_trainer_that_served_stops_cleanly_requests_fall_back_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM: the trainer refuses what waits (`not_serving`) and removes its serve
    file. The requests after that had each waited their whole timeout for a serve file
    to appear (as for a trainer not started yet); a simulation that was served there
    knows better: it falls back at once, and finds a trainer that comes back."""
    monkeypatch.setattr(predict_link, "_BACKOFF", (0.0, 0.0))  # each request looks (below)
    first, _ = start_server(tmp_path, 1, hold=False)
    second = None
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            u = np.ones(4, np.float32)
            assert client.predict({"u": u}, timeout=LONG).version == 1
            first.send_signal(signal.SIGTERM)
            assert first.wait() == 143
            assert read_serving(tmp_path / "rv", 0, None)[0] is None  # its file removed
            for _ in range(3):  # (the first may meet the closed socket first: refused)
                with pytest.raises(
                    PredictTimeout,
                    match=r"served this simulation stopped|the trainer is gone or restarting",
                ):
                    client.predict({"u": u}, timeout=LONG)
            with pytest.raises(PredictTimeout) as stopped:
                client.predict({"u": u}, timeout=LONG)
            # (one story: it said "no trainer serves predictions there (yet) (the
            # trainer that served this simulation stopped)", a first trainer awaited and
            # the last one stopped in one sentence)
            assert str(stopped.value) == (
                f"no serving endpoint in '{tmp_path / 'rv'}': the trainer that served this "
                "simulation stopped (no trainer serves predictions there); the next request "
                "looks the endpoint up again"
            )
            second, _ = start_server(tmp_path, 2, hold=False)
            assert client.predict({"u": u}, timeout=LONG).version == 2
    finally:
        kill_all(first, second)


@pytest.mark.timeout(60)
def test_while_the_trainer_is_gone_requests_fail_without_a_socket_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A solver asking in a loop while its trainer is gone (the resize test's client
    ran out of file descriptors: a socket and its monitor per request, thousands a
    second). After a failure that found the trainer gone, the requests of the backoff
    fail at once, without dialling; the one after it dials again."""
    dials = 0
    connect = PredictLink.connect

    def counted(self: PredictLink, deadline: float, timeout: float) -> object:
        nonlocal dials
        dials += 1
        return connect(self, deadline, timeout)

    monkeypatch.setattr(PredictLink, "connect", counted)
    first, _ = start_server(tmp_path, 1, hold=False)
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            u = np.ones(4, np.float32)
            assert client.predict({"u": u}, timeout=LONG).version == 1
            first.send_signal(signal.SIGKILL)
            first.wait()
            # (the kept connection's loss may reach the monitor before, as or while this
            # request is sent: each is the trainer found gone, with the backoff; seen
            # "was lost while" under load, "was lost as the request was about to be
            # sent" in a CI rehearsal)
            gone = "refused the connection|was lost while|was lost as the request"
            with pytest.raises(PredictTimeout, match=gone):
                client.predict({"u": u}, timeout=LONG)
            dials_then = dials
            link = client._link
            monkeypatch.setattr(link, "_retry_at", link._retry_at + LONG)  # (no race)
            for _ in range(1000):
                with pytest.raises(PredictTimeout, match="at an earlier request"):
                    client.predict({"u": u}, timeout=LONG)
            assert dials == dials_then  # not one socket more
            monkeypatch.setattr(link, "_retry_at", 0.0)  # the backoff over: it dials
            with pytest.raises(PredictTimeout, match="refused the connection"):
                client.predict({"u": u}, timeout=LONG)
            assert dials == dials_then + 1
    finally:
        kill_all(first)


@pytest.mark.timeout(60)
def test_a_trainer_that_publishes_itself_ends_the_backoff(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trainer resumed while a solver's predictor is in its backoff is asked at the
    first request after it published its serve file, not a backoff later (a solver
    asking at every step got `PredictTimeout` for up to a second after the resumed
    trainer served): the backoff ends once the rendezvous directory changed since the
    last lookup. A backoff longer than the test makes a request that waits for it fail."""
    monkeypatch.setattr(predict_link, "_BACKOFF", (LONG, LONG))
    first, _ = start_server(tmp_path, 1, hold=False)
    second = None
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            u = np.ones(4, np.float32)
            assert client.predict({"u": u}, timeout=LONG).version == 1
            first.send_signal(signal.SIGTERM)
            assert first.wait() == 143
            # the trainer found gone, then looked up again once per change it made in
            # the directory (its serve file removed), then a backoff that nothing ends
            errors = []
            for _ in range(4):
                with pytest.raises(PredictTimeout) as caught:
                    client.predict({"u": u}, timeout=LONG)
                errors.append(str(caught.value))
            assert "at an earlier request" in errors[-1], errors
            second, _ = start_server(tmp_path, 2, hold=False)  # (its serve file written)
            assert client.predict({"u": u}, timeout=LONG).version == 2
    finally:
        kill_all(first, second)


@pytest.mark.timeout(60)
def test_a_connection_dropped_just_before_the_send_fails_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The trainer killed after the request found its connection up, before it sent:
    ZeroMQ posts the DISCONNECTED before it closes the connection's pipe, which takes
    the request meanwhile, never answered. The event was read as one of an earlier
    connection and dropped, and the request waited its whole timeout (a hang in CI);
    or the pipe had closed and the send said "went". Now it says the connection was
    lost, at once. The kill is made at that instant: once the request's wait for a
    connection returned, the server is killed and the monitor holds its event."""
    wait_connected = PredictLink.wait_connected
    kill: list[object] = []

    def then_killed(self: PredictLink, sock: object, deadline: float, timeout: float) -> None:
        wait_connected(self, sock, deadline, timeout)  # type: ignore[arg-type]
        if kill:
            proc = kill.pop()
            proc.send_signal(signal.SIGKILL)  # type: ignore[attr-defined]
            proc.wait()  # type: ignore[attr-defined]
            assert self.monitor is not None and self.monitor.poll(30_000)  # (its drop)

    monkeypatch.setattr(PredictLink, "wait_connected", then_killed)
    first, endpoint = start_server(tmp_path, 1, hold=False)
    try:
        with Predictor(0, rendezvous_dir=tmp_path / "rv") as client:
            u = np.ones(4, np.float32)
            assert client.predict({"u": u}, timeout=LONG).version == 1
            kill.append(first)
            with pytest.raises(
                PredictTimeout, match="was lost as the request was about to be sent"
            ) as caught:
                client.predict({"u": u}, timeout=LONG)
            assert endpoint in str(caught.value) and not kill
            # (found gone: the backoff's requests fail at once, as after any loss)
            with pytest.raises(PredictTimeout, match="at an earlier request"):
                client.predict({"u": u}, timeout=LONG)
    finally:
        kill_all(first)
