"""A connection lost before its BYE, of a client rank that had asked this receiver a
receipt, is said to be maybe a close that gave up waiting for it.

A client's close sends its BYE, then asks each receiver a receipt until its BYE is
confirmed; it gives up after ``close_timeout`` without progress and its process exits,
its BYE (and what was queued before it) lost with it when the receiver had not read it
yet. The receiver then read a connection closed before its BYE, and said only "killed,
crashed, or exited without closing its client": a user whose close timed out read of a
crash. It now names that cause too when a receipt question of that simulation rank was
seen (`StepLedger.asked`, set by `follow_answers.receipt_of`), in full in the first line
and in the short line of the next; a close of a rank that never asked is said as before.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
import zmq
from helpers import running
from test_connection_lost import receiver_warnings
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.wire.receipt import decode_receipt, encode_receipt_query

U = R.Field("u", "<f4", (4,))
GAVE_UP = "its close gave up waiting for this trainer's receipt (close_timeout)"


def opening(sid: int) -> list[bytes]:
    """A HELLO and one DATA of simulation `sid` (client rank 0 of 1)."""
    values = np.zeros(4, np.float32).tobytes()
    data = R.part_header(R.DATA, sid, 0, 0, 1, U, 0, U.size, True) + values
    return [R.encode_hello(sid, 0, 1, R.hello_body([U], {})), data]


@pytest.mark.timeout(90)
def test_a_close_lost_after_a_receipt_question_names_a_close_that_gave_up(
    tmp_path: Path,
) -> None:
    ctx = zmq.Context()
    sockets: list[zmq.Socket] = []
    try:
        with (
            receiver_warnings(logging.INFO) as warned,
            running(FIFOBuffer(100), rendezvous_dir=tmp_path, run_id="run-a") as rec,
        ):
            assert rec._follow is not None and rec._follow.endpoint is not None
            # 3 asks (said in full), 4 does not (the short line, as before), 5 asks (short)
            for n, (sid, asks) in enumerate([(3, True), (4, False), (5, True)], 1):
                push = ctx.socket(zmq.PUSH)
                sockets.append(push)
                push.connect(str(rec.endpoint))
                for frame in opening(sid):
                    push.send(frame)
                wait_until(lambda n=n: rec.telemetry()["samples_put"] >= n, "the DATA", 30)
                if asks:  # (what a closing client asks: its BYE of 1 step confirmed?)
                    ask = ctx.socket(zmq.DEALER)
                    sockets.append(ask)
                    ask.rcvtimeo = 30_000
                    ask.connect(rec._follow.endpoint)
                    ask.send(encode_receipt_query(sid, 1, 1, 0, 1, "run-a"))
                    reply = decode_receipt(ask.recv())
                    assert (reply.simulation_id, reply.steps) == (sid, 1)
                push.close(linger=0)  # without its BYE: the close gave up, the process exited
                wait_until(lambda n=n: rec.telemetry()["connections_lost"] >= n, "the close", 30)
    finally:
        for sock in sockets:
            sock.close(linger=0)
        ctx.term()
    lost = [line for line in warned if "client rank 0:" in line]
    assert len(lost) == 3, lost
    assert lost[0].startswith(
        "simulation 3 client rank 0: its connection closed before its BYE: its process "
        f"ended without one (killed, crashed, exited, or {GAVE_UP}: a launcher logs how, "
        "exit code or signal), its client was left by an exception"
    ), lost[0]
    assert lost[1] == (
        "simulation 4 client rank 0: a connection closed before its BYE: the steps received "
        "before it kept for training, the rest of its run missing unless it runs again "
        "(as above)"
    )
    assert lost[2] == (
        "simulation 5 client rank 0: a connection closed before its BYE: the steps received "
        f"before it kept for training, the rest of its run missing unless it runs again "
        f"(as above; or {GAVE_UP})"
    )
