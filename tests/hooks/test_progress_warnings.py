"""The progress bar and the library's warnings on one terminal (standard error)."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

SCRIPT = r"""
import logging, sys
import numpy as np
import torch
from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

class Warn(Hook):  # a library warning mid-run, as a slow start-up's or a killed solver's
    def on_step_end(self, trainer, state, control):
        if state.global_step == 3:
            logging.getLogger("melissa_trainer.study").warning("WARNED-MID-RUN")

rng = np.random.default_rng(0)
samples = [{"x": rng.normal(size=3).astype(np.float32), "y": np.zeros(1, np.float32)}
           for _ in range(64)]
model = torch.nn.Linear(3, 1)
args = TrainingArguments(output_dir=sys.argv[1], batch_size=8, buffer="fifo", buffer_size=64,
                         save_at_end=False, report_to="none", logging_steps=1000)
OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), 0.1), train_source=samples,
              process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])),
              hooks=[Warn()]).train()
logging.getLogger("melissa_trainer.study").warning("WARNED-AFTER")
"""


def on_a_terminal(command: list[str]) -> tuple[int, str]:
    """Run `command` with its standard error on a pseudo-terminal of 80 columns (the
    bar is drawn only on a terminal: tests/hooks/test_progress_bar_terminal.py): its
    exit status and what the terminal was sent."""
    main, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    sent: list[bytes] = []

    def read() -> None:  # as it comes: a terminal's buffer holds a few KB
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # (Linux: EIO once the other end is closed and read out)
                return
            if not chunk:
                return
            sent.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=secondary) as proc:
            os.close(secondary)  # (the child's copy alone: its exit ends the reading)
            code = proc.wait(timeout=100)
        reader.join(timeout=20)
    finally:
        os.close(main)
    return code, b"".join(sent).decode(errors="replace")


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_warning_during_training_is_written_on_a_line_of_its_own(tmp_path: Path) -> None:
    """With no logging configured (the examples, a user's first script), Python's last
    resort printed the warning right after the bar's text, on its line
    ("training: 3step [00:00, ...]WARNED-MID-RUN"); it now goes above the bar."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    code, stderr = on_a_terminal([sys.executable, str(script), str(tmp_path / "out")])
    assert code == 0, stderr
    assert "training:" in stderr, stderr  # the bar was drawn
    segments = re.split(r"[\r\n]", stderr)  # what a terminal shows, line by line
    warned = [s for s in segments if "WARNED-MID-RUN" in s]
    assert warned == ["WARNED-MID-RUN"], warned  # alone, not after the bar's text
    # once the bar is closed, the handler is gone: Python's own default prints it, once
    assert [s for s in segments if "WARNED-AFTER" in s] == ["WARNED-AFTER"]
