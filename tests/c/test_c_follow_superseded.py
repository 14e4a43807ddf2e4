"""A C solver following a restarted trainer that is killed before it answers which
steps it holds, and restarted again, follows the newest one (clients/c/src/held.c:
each wait for a HELD looks at the rendezvous every 0.1 s; follow.c mt_follow_newer),
as the Python client does (`follow.Superseded`).

User trial 42 (tests/trials/trial41_drive.py again_serve, the C solver): the resumed
trainer SIGKILLed as its serve file appeared, a third one resumed 3 s later. Both C
solvers' closes had found the second trainer's rendezvous and asked its follow socket;
each waited the whole 30 s, then failed MT_ETIMEDOUT "the restarted trainer's receiver
0 did not say which steps it holds within 30.0 s", while the third trainer waited for
their data.

Played by the test: the solver streams to run-a; run-b is published, its follow socket
silent (test_c_follow_resend_gone's `held_none`, not answering: a dead trainer's), its data endpoint
refusing; when run-b is asked, run-c is published (test_c_close_follow's
`resumed_receiver`). Failed before: the close said MT_ETIMEDOUT after 30 s naming
run-b's follow socket."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from held_ports import refused_endpoint
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_follow import resumed_receiver
from test_c_close_receipt import STEPS, publish
from test_c_follow_resend_gone import held_none

from melissa_trainer import wire as P

pytestmark = pytest.mark.e2e  # a process, and a close that follows twice


def close_superseded(exe: Path, ctx: zmq.Context, rendezvous: Path, **env: str) -> str:
    """The scene above, played with the solver `exe`: its stderr once its close
    returned MT_OK having followed run-c (asserted), BYE last."""
    sink_a = ctx.socket(zmq.PULL)
    sink_a.bind("tcp://127.0.0.1:*")
    script = Script(exe, {"MELISSA_TRAINER_RENDEZVOUS": str(rendezvous), **env})
    try:
        with resumed_receiver(ctx) as (sink_c, follow_c, frames, _):
            republish = lambda: publish(rendezvous, sink_c, follow_c, run="run-c")  # noqa: E731
            with held_none(ctx, republish, answers=False) as follow_b:
                publish(
                    rendezvous,
                    str(sink_a.getsockopt_string(zmq.LAST_ENDPOINT)),
                    "tcp://127.0.0.1:1",
                )
                sends = [f"send {t} u 1 4 {t}" for t in range(STEPS)]
                sent = script.send("id 3", "field u 1 1 4", "start", *sends)
                assert script.wait(sent)[-1].split(" ", 1)[0] == "0", script.seen
                publish(rendezvous, refused_endpoint(), follow_b, run="run-b")  # (killed)
                closed = script.send("close")
                lines, err = script.finish(100)
            got = list(frames)
    finally:
        script.kill()
        sink_a.close(linger=0)
    code, _, message = lines[closed][-1].partition(" ")
    assert int(code) == 0, (message, err)
    assert f"followed the restarted trainer (run run-c at {sink_c})" in err, err
    assert "run-b" not in err, err
    assert [f[P.KIND_AT] for f in got][-1] == P.BYE, got
    return err


@pytest.mark.timeout(120)
def test_a_trainer_killed_before_it_answered_is_superseded_by_the_next(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    close_superseded(script_exe, zctx, tmp_path / "rv")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_superseded_follow_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The superseded path under AddressSanitizer and UBSan: the dead run's rendezvous,
    HELD array and counts replaced by the newer run's without a leak or an error."""
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    err = close_superseded(exe, zctx, tmp_path / "rv", **SANITIZER_ENV)
    assert "ERROR" not in err and "runtime error" not in err, err
