"""A C solver's close whose messages cannot leave (its trainer is dead: the BYE waits in
ZeroMQ's queue) notices it as the Python client's close does (closing.py, patience.py
CloseWait), not when its close timeout ran out (clients/c/src/close_wait.c):

* a receiver disconnected for the disconnected timeout: MT_ETIMEDOUT, naming it, the
  setting and what to do (with a replay window the close would then wait the follow
  timeout for a restarted trainer, test_c_close_follow.py);
* a receiver whose rendezvous file is marked stopped with a stop record of its run that
  lacks this BYE (the trainer ended): MT_ETIMEDOUT at once, naming why the trainer
  stopped, with no restarted trainer waited for (docs/protocol.md 17b, "A trainer that
  stopped"; its words, those of the Python client: test_c_close_stop_first.py).

Deterministic: the trainer is dead before the solver starts (its port bound, then
closed: every connection refused), so that nothing the solver sends ever leaves. The
close timeout is 600 s: before the change, each close waited for it (the test's timeout
ended it), whatever the disconnected timeout or the stop record said."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, STEPS, publish
from test_c_close_stop_record import ingest
from test_c_follow_resend_gone import dead_endpoint

from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.stop_record import StopReason, build_record

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_ETIMEDOUT = 8


def close_to_dead(
    exe: Path,
    rendezvous: Path,
    dead: str,
    setup: tuple[str, ...],
    record: dict | None = None,
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    """A solver streaming STEPS steps to `dead` (published as run-a), the rendezvous file
    then marked stopped with `record` (if any), then closed: its status, message, stderr."""
    publish(rendezvous, dead, "tcp://127.0.0.1:1")
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **(env or {})})
    try:
        sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
        sent = script.send("id 3", "field u 1 1 4", "close_timeout 600", *setup, "start", *sends)
        assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
        if record is not None:
            mark_stopped(rendezvous, 0, dead, record)
        closed = script.send("close")
        lines, err = script.finish(120)
    finally:
        script.kill()
    code, _, message = lines[closed][-1].partition(" ")
    return int(code), message.strip(), err


@pytest.mark.timeout(120)
def test_a_close_to_a_dead_trainer_gives_up_after_the_disconnected_timeout(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    dead = dead_endpoint(zctx)
    setup = ("replay_bytes 0", "disconnected_timeout 0.5")
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup)
    assert code == MT_ETIMEDOUT, (message, err)
    assert message.startswith(
        f"simulation 3 rank 0: queued messages not delivered to {dead}: the receiver is "
        "unreachable, tried for "
    ), message
    # (never connected: the endpoint, or a trainer not started, is said; not "died")
    assert (
        f"(mt_set_disconnected_timeout=0.5 s): no receiver ever accepted a connection at {dead}"
        in message
    )
    assert "died" not in message, message


@pytest.mark.timeout(120)
def test_a_close_to_a_trainer_that_ended_reads_its_stop_record(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A disconnected timeout of 600 s, and the replay window (a restarted trainer would
    be waited for): the record alone ends the close."""
    dead = dead_endpoint(zctx)
    ended = build_record(ingest({}, {}), RUN, StopReason("end", "max_steps 7 reached"))
    setup = ("disconnected_timeout 600",)
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup, ended)
    assert code == MT_ETIMEDOUT, (message, err)
    assert message.startswith(  # (the reason first, as Python: test_c_close_stop_first.py)
        "simulation 3 rank 0: the trainer stopped before it read its queued messages (the "
        f"BYE among them), which were not delivered to {dead} (end: max_steps 7 reached"
    ), message


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_close_to_a_dead_trainer_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Both paths under AddressSanitizer and UBSan: the BYE held without a copy and
    dropped with the sockets (its buffer freed by ZeroMQ's callback), the stop record
    read: no leak, no error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    ended = build_record(ingest({}, {}), RUN, StopReason("end", "max_steps 7 reached"))
    gone = ("replay_bytes 0", "disconnected_timeout 0.5")
    for name, setup, record in [
        ("gone", gone, None),
        ("ended", ("disconnected_timeout 600",), ended),
    ]:
        dead = dead_endpoint(zctx)
        code, message, err = close_to_dead(
            exe, tmp_path / name, dead, setup, record, dict(SANITIZER_ENV)
        )
        assert code == MT_ETIMEDOUT, (name, message, err)
        assert "ERROR" not in err and "runtime error" not in err, err
