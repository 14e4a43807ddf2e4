"""A client following a restarted trainer that is killed before it answers, and
restarted again, follows the newest one (`follow.Superseded`).

User trial 42: a serving trainer SIGKILLed at step 75, resumed, the resumed one
SIGKILLed as its serve file appeared, and resumed a third time. Both solvers (external
mode, asking a prediction before each send) had read the second trainer's rendezvous
and asked it which steps it holds; it never answered (dead), and each waited the
whole `QUERY_TIMEOUT` (30 s) on it, then died of `FollowError` "the restarted
trainer's receiver 0 did not say which steps it holds within 30.0 s", while the third
trainer, published meanwhile, waited for their data. Now the wait for a HELD looks at
the rendezvous every `SUPERSEDE_INTERVAL` s and follows a newer run at once.

Real sockets and in-process receivers: A takes a checkpoint and stops; B's rendezvous
file names ports that refuse (a trainer killed as it published); C resumes from A's
checkpoint once the client asks B (an event: the follow's socket made). Failed before:
the send raised FollowError after 30 s naming B's follow endpoint."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from held_ports import refused_endpoint
from helpers import drain
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client import Client, ClientTuning, PredictTimeout, follow
from melissa_trainer.stream.endpoints import write_rendezvous
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

SID = 3
FIELDS = {"u": ((3,), "<f4")}


def field(t: int) -> np.ndarray:
    return np.full(3, t, dtype="<f4")


def resumable(buffer: FIFOBuffer, where: Path, run_id: str) -> Receiver:
    config = ReceiverConfig(
        expected_simulations=1, bind="tcp://127.0.0.1:*", rendezvous_dir=str(where), run_id=run_id
    )
    return Receiver(buffer, config=config)


def following_client() -> Client:
    """A client of the rendezvous that follows restarted trainers (external mode)."""
    tuning = ClientTuning(disconnected_timeout=2, follow_timeout=30)
    return Client(FIELDS, {}, simulation_id=SID, tuning=tuning)


def send_first_steps(client: Client, a_buffer: FIFOBuffer) -> None:
    """Steps 0-4 sent, and taken by A (its buffer's count)."""
    for t in range(5):
        client.send(t, u=field(t))
    client.flush()
    wait_until(lambda: a_buffer.stats().put == 5, "A's samples", 30)


@pytest.mark.timeout(90)
def test_a_trainer_killed_before_it_answered_is_superseded_by_the_next(
    follow_rendezvous: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rendezvous = follow_rendezvous
    a_buffer, c_buffer = FIFOBuffer(1000), FIFOBuffer(1000)
    a = resumable(a_buffer, rendezvous, "run-a")
    a.start()
    c: Receiver | None = None
    dead_follow = refused_endpoint()
    asked = threading.Event()
    dealer = follow.control_dealer

    def watched(*args: Any, **kwargs: Any) -> Any:
        asked.set()  # (the client asks B what it holds: now C comes)
        return dealer(*args, **kwargs)

    monkeypatch.setattr(follow, "control_dealer", watched)
    try:
        with following_client() as client:
            send_first_steps(client, a_buffer)
            record, buffer_state = a.state_dict(), a_buffer.state_dict()
            a.stop()
            # B: killed as it published itself (its ports refuse)
            write_rendezvous(rendezvous, 0, 1, refused_endpoint(),
                             {"run_id": "run-b", "follow_endpoint": dead_follow})  # fmt: skip

            def third() -> None:
                nonlocal c
                asked.wait(60)
                c_buffer.load_state_dict(*buffer_state)
                c = resumable(c_buffer, rendezvous, "run-c")
                c.load_state_dict(record)
                c.start()

            starter = threading.Thread(target=third, daemon=True)
            starter.start()
            for t in range(5, 10):
                client.send(t, u=field(t))
            starter.join(30)
            assert client.run_id == "run-c"
        assert c is not None
        steps = sorted(int(s["time_step"]) for s in drain(c_buffer))
        assert steps == list(range(10))  # each once: the checkpoint's 0-4, then 5-9
    finally:
        a.stop()
        if c is not None:
            c.stop()


@pytest.mark.timeout(90)
def test_a_request_does_not_wait_past_its_timeout_for_a_restarted_trainer_to_answer(
    follow_rendezvous: Path,
) -> None:
    """A request made while the requests before it failed follows a restarted trainer
    first (`asking`); that trainer's answer of what it holds is awaited the request's
    timeout at most. Trial 42 (again_serve): a request with a 1 s timeout waited 4.9 s,
    for a trainer killed as it published itself, then for its successor; before the
    superseding fix, 30 s, then FollowError. Now PredictTimeout at its timeout, nothing
    followed, and the next send follows the trainer published since. Failed before:
    FollowError after 30 s."""
    rendezvous = follow_rendezvous
    a_buffer, c_buffer = FIFOBuffer(1000), FIFOBuffer(1000)
    a = resumable(a_buffer, rendezvous, "run-a")
    a.start()
    c: Receiver | None = None
    try:
        with following_client() as client:
            send_first_steps(client, a_buffer)
            with pytest.raises(
                PredictTimeout, match="no serving endpoint in"
            ):  # (A serves nothing: the requests fail)
                client.predict({"u": field(0)}, timeout=0.2)
            record, buffer_state = a.state_dict(), a_buffer.state_dict()
            a.stop()
            dead = {"run_id": "run-b", "follow_endpoint": refused_endpoint()}
            write_rendezvous(rendezvous, 0, 1, refused_endpoint(), dead)
            with pytest.raises(PredictTimeout) as caught:
                client.predict({"u": field(0)}, timeout=0.5)
            said = str(caught.value)
            # (the wait said is what was left of the request's 0.5 s: 0.499 on a loaded CI)
            waited = re.search(r"did not say which steps it holds within ([0-9.]+) s", said)
            assert waited is not None and 0 < float(waited.group(1)) <= 0.5, said
            assert "(run run-b) is not answering yet" in said, said
            assert client.run_id == "run-a"  # nothing followed
            c_buffer.load_state_dict(*buffer_state)
            c = resumable(c_buffer, rendezvous, "run-c")
            c.load_state_dict(record)
            c.start()
            for t in range(5, 10):
                client.send(t, u=field(t))
            assert client.run_id == "run-c"
        steps = sorted(int(s["time_step"]) for s in drain(c_buffer))
        assert steps == list(range(10))
    finally:
        a.stop()
        if c is not None:
            c.stop()
