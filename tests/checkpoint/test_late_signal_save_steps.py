"""Review hrev8 (2026-12-07): a late signal's line (`term_words.no_end_checkpoint`,
computed once at the start from ``save_at_end`` and ``save_seconds``) says "save_at_end
is off: no checkpoint is written at the end" when ``save_steps`` makes the last step a
save step: that checkpoint IS written as the run ends (checkpoint-4 here), and a resume
finds nothing left to train. The words tell a user that the end's work is lost when it
is not.

The oracle: the checkpoint folder (checkpoint-4 listed). Failed before hfix8 decided the
words from the run's saves as the late signal is said (`term_words.end_checkpoint_words`:
``state.last_save_step == state.global_step``, or a save asked for)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "last_window_signal_save_steps.py"


def test_a_late_signal_does_not_deny_a_save_steps_checkpoint_of_the_end(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), str(out)], stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_until((tmp_path / "marker").exists, "the last step", UNTIL_TEST_TIMEOUT, procs=[proc])
        proc.send_signal(signal.SIGTERM)
        said = "SIGTERM received"
        wait_until(lambda: said in log.read_text(), said, UNTIL_TEST_TIMEOUT, procs=[proc])
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == -signal.SIGTERM, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "came after the last stop synchronisation" in text, text[-3000:]
    # (the end's checkpoint exists: the words must not deny it)
    assert [p.name for p in ckpt.list_checkpoints(out / "checkpoints")] == ["checkpoint-4"]
    assert "no checkpoint is written at the end" not in text, text[-3000:]
