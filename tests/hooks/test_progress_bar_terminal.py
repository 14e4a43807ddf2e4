"""The progress bar is drawn where standard error is a terminal, never into a file (a
user trial, htrial13: ``train.py > run.log 2>&1`` held one redraw of the bar per step,
each behind a carriage return: hundreds of lines in a pager). tqdm's own rule
(``disable=None``); Hugging Face's Trainer decides on the log level alone and draws
into a file. The whole example, redirected: tests/examples/test_example_navier_stokes_log.py.
"""

from __future__ import annotations

import fcntl
import os
import struct
import sys
import termios
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.progress import ProgressHook

pytestmark = pytest.mark.timeout(30)

STEPS = 200


def run_steps(hook: ProgressHook) -> None:
    """A run's bar events as the trainer fires them: start, STEPS steps, a log, end."""
    trainer = SimpleNamespace(is_main_process=True)
    state, control = TrainerState(max_steps=STEPS), TrainerControl()
    hook.on_train_start(trainer, state, control)
    for step in range(1, STEPS + 1):
        state.global_step = step
        hook.on_step_end(trainer, state, control)
        if hook._bar is not None:  # every step drawn, whatever tqdm's 0.1 s between draws
            hook._bar.refresh()
    logs = {"loss": 0.5, "samples_per_second": 10.0, "buffer_fill": 0.5}
    hook.on_log(trainer, state, control, logs)
    hook.close()


def terminal() -> tuple[int, int]:
    """A pseudo-terminal (its two ends' descriptors) of 24 rows and 80 columns: a new
    one has 0 columns, on which tqdm draws an empty bar."""
    main, secondary = os.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    return main, secondary


class Reader(threading.Thread):
    """Reads what the terminal `main` is sent, as it comes (a terminal's buffer holds a
    few KB: a bar drawn 200 times fills it, and its writer then waits for a reader),
    until the other end is closed (Linux: EIO once read out)."""

    def __init__(self, main: int) -> None:
        super().__init__(daemon=True)
        self.main, self.drawn = main, b""

    def run(self) -> None:
        while True:
            try:
                chunk = os.read(self.main, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.drawn += chunk


def drawn_on_a_terminal(monkeypatch: pytest.MonkeyPatch, hook: ProgressHook) -> bytes:
    """What `run_steps(hook)` sends to standard error when it is a terminal."""
    main, secondary = terminal()
    reader = Reader(main)
    reader.start()
    try:
        with os.fdopen(secondary, "w", closefd=True) as stderr:
            monkeypatch.setattr(sys, "stderr", stderr)
            run_steps(hook)
        reader.join(timeout=20)
        assert not reader.is_alive()
    finally:
        os.close(main)
    return reader.drawn


def test_no_bar_is_drawn_into_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "run.log"
    with log.open("w") as stderr:
        monkeypatch.setattr(sys, "stderr", stderr)
        hook = ProgressHook()
        run_steps(hook)
    written = log.read_bytes().decode()  # (read_text would make a carriage return a \n)
    assert "\r" not in written and "training" not in written, written[:300]
    # the log line is printed as with --disable_progress_bar
    assert capsys.readouterr().out.splitlines() == [
        f"step {STEPS} | loss 0.5 | samples/s 10 | buffer_fill 0.5"
    ]


def test_the_bar_is_drawn_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = drawn_on_a_terminal(monkeypatch, ProgressHook())
    assert b"training" in drawn and drawn.count(b"\r") > STEPS // 2, drawn[:300]


def test_disable_progress_bar_hides_it_on_a_terminal_too(monkeypatch: pytest.MonkeyPatch) -> None:
    assert drawn_on_a_terminal(monkeypatch, ProgressHook(disable_bar=True)) == b""
