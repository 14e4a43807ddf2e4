"""A close whose trainer was killed (SIGKILL) and never comes back says, once, what it
waits for, and its error states the whole wait and what to do (`closing`, `patience`).

A user trial (htrial12, finding 2): a solver in external mode, its trainer killed with
``kill -9`` and not resumed. Its close waited 181 s without a word (60 s for the
receiver to reconnect, then 120 s for a restarted trainer to publish), then raised a
`TimeoutError` that named only the first 60 s and did not say to run the simulation
again. Now, a few seconds into that wait (`peer_watch.notice_after`: half a short
`disconnected_timeout`), one WARNING on ``melissa_trainer.client.client`` names the
receiver, since when it is gone, what the close waits for, how long in all and the
settings that shorten it; nothing more until the error, which states the disconnected
wait, the follow wait, their total, the steps sent there and the fix.

The trainer's receiving side is a real `Receiver` publishing a rendezvous, in a process
of its own (so that it can be killed), draining its buffer. The timeouts are set short
through `ClientTuning`; the close starts only once the client's monitor saw the
disconnection (else its BYE might go to the dying connection, and the close wait for
its linger).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from keys_receiver_process import ReceiverProcess, closing, established
from waiting import wait_until

from melissa_trainer.client import Client, ClientTuning, confirm

pytestmark = pytest.mark.e2e

STEPS = 12
LOGGER = "melissa_trainer.client.client"


@pytest.fixture(params=["drain"])
def trainer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> Iterator[ReceiverProcess]:
    """The receiver's process (`keys_receiver_process`), its rendezvous in `tmp_path`,
    named to the client as a solver run by hand names it (external mode); it drains its
    buffer, or not ("hold", by indirect parametrization: its FIFO of 2 full, the rest, the
    BYE among it, waits unread: a trainer whose buffer is full)."""
    how = ["--fifo", "2", "--hold"] if request.param == "hold" else ["--batch", "4"]
    proc = ReceiverProcess("--rendezvous", str(tmp_path), "--run_id", "run-g", *how)
    try:
        monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
        for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv("MELISSA_TRAINER_ATTEMPT", raising=False)  # (not launched)
        yield proc
    finally:
        proc.stop()


def killed_then_closed(
    client: Client, trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> tuple[str, list[str]]:
    """`killed`, then close: (the close's error, the client's warnings)."""
    killed(client, trainer)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=LOGGER), pytest.raises(TimeoutError) as raised:
        client.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    return str(raised.value), warnings


def killed(client: Client, trainer: ReceiverProcess) -> None:
    """Send `STEPS` steps, SIGKILL the trainer, wait until the client's monitor saw its
    receiver disconnected (tests/client/test_send_trainer_gone.py too)."""
    for t in range(STEPS):
        client.send(t, u=np.full(4, t, np.float64))
    client.flush()
    trainer.kill()
    handshakes = client._transport.handshakes  # (its one reader: the client's thread)

    def disconnected() -> bool:
        handshakes.read()
        return handshakes.down_since[0] is not None

    wait_until(disconnected, "the client's monitor to see the receiver gone", 30.0)


@pytest.mark.timeout(120)
def test_a_close_following_a_killed_trainer_says_what_it_waits_for_then_the_whole_wait(
    trainer: ReceiverProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tuning = ClientTuning(disconnected_timeout=1.0, follow_timeout=1.0)
    client = Client(simulation_id=4, fields={"u": ((4,), np.float64)}, tuning=tuning)
    endpoint = client.endpoints[0]
    said, warnings = killed_then_closed(client, trainer, caplog)
    notices = [w for w in warnings if "closing, the trainer's receiver" in w]
    assert len(notices) == 1, warnings  # (once: not a line per slice)
    notice = notices[0]
    assert notice.startswith(
        f"simulation 4 rank 0: closing, the trainer's receiver at {endpoint} is disconnected since "
    ), notice
    assert f"{STEPS} time step(s) were sent to it" in notice, notice
    assert "(ClientTuning.disconnected_timeout=1.0 s)" in notice, notice
    assert (
        f"(ClientTuning.follow_timeout=1.0 s) for a restarted trainer to publish in {tmp_path}"
    ) in notice, notice
    assert re.search(r"up to \d+ s more, \d+ s in all", notice), notice
    assert "ClientTuning(disconnected_timeout=..., follow_timeout=...) shortens it" in notice
    # the error: the disconnected wait, then the follow wait, the total, what, the fix
    assert said.startswith(f"simulation 4 rank 0: queued messages not delivered to {endpoint}")
    assert re.search(r"disconnected for \d+ s without a new connection", said), said
    assert f"It had sent {STEPS} time step(s) to {endpoint}" in said, said
    # (the follow wait's own clock: 1.0 s, or more where a loaded machine woke it late)
    assert re.search(
        rf"Then it waited [1-9]\d* s for a restarted trainer to publish in "
        rf"{re.escape(str(tmp_path))} "
        r"\(ClientTuning.follow_timeout=1.0 s\), and none did: \d+ s in all\.",
        said,
    ), said
    assert "run it again with the same simulation id (MELISSA_TRAINER_SIMULATION_ID=4)" in said
    assert "A trainer resumed while a client still waits" in said, said
    assert said.count("run it again") == 1, said


@pytest.mark.timeout(120)
def test_a_close_without_a_window_says_what_it_waits_for_and_to_run_the_simulation_again(
    trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """No replay window: no follow wait is announced, and the close's own error says
    what to do."""
    tuning = ClientTuning(disconnected_timeout=1.0, replay_bytes=0)
    client = Client(simulation_id=5, fields={"u": ((4,), np.float64)}, tuning=tuning)
    said, warnings = killed_then_closed(client, trainer, caplog)
    notices = [w for w in warnings if "closing, the trainer's receiver" in w]
    assert len(notices) == 1, warnings
    assert "follow_timeout" not in notices[0], notices[0]
    assert "ClientTuning(disconnected_timeout=...) shortens it" in notices[0], notices[0]
    assert re.search(r"disconnected for \d+ s without a new connection", said), said
    assert said.endswith("A simulation the launcher runs, it runs again itself."), said
    assert "(MELISSA_TRAINER_SIMULATION_ID=5)" in said, said


@pytest.mark.timeout(120)
def test_a_normal_close_logs_no_notice(
    trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> None:
    tuning = ClientTuning(disconnected_timeout=1.0, follow_timeout=1.0)
    client = Client(simulation_id=6, fields={"u": ((4,), np.float64)}, tuning=tuning)
    for t in range(STEPS):
        client.send(t, u=np.full(4, t, np.float64))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        client.close()
    assert not [r for r in caplog.records if r.name == LOGGER], caplog.records
    assert trainer.keys() == [(6, t) for t in range(STEPS)]  # ("end": the stream ended)


@pytest.mark.timeout(120)
@pytest.mark.skipif(sys.platform != "linux", reason="/proc/net/tcp")
@pytest.mark.parametrize("trainer", ["hold"], indirect=True)
def test_a_close_whose_bye_a_killed_trainer_never_confirms_says_what_it_waits_for(
    trainer: ReceiverProcess,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The BYE delivered, unread (a full buffer), the trainer killed while the close asks
    for its receipt (`receipts`): the same one notice, then the receipt's error."""
    tuning = ClientTuning(disconnected_timeout=1.0, follow_timeout=1.0)
    client = Client(simulation_id=7, fields={"u": ((4,), np.float64)}, tuning=tuning)
    for t in range(STEPS):
        client.send(t, u=np.full(4, t, np.float64))
    follow = json.loads((tmp_path / "rank_0.json").read_text())["follow_endpoint"]
    # (the kill must come once the transport delivered the BYE, when the confirmation
    # starts: the follow endpoint's connection alone is no such sign, it may come while
    # the BYE is still queued, whose close then says "BYE not delivered": a CI flake)
    confirming = threading.Event()
    original = confirm.confirm_close

    def confirm_close(*args: Any, **kwargs: Any) -> None:
        confirming.set()
        original(*args, **kwargs)

    monkeypatch.setattr(confirm, "confirm_close", confirm_close)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        thread, failed = closing(client)
        assert confirming.wait(30.0), "the close's transport did not deliver its BYE"
        port = int(follow.rsplit(":", 1)[1])  # (the receipt rounds connected: then kill)
        wait_until(lambda: established(port), "the close to ask for its receipt", 30.0)
        trainer.kill()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the close did not end"
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    notices = [w for w in warnings if "closing, its BYE is not confirmed yet" in w]
    assert len(notices) == 1, warnings
    assert f"the trainer's receiver 0 ({follow}) has neither answered" in notices[0]
    assert (
        f"(ClientTuning.follow_timeout=1.0 s) for a restarted trainer to publish in {tmp_path}"
    ) in notices[0], notices[0]
    assert len(failed) == 1 and isinstance(failed[0], TimeoutError), failed
    said = str(failed[0])
    assert "its BYE was not confirmed" in said, said
    assert "(MELISSA_TRAINER_SIMULATION_ID=7)" in said, said
