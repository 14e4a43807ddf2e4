"""A late signal's line said before the end's action point promises "where the end's
checkpoint stands is said once its save is decided" (`trainer.late_end`). Found by
review hrev9 (2026-12-07): `EndCheckpoint.decide` was called only from
`ending.end_training`'s ``deciding``, so when `train()` failed between
`PreemptionHandler.finish` and that action point (`last_window_check`: the loss guard,
a peer's failure; `refuse_untrained`; a LOOP_END hook, as here) nothing was said, and
the line's "(exit status 143)" was false. Now `train()`'s ``finally`` decides with the
failure's sentence. The oracle: the run's log (literal words) and the checkpoint folder."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "late_signal_then_fail.py"


def run(tmp_path: Path) -> str:
    log = tmp_path / "log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(tmp_path / "out")], stdout=sink,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        wait_until((tmp_path / "marker").exists, "the hold", UNTIL_TEST_TIMEOUT, procs=[proc])
        proc.send_signal(signal.SIGTERM)
        said = "SIGTERM received"
        wait_until(lambda: said in log.read_text(), said, UNTIL_TEST_TIMEOUT, procs=[proc])
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) != 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text()


def test_a_pending_late_line_is_answered_when_train_fails_before_the_end(tmp_path: Path) -> None:
    text = run(tmp_path)
    assert "on_loop_end fails" in text, text[-3000:]  # (the failure happened)
    assert "where the end's checkpoint stands is said once" in text, text[-3000:]
    assert ckpt.list_checkpoints(tmp_path / "out" / "checkpoints") == []
    # the promise kept: "SIGTERM (said above): no checkpoint of the end is written, ..."
    assert "SIGTERM (said above): no checkpoint of the end is written" in text, text[-3000:]
    # and that the exit status is not the signal's (the late line said 143)
    assert "train() raises RuntimeError, the signal is not raised again" in text, text[-3000:]
