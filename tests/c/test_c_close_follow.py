"""A C solver's close that finds its trainer restarted before it confirmed the BYE
(docs/protocol.md, sections 17 and 17b) follows the new run, as the Python client's does
(`confirm.confirm_close`): it asks the new receiver which steps its checkpoint holds
(HELD), says HELLO with the new run id, sends again from its replay window the steps the
checkpoint lacks, says BYE with every step sent, and returns `MT_OK` once the new
receiver confirmed it. A window too small fails the close naming its bound; no window
(``MELISSA_TRAINER_REPLAY_BYTES=0``) fails it as before (test_c_close_receipt.py).

The receivers are played by the test (deterministic: the restart happens when the first
question comes): run-a's follow socket answers "not yet" and, at the first question,
publishes run-b, whose PULL socket (the oracle: what reaches it, decoded from the frames)
and follow socket (HELD: step 0 held; RECEIPT: confirmed when the BYE's count is in) are
the test's. Before the change the close returned `MT_ETIMEDOUT` (the C client did not
follow)."""

from __future__ import annotations

import json
import struct
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from played_receiver import played_receiver
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import (
    STEPS,
    ReceiptQuery,
    close_status,
    follow_socket,
    publish,
    receipt,
)

from melissa_trainer import wire as P
from melissa_trainer.wire.held import HELD_STEPS, decode_held_query, encode_held
from melissa_trainer.wire.receipt import RECEIPT_BYE, RECEIPT_NO_BYE, decode_receipt_query

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8
HELD = [0]  # (run-b's checkpoint holds step 0 of the solver's STEPS)


def answer_as_run_b(frame: bytes, frames: list[bytes]) -> bytes:
    """Run-b's follow socket: HELD (the steps of `HELD`) and RECEIPT (the BYE in once one
    came, among the `frames` its PULL socket took, with the count asked about)."""
    if frame[P.KIND_AT] == P.HELD_QUERY:
        sid, request_id = decode_held_query(frame)
        bits = bytes([sum(1 << t for t in HELD)])
        return encode_held(sid, request_id, 0, 1, HELD_STEPS, STEPS, bits)
    query = decode_receipt_query(frame)
    byes = [f for f in frames if f[P.KIND_AT] == P.BYE]
    bye = RECEIPT_BYE if byes else RECEIPT_NO_BYE
    steps = query.bye_steps if byes else 0
    return receipt(query, P.ADMISSION_ACCEPTED, bye, steps=steps, bye_steps=steps)


def resumed_receiver(
    ctx: zmq.Context,
) -> AbstractContextManager[tuple[str, str, list[bytes], list[int]]]:
    """Run-b's receiver (`played_receiver` answering as `answer_as_run_b`), which
    tests/c/test_c_follow_resend_gone.py plays too."""
    return played_receiver(ctx, answer_as_run_b)


def run_close(
    exe: Path, ctx: zmq.Context, tmp_path: Path, **env: str
) -> tuple[int, str, str, str, list[bytes], list[int]]:
    """The solver streams to run-a, whose follow socket publishes run-b at the close's
    first question: the close's status, message, stderr, run-b's sink endpoint, the
    frames that reached it and the kinds its follow socket was asked."""
    rendezvous = tmp_path / "rv"
    sink_a = ctx.socket(zmq.PULL)
    sink_a.bind("tcp://127.0.0.1:*")
    try:
        with played_receiver(ctx, answer_as_run_b) as (sink_b, follow_b, frames, kinds):

            def answer(query: ReceiptQuery, before: int) -> bytes:
                if before == 0:  # (the question came: the trainer restarts)
                    publish(rendezvous, sink_b, follow_b, run="run-b")
                return receipt(query, P.ADMISSION_ACCEPTED, RECEIPT_NO_BYE)

            with follow_socket(ctx, answer) as (follow_a, _, _):
                publish(rendezvous, str(sink_a.getsockopt_string(zmq.LAST_ENDPOINT)), follow_a)
                code, message, err = close_status(exe, rendezvous, **env)
            got = list(frames)
    finally:
        sink_a.close(linger=0)
    return code, message, err, sink_b, got, list(kinds)


@pytest.mark.timeout(60)
def test_a_trainer_restarted_before_it_confirmed_the_bye_is_followed_by_the_close(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    code, message, err, sink_b, frames, kinds = run_close(script_exe, zctx, tmp_path)
    assert code == 0, (message, err)  # (before: MT_ETIMEDOUT, "does not follow")
    assert f"followed the restarted trainer (run run-b at {sink_b}): 2 step(s) sent again" in err
    said = [f[P.KIND_AT] for f in frames]
    assert said == [P.HELLO, P.DATA, P.DATA, P.BYE], said
    hello = json.loads(frames[0][24:].decode())  # (after its 24-byte fixed part)
    assert hello["run_id"] == "run-b", hello
    steps = [struct.unpack_from("<Q", f, 16)[0] for f in frames[1:3]]
    assert steps == [t for t in range(STEPS) if t not in HELD], steps
    (bye_steps,) = struct.unpack_from("<Q", frames[3], 20)
    assert bye_steps == STEPS  # (every step sent: held or sent again)
    assert kinds[0] == P.HELD_QUERY and P.RECEIPT_QUERY in kinds, kinds


@pytest.mark.timeout(60)
def test_a_window_too_small_fails_the_close_naming_its_bound(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    code, message, _, _, frames, kinds = run_close(
        script_exe, zctx, tmp_path, MELISSA_TRAINER_REPLAY_BYTES="20"
    )  # (16 bytes a step, and 8 of index: none fits)
    assert code == MT_ETIMEDOUT, message
    assert message == (
        "simulation 3 rank 0: the restarted trainer's checkpoint lacks 2 time step(s) this "
        "simulation sent (1, 2) that have left its replay window (mt_set_replay_bytes=20 "
        "bytes, or MELISSA_TRAINER_REPLAY_BYTES: make it hold what the simulation sends "
        "between two checkpoints). Run this simulation again, with the same simulation id "
        "(MELISSA_TRAINER_SIMULATION_ID=3): the resumed trainer keeps the steps it holds and "
        "takes the others, each once"
    ), message
    assert frames == [] and kinds == [P.HELD_QUERY]  # (asked, then nothing sent)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_close_follow_paths_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Followed, and a window too small, under AddressSanitizer and UBSan: no leak (the
    window, the HELD replies, the transport replaced), no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    small = {"MELISSA_TRAINER_REPLAY_BYTES": "20"}
    for name, env, expected in [("followed", {}, 0), ("small", small, MT_ETIMEDOUT)]:
        (tmp_path / name).mkdir()
        code, message, err, _, _, _ = run_close(exe, zctx, tmp_path / name, **SANITIZER_ENV, **env)
        assert code == expected, (name, message, err)
        assert "ERROR" not in err and "runtime error" not in err, err
