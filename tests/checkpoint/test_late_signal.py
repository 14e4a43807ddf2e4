"""A SIGTERM after the run's last line (its end hooks, `train()` not yet returned) is
said in one line, then ends the process as the signal asks (128 + 15, as a SIGTERM after
`train()` returned does, and as under torchrun or Hugging Face's Trainer, which catch
none): `PreemptionHandler.deliver_late`.

Before, it was swallowed: the rank said "SIGTERM received: stopping at the next stop
synchronisation to write a checkpoint" (none came: the loop was over), the script ran
on ("script end") and exited 0, a scheduler's time limit or ``scancel`` read as a
success."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import UNTIL_TEST_TIMEOUT, wait_until

from melissa_trainer.checkpoint import paths as ckpt

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "late_signal.py"
LAST_WINDOW = SCRIPT.parent / "last_window_signal.py"


def signalled_while_held(tmp_path: Path, script: Path, said: str, *args: str) -> str:
    """Run `script` (OUTPUT_DIR ``tmp_path/out``, then `args`) until its hook holds at
    ``tmp_path/marker``; SIGTERM it, wait until its log says `said`, release the hold
    (``tmp_path/go``); its log, once it exited by the SIGTERM (-15)."""
    log = tmp_path / "log"
    with open(log, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path / "out"), *args],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until((tmp_path / "marker").exists, "the hold", UNTIL_TEST_TIMEOUT, procs=[proc])
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: said in log.read_text(), said, UNTIL_TEST_TIMEOUT, procs=[proc])
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == -signal.SIGTERM, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return log.read_text()


def test_a_sigterm_after_the_last_line_is_said_and_ends_the_process(tmp_path: Path) -> None:
    out = tmp_path / "out"
    said = "SIGTERM received after the end of training"
    text = signalled_while_held(tmp_path, SCRIPT, said)
    assert "end of training (max_steps 4 reached)" in text
    assert "no step is left to stop at, the run ends as without it" in text
    assert "(exit status 143)" in text
    assert "save_at_end is off" not in text  # (its end's checkpoint comes: below)
    # (the signal came in on_train_end: the end's saves decided, said in its line)
    on_disk = out / "checkpoints" / "checkpoint-4"
    assert f"as train() returns; a checkpoint of the end is on disk: {on_disk}" in text
    assert "stopping at the next stop synchronisation" not in text
    assert "script end" not in text, text[-2000:]
    # the run's results are complete: its end's checkpoint, the lock given back
    assert [p.name for p in ckpt.list_checkpoints(out / "checkpoints")][-1] == "checkpoint-4"
    assert '"state": "ended"' in (out / "trainer.lock").read_text()


def test_a_sigterm_in_the_last_window_is_not_swallowed(tmp_path: Path) -> None:
    """A SIGTERM after the last stop synchronisation, before the loop ends (max_steps
    reached in the same window): no synchronisation is left to agree on it. Before, it
    was taken for a stop to come ("stopping at the next stop synchronisation to write a
    checkpoint"), none came (``save_at_end`` off: no checkpoint at all), and the script
    ran on to exit 0; now it is a late signal, said so, and ends the process (143). Its
    line says that no end checkpoint comes (it did not, 2026-12-07: "the run ends as
    without it" alone, where the run without it wrote none)."""
    out = tmp_path / "out"
    text = signalled_while_held(tmp_path, LAST_WINDOW, "SIGTERM received")
    assert "end of training (max_steps 4 reached)" in text
    assert "came after the last stop synchronisation: no step is left to stop at" in text
    assert "(exit status 143)" in text
    # (save_at_end off, save_seconds 600 s by default: a run this short writes none; said
    # once decided, after the end's saves, in a line of its own: `late_end`)
    assert "as train() returns; where the end's checkpoint stands is said once" in text
    assert (
        "SIGTERM (said above): save_at_end is off: no checkpoint is written at the end (a "
        "resume starts from the last one written before, or afresh)"
    ) in text, text[-3000:]
    assert "script end" not in text, text[-2000:]
    assert ckpt.list_checkpoints(out / "checkpoints") == []  # (save_at_end off: none)


def test_a_late_signal_does_not_deny_a_save_steps_checkpoint_of_the_end(tmp_path: Path) -> None:
    """Review hrev8 (2026-12-07): the late signal's words, computed once at the start
    from ``save_at_end`` and ``save_seconds``, said "save_at_end is off: no checkpoint is
    written at the end" when ``save_steps`` made the last step a save step: that
    checkpoint IS written as the run ends (checkpoint-4), and a resume finds nothing
    left to train. The oracle: the checkpoint folder. Failed before hfix8 decided the
    words as the signal is said (`term_words.end_checkpoint_words`:
    ``state.last_save_step == state.global_step``, or a save asked for)."""
    out = tmp_path / "out"
    text = signalled_while_held(tmp_path, LAST_WINDOW, "SIGTERM received", "4")
    assert "came after the last stop synchronisation" in text, text[-3000:]
    assert [p.name for p in ckpt.list_checkpoints(out / "checkpoints")] == ["checkpoint-4"]
    assert "no checkpoint is written at the end" not in text, text[-3000:]
    on_disk = out / "checkpoints" / "checkpoint-4"
    assert f"SIGTERM (said above): a checkpoint of the end is on disk: {on_disk}" in text
