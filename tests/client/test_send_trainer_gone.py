"""A send blocked because its trainer was killed (SIGKILL) says, once, what it waits
for, and its error states the whole wait and what to do, as a close does
(`send_wait`, `closing.waiting_notice`, `following`).

Before, such a send waited without a word (disconnected_timeout, then follow_timeout
for a restarted trainer), and its `ReceiverGone` named only the first wait: not the
follow wait, not the total, not to run the simulation again.

The trainer's receiving side is `test_close_trainer_gone`'s (a real `Receiver` in a
process of its own, publishing a rendezvous; its fixture and `killed` reused). The
client's queue is small and unbatched (``sndhwm=2``, ``batch_bytes=0``): once the
trainer is gone, a few sends fill it and the next one blocks.
"""

from __future__ import annotations

import itertools
import logging
import re
from pathlib import Path

import numpy as np
import pytest
from keys_receiver_process import ReceiverProcess
from test_close_trainer_gone import LOGGER, STEPS, killed, trainer

from melissa_trainer.client import Client, ClientTuning

pytestmark = pytest.mark.e2e

__all__ = ["trainer"]  # (the fixture, test_close_trainer_gone's)

#: `ClientTuning.failed_close_timeout` of the clients whose trainer is killed
FAILED = 0.2

#: what a blocked send's notice says of the receiver (`closing.waiting_notice`)
NOTICE = re.compile(r"sending time step \d+, the trainer's receiver at ")


def blocked_until_gone(
    client: Client, trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> tuple[str, list[str]]:
    """`killed`, then send until a send blocks and gives up: (its error, the client's
    warnings meanwhile). The client is released after: a close after a failure, which
    the tuning bounds to a moment (`FAILED`: it lingers on what is queued otherwise)."""
    try:
        killed(client, trainer)
        caplog.clear()
        with (
            caplog.at_level(logging.WARNING, logger=LOGGER),
            pytest.raises(TimeoutError) as raised,
        ):
            for t in itertools.count(STEPS):  # (until the queue is full and it gives up)
                client.send(t, u=np.full(4, t, np.float64))
        warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    finally:
        client.close(bye=False)
    return str(raised.value), warnings


@pytest.mark.timeout(120)
def test_a_send_blocked_on_a_killed_trainer_says_what_it_waits_for_then_the_whole_wait(
    trainer: ReceiverProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tuning = ClientTuning(
        disconnected_timeout=1.0,
        follow_timeout=1.0,
        sndhwm=2,
        batch_bytes=0,
        failed_close_timeout=FAILED,
    )
    client = Client(simulation_id=8, fields={"u": ((4,), np.float64)}, tuning=tuning)
    endpoint = client.endpoints[0]
    said, warnings = blocked_until_gone(client, trainer, caplog)
    notices = [w for w in warnings if NOTICE.search(w)]
    assert len(notices) == 1, warnings  # (once: not a line per slice)
    notice = notices[0]
    assert re.match(
        rf"simulation 8 rank 0: sending time step \d+, the trainer's receiver at "
        rf"{re.escape(endpoint)} is disconnected since ",
        notice,
    ), notice
    # (the steps sent there: those before the kill, and those queued since)
    assert re.search(r"\d+ time step\(s\) were sent to it\. The send waits up to ", notice), notice
    assert "for it to reconnect (ClientTuning.disconnected_timeout=1.0 s)" in notice, notice
    assert (
        f"(ClientTuning.follow_timeout=1.0 s) for a restarted trainer to publish in {tmp_path}"
    ) in notice, notice
    assert re.search(r"up to \d+ s more, \d+ s in all", notice), notice
    assert notice.endswith(
        "ClientTuning(disconnected_timeout=..., follow_timeout=...) shortens it; nothing "
        "more is said until the send ends."
    ), notice
    # the error: the disconnected wait, then the follow wait, the total, the fix
    assert re.match(r"simulation 8 rank 0: could not send time step \d+, blocked ", said), said
    assert re.search(
        rf"to {re.escape(endpoint)}: the receiver is unreachable, disconnected for \d+ s "
        r"without a new connection",
        said,
    ), said
    # (the follow wait's own clock: 1.0 s, or more where a loaded machine woke it late)
    assert re.search(
        rf"Then it waited [1-9]\d* s for a restarted trainer to publish in "
        rf"{re.escape(str(tmp_path))} "
        r"\(ClientTuning.follow_timeout=1.0 s\), and none did: \d+ s in all\.",
        said,
    ), said
    assert "run it again with the same simulation id (MELISSA_TRAINER_SIMULATION_ID=8)" in said
    assert "A trainer resumed while a client still waits" in said, said
    assert said.count("run it again") == 1, said


@pytest.mark.timeout(120)
def test_a_send_without_a_window_says_what_it_waits_for_and_to_run_the_simulation_again(
    trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """No replay window: no follow wait is announced, and the send's own error says
    what to do."""
    tuning = ClientTuning(
        disconnected_timeout=1.0,
        replay_bytes=0,
        sndhwm=2,
        batch_bytes=0,
        failed_close_timeout=FAILED,
    )
    client = Client(simulation_id=9, fields={"u": ((4,), np.float64)}, tuning=tuning)
    said, warnings = blocked_until_gone(client, trainer, caplog)
    notices = [w for w in warnings if NOTICE.search(w)]
    assert len(notices) == 1, warnings
    assert "follow_timeout" not in notices[0], notices[0]
    assert "ClientTuning(disconnected_timeout=...) shortens it" in notices[0], notices[0]
    assert re.search(r"disconnected for \d+ s without a new connection", said), said
    assert "Then it waited" not in said, said
    assert said.endswith("A simulation the launcher runs, it runs again itself."), said
    assert "(MELISSA_TRAINER_SIMULATION_ID=9)" in said, said


@pytest.mark.timeout(120)
def test_sends_to_a_live_trainer_log_no_notice(
    trainer: ReceiverProcess, caplog: pytest.LogCaptureFixture
) -> None:
    """The same small queue, the trainer there and reading: every step arrives, and
    nothing is logged (a send blocked on back-pressure from a connected receiver is
    not a trainer gone)."""
    tuning = ClientTuning(disconnected_timeout=1.0, follow_timeout=1.0, sndhwm=2, batch_bytes=0)
    client = Client(simulation_id=10, fields={"u": ((4,), np.float64)}, tuning=tuning)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for t in range(4 * STEPS):
            client.send(t, u=np.full(4, t, np.float64))
        client.close()
    assert not [r for r in caplog.records if r.name == LOGGER], caplog.records
    assert trainer.keys() == [(10, t) for t in range(4 * STEPS)]
