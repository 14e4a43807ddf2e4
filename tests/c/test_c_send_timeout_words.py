"""What a C solver's send that `mt_set_send_timeout` ended says (clients/c/src/send_words.c):
what the sockets' monitors know, in the words of its close and of the Python client's
send (tests/client/test_give_up_words.py), not "the trainer is not receiving
(back-pressure)" whatever it knew, as it did before (each wrong case below failed):

* no connection ever accepted: check the endpoint, or start the trainer first;
* a program that accepted TCP and never spoke ZeroMQ (past handshake.c's 2 s): not a
  receiver, check the endpoint;
* such a peer sooner than that (a send timeout shorter than 2 s): connected at the TCP
  level, no handshake yet;
* a receiver that took a step and went away: disconnected for N s, run the simulation
  again with the same simulation id;
* back-pressure only from a peer connected past its handshake that does not read (a
  guard: it said so before too).

`mt_script` (clients/c/tests/mt_script.c) drives the C client; the disconnected timeout
is left at its default (60 s) so that only the send timeout ends the sends."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq
from c_driver import lines_of, run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from helpers import running
from predict_script import Script
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.client.handshake_words import NOT_RECEIVER  # (the C words: the same)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]  # (each starts a process)

MT_ETIMEDOUT = 8
COUNT = 1 << 18  # float32 per step: 1 MiB, sent without a copy
BACK_PRESSURE = "the trainer is not receiving (back-pressure)"


def gave_up(lines: list[tuple[int, str]]) -> str:
    """The message of the first command that failed; it must be MT_ETIMEDOUT."""
    failed = [(status, message) for status, message in lines if status != 0]
    assert failed, "no send gave up"
    assert failed[0][0] == MT_ETIMEDOUT, failed[0]
    return failed[0][1]


def sends(simulation_id: int, endpoint: str, timeout: float, *between: str) -> str:
    """A script: a client of `simulation_id` (sndhwm 1, `timeout` s of send timeout) to
    `endpoint`, the lines `between` after its start, then sends until one blocks, abort."""
    head = [f"id {simulation_id}", f"endpoints {endpoint}", "sndhwm 1",
            f"send_timeout {timeout}", "batching 0 1", f"field u 1 1 {COUNT}", "start"]  # fmt: skip
    steps = [f"send {t} u 1 {COUNT} {t}" for t in range(40)]
    return "\n".join([*head, *between, *steps, "abort"]) + "\n"


@pytest.fixture
def silent() -> Iterator[str]:
    """A program that accepts TCP connections (the kernel does, on listen) and never
    speaks ZeroMQ, as an HTTP server's port to a ZeroMQ greeting."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"


def test_never_connected_says_check_the_endpoint(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    with socket.socket() as held:  # (bound, not listening: every connection refused)
        held.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{held.getsockname()[1]}"
        said = gave_up(lines_of(run_script(script_exe, sends(1, endpoint, 0.3), tmp_path)))
    assert said == (
        "simulation 1 rank 0: could not send time step 0 within send_timeout=0.3 s: no "
        f"receiver ever accepted a connection at {endpoint}: check the endpoint (the "
        "trainer's rank_N.json) or start the trainer first; close the client with "
        "mt_client_abort"
    ), said


def test_a_peer_not_a_receiver_says_check_the_endpoint(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    silent: str,
) -> None:
    # (3 s: past the 2 s without a handshake after which handshake.c says "not a receiver")
    script = sends(2, silent, 3.0, "sleep 0.2")
    said = gave_up(lines_of(run_script(script_exe, script, tmp_path)))
    assert said.startswith("simulation 2 rank 0: could not send time step "), said
    assert f"{silent}: {NOT_RECEIVER}; close the client with mt_client_abort" in said, said
    assert "back-pressure" not in said and "ever accepted" not in said, said


def test_a_peer_without_a_handshake_yet_is_not_called_back_pressure(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    silent: str,
) -> None:
    # (0.3 s: sooner than "not a receiver" is decided; the 0.2 s sleep: TCP connected)
    script = sends(6, silent, 0.3, "sleep 0.2")
    said = gave_up(lines_of(run_script(script_exe, script, tmp_path)))
    assert said.startswith("simulation 6 rank 0: could not send time step "), said
    assert (
        f"{silent} is connected at the TCP level, but no ZeroMQ handshake completed yet (" in said
    ), said
    assert "if this persists, it is not a trainer's receiver: check the endpoint" in said, said
    assert "back-pressure" not in said and NOT_RECEIVER not in said, said


def test_a_receiver_gone_says_disconnected_and_run_again(
    script_exe: Path,  # noqa: F811
) -> None:
    room = FIFOBuffer(10)
    solver = None
    try:
        with running(room) as receiver:
            endpoint = str(receiver.endpoint)
            solver = Script(script_exe)
            first = solver.send(*sends(3, endpoint, 1.0).splitlines()[:8], "flush")
            assert solver.wait(first)[-1].strip() == "0", solver.seen
            wait_until(lambda: room.stats().put == 1, "the receiver's sample")
        # (the receiver stopped: its port refuses the reconnections)
        solver.send(*sends(3, endpoint, 1.0).splitlines()[8:])
        lines, err = solver.finish(60)
    finally:
        if solver is not None and solver.proc.poll() is None:
            solver.proc.kill()
            solver.proc.wait()
    statuses = [(got[-1] + " ").split(" ", 1) for _, got in sorted(lines.items())]
    said = gave_up([(int(status), message.strip()) for status, message in statuses])
    assert f"the trainer's receiver at {endpoint} is disconnected for " in said, said
    assert "the trainer died or was restarted" in said, said
    assert "run this simulation again" in said, said
    assert "MELISSA_TRAINER_SIMULATION_ID=3" in said, said
    assert "back-pressure" not in said and "ever accepted" not in said, said


def test_back_pressure_is_said_of_a_peer_past_its_handshake_that_does_not_read(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    context = zmq.Context()
    pull = context.socket(zmq.PULL)  # (a ZeroMQ peer, its handshake done, never read)
    try:
        pull.setsockopt(zmq.LINGER, 0)
        pull.setsockopt(zmq.RCVHWM, 1)
        pull.bind("tcp://127.0.0.1:*")
        endpoint = pull.getsockopt_string(zmq.LAST_ENDPOINT)
        script = sends(5, endpoint, 1.0, "sleep 0.2")
        said = gave_up(lines_of(run_script(script_exe, script, tmp_path)))
    finally:
        pull.close(linger=0)
        context.term()
    assert said.startswith("simulation 5 rank 0: could not send time step "), said
    assert said.endswith(f"{BACK_PRESSURE}; close the client with mt_client_abort"), said
    assert all(word not in said for word in ("ever accepted", "TCP level", "disconnected")), said
