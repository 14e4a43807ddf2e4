"""A C solver following a restarted trainer sends again, from its replay window, the
steps the checkpoint lacks (clients/c/src/follow.c). Those sends wait as every other send
does (clients/c/src/send_wait.c): in slices, giving up on a new trainer that dies during
the follow once it has been disconnected for the disconnected timeout (and no newer run
published within the follow timeout), and following a newer run published meanwhile.

The trainers are played by the test, deterministically: the solver streams STEPS steps to
run-a; the test publishes run-b, whose follow socket answers HELD "none held" (every step
is to be sent again) and whose data endpoint refuses connections (a trainer that died
right after it answered: a port bound and held); the solver's close looks at the
rendezvous (docs/protocol.md 17), follows run-b, and its sends again block on the queue
to it (sndhwm 1).

* Nothing more published: the close fails with MT_ETIMEDOUT naming run-b's endpoint, the
  setting and what to do. Before: the sends blocked for ever (the unbounded default send
  timeout; the test's timeout ended it).
* Run-c published as run-b's follow socket answers (the oracle: run-c's data socket, its
  HELD and RECEIPT played by test_c_close_follow's `resumed_receiver`): the close follows
  run-c from within the blocked send, sends it the steps its checkpoint lacks, says BYE
  with every step, and returns MT_OK once run-c confirmed it.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from held_ports import refused_endpoint
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_follow import HELD, resumed_receiver
from test_c_close_receipt import STEPS, publish

from melissa_trainer import wire as P
from melissa_trainer.wire.held import HELD_NONE, decode_held_query, encode_held

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8


def dead_endpoint(ctx: zmq.Context) -> str:
    """A TCP endpoint that refuses connections (a trainer that died): its port held until
    the test ends (`held_ports`: one bound then closed here was taken by another socket
    on a busy machine); `ctx` is not used."""
    return refused_endpoint()


@contextmanager
def held_none(
    ctx: zmq.Context, answered: Callable[[], None], answers: bool = True
) -> Iterator[str]:
    """Run-b's follow socket: answers each HELD_QUERY "none held" (unless not `answers`:
    a dead trainer's, which takes the question and says nothing), then calls `answered`
    (once); yields its endpoint."""
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind("tcp://127.0.0.1:*")
    stop = threading.Event()

    def run() -> None:
        said = False
        while not stop.is_set():
            if not router.poll(20):
                continue
            identity, frame = router.recv_multipart()
            if frame[P.KIND_AT] != P.HELD_QUERY:
                continue  # (a RECEIPT_QUERY is not answered: this trainer is dead)
            sid, request_id = decode_held_query(frame)
            if answers:
                held = encode_held(sid, request_id, 0, 1, HELD_NONE, 0, b"")
                router.send_multipart([identity, held])
            if not said:
                said = True
                answered()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield str(router.getsockopt_string(zmq.LAST_ENDPOINT))
    finally:
        stop.set()
        thread.join()
        router.close()


def close_after_restart(
    exe: Path,
    ctx: zmq.Context,
    rendezvous: Path,
    then: Callable[[], None],
    setup: tuple[str, ...],
    env: dict[str, str],
) -> tuple[int, str, str, str]:
    """The solver streams STEPS steps to run-a; run-b (dead data endpoint, `held_none`,
    calling `then` once it answered) is published; the solver closes: the close's status,
    message, stderr and run-b's data endpoint."""
    sink_a = ctx.socket(zmq.PULL)
    sink_a.bind("tcp://127.0.0.1:*")
    dead = dead_endpoint(ctx)
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **env})
    try:
        with held_none(ctx, then) as follow_b:
            publish(
                rendezvous, str(sink_a.getsockopt_string(zmq.LAST_ENDPOINT)), "tcp://127.0.0.1:1"
            )
            sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
            sent = script.send("id 3", "field u 1 1 4", "sndhwm 1", *setup, "start", *sends)
            assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
            publish(rendezvous, dead, follow_b, run="run-b")  # (the trainer restarted)
            closed = script.send("close")
            lines, err = script.finish(120)
    finally:
        script.kill()
        sink_a.close(linger=0)
    code, _, message = lines[closed][-1].partition(" ")
    return int(code), message.strip(), err, dead


def assert_gave_up(code: int, message: str, err: str, dead: str) -> None:
    assert code == MT_ETIMEDOUT, (message, err)
    assert message.startswith("simulation 3 rank 0: could not send time step "), message
    assert f"waiting for the trainer to take the messages queued to {dead}: " in message
    # (run-b's data endpoint never accepted a connection: nothing "died", as Python says)
    assert "unreachable, tried for " in message and "died" not in message, message
    assert "(mt_set_disconnected_timeout=0.5 s), and no restarted trainer" in message, message
    assert f"no receiver ever accepted a connection at {dead}" in message, message
    assert "no restarted trainer published in the rendezvous within " in message
    assert "MELISSA_TRAINER_SIMULATION_ID=3" in message, message


@pytest.mark.timeout(180)
def test_a_trainer_that_dies_during_the_follow_fails_the_resends(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    setup = ("disconnected_timeout 0.5", "follow_timeout 0.5")
    code, message, err, dead = close_after_restart(
        script_exe, zctx, tmp_path / "rv", lambda: None, setup, {}
    )
    assert_gave_up(code, message, err, dead)  # (before: the close never returned)


@pytest.mark.timeout(180)
def test_a_newer_run_published_during_the_follow_is_followed(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Run-c publishes as run-b answers HELD; the defaults (60 s disconnected, 120 s
    follow) leave run-b's blocked sends only one way out: following run-c."""
    rendezvous = tmp_path / "rv"
    with resumed_receiver(zctx) as (sink_c, follow_c, frames, kinds):
        code, message, err, _ = close_after_restart(
            script_exe,
            zctx,
            rendezvous,
            lambda: publish(rendezvous, sink_c, follow_c, run="run-c"),
            (),
            {},
        )
        got = list(frames)
    assert code == 0, (message, err)
    assert f"followed the restarted trainer (run run-c at {sink_c}): 2 step(s) sent again" in err
    said = [f[P.KIND_AT] for f in got]
    assert said == [P.HELLO, P.DATA, P.DATA, P.BYE], said
    steps = [struct.unpack_from("<Q", f, 16)[0] for f in got[1:3]]
    assert steps == [t for t in range(STEPS) if t not in HELD], steps
    (bye_steps,) = struct.unpack_from("<Q", got[3], 20)
    assert bye_steps == STEPS  # (every step sent: held or sent again)
    assert kinds[0] == P.HELD_QUERY and P.RECEIPT_QUERY in kinds, kinds


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_resends_to_a_dead_trainer_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The give-up path under AddressSanitizer and UBSan: no leak (the plan, the HELD
    replies, the transport replaced then failed), no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    setup = ("disconnected_timeout 0.5", "follow_timeout 0.5")
    code, message, err, dead = close_after_restart(
        exe, zctx, tmp_path / "rv", lambda: None, setup, dict(SANITIZER_ENV)
    )
    assert_gave_up(code, message, err, dead)
    assert "ERROR" not in err and "runtime error" not in err, err
