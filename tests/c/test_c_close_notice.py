"""A C solver's close waiting on a receiver it cannot reach says so once on stderr, as
the Python close's warning does (clients/c/src/close_wait.c `tell`; closing.py
waiting_notice; tests/client/test_close_trainer_gone.py): what it waits for, how long in
all and the setters that shorten it, then nothing until the close ends.

Before the change the C close was silent for the whole wait (a user trial of the Python
client, htrial12 finding 2: 181 s without a word). The trainer here is dead before the
solver starts (test_c_close_dead_trainer.py's setup): the notice names the endpoint no
receiver ever accepted a connection at."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_dead_trainer import MT_ETIMEDOUT, close_to_dead
from test_c_follow_resend_gone import dead_endpoint

pytestmark = pytest.mark.e2e  # every test here starts a process

PREFIX = "melissa_trainer: mt_client_close: simulation 3 rank 0: closing, "


@pytest.mark.timeout(120)
@pytest.mark.parametrize("window", [False, True], ids=["no-window", "window"])
def test_a_close_to_a_dead_trainer_says_once_what_it_waits_for(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    window: bool,
) -> None:
    dead = dead_endpoint(zctx)
    setup = ("disconnected_timeout 1", "follow_timeout 0.5")
    setup += () if window else ("replay_bytes 0",)
    code, message, err = close_to_dead(script_exe, tmp_path / "rv", dead, setup)
    assert code == MT_ETIMEDOUT, (message, err)
    notices = [line for line in err.splitlines() if line.startswith(PREFIX)]
    assert len(notices) == 1, err
    notice = notices[0]
    assert f"no receiver ever accepted a connection at {dead}" in notice, notice
    assert "(mt_set_disconnected_timeout=1.0 s)" in notice, notice
    assert notice.endswith("nothing more is said until the close ends"), notice
    if window:
        assert "(mt_set_follow_timeout=0.5 s) for a restarted trainer to publish in" in notice
        assert "mt_set_disconnected_timeout and mt_set_follow_timeout shorten it" in notice
    else:
        assert "follow_timeout" not in notice, notice
        assert "mt_set_disconnected_timeout shortens it" in notice, notice
