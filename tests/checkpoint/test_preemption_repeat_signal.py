"""A trainer signalled twice, in a child process: a second SIGTERM during a slow save
exits at once, two SIGTERMs at once (Slurm's and the launcher's) are one clean
preemption.

The child is this file as a script (`python test_preemption_repeat_signal.py MODE
OUTPUT_DIR`: a trainer on an endless in-process source, see `child`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer
from waiting import wait_until

from melissa_trainer import Hook, TrainerControl, TrainerState
from melissa_trainer.common.checkpoint_names import list_checkpoints
from melissa_trainer.trainer import preemption

# -- end to end: this file as a script ---------------------------------------------------


class Marks(Hook):
    """Touches `ready` at step 3, `saving` at `on_save` (then sleeps if `slow_save`) and
    `train_end` at `on_train_end`, in `out`."""

    def __init__(self, out: Path, slow_save: bool) -> None:
        self.out, self.slow_save = out, slow_save

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == 3:
            (self.out / "ready").touch()

    def on_save(
        self, trainer: Any, state: TrainerState, control: TrainerControl, path: str
    ) -> None:
        (self.out / "saving").touch()
        if self.slow_save:
            time.sleep(600)

    def on_train_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        (self.out / "train_end").touch()


#: the slow-save child's repeat window (REPEAT_WINDOW, 1 s by default, is read when the
#: trainer makes its handler): the test waits past it before its second SIGTERM
SLOW_SAVE_REPEAT_WINDOW = 0.5


def child(mode: str, out: Path) -> None:
    """A trainer on an endless in-process source, a slow `on_save` for mode "slow_save"."""
    out.mkdir(parents=True, exist_ok=True)
    if mode == "slow_save":
        preemption.REPEAT_WINDOW = SLOW_SAVE_REPEAT_WINDOW
    hooks: list[Hook] = [Marks(out, slow_save=mode == "slow_save")]
    trainer = make_trainer(out, linear_samples(10**9), hooks, stop_sync_steps=1)
    trainer.train()


def start_child(mode: str, out: Path) -> subprocess.Popen[bytes]:
    # the repository (melissa_trainer) and tests/ (helpers: this file runs as a script)
    path = os.pathsep.join(str(Path(__file__).parents[i]) for i in (2, 1))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    return subprocess.Popen(
        [sys.executable, __file__, mode, str(out)],
        cwd=Path(__file__).parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def finish(proc: subprocess.Popen[bytes], timeout: float = 30) -> str:
    try:
        _, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err.decode(errors="replace")


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_second_sigterm_during_a_slow_save_exits_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = start_child("slow_save", out)
    try:
        wait_until(lambda: (out / "ready").exists() or proc.poll() is not None, "step 3", 60)
        proc.send_signal(signal.SIGTERM)
        wait_until(lambda: (out / "saving").exists() or proc.poll() is not None, "the save", 60)
        # past the repeat window: a second signal, not the same one
        time.sleep(2 * SLOW_SAVE_REPEAT_WINDOW)
        proc.send_signal(signal.SIGTERM)
        err = finish(proc)  # within 30 s, while the save hook would sleep for 600
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "again: exiting now" in err and not (out / "train_end").exists()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_sigterms_at_once_are_one_clean_preemption(tmp_path: Path) -> None:
    """What a rank gets under Slurm + accelerate launch: the signal from Slurm and the
    one the launcher forwards."""
    out = tmp_path / "out"
    proc = start_child("plain", out)
    try:
        wait_until(lambda: (out / "ready").exists() or proc.poll() is not None, "step 3", 60)
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        err = finish(proc, 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert "exiting now" not in err and "Traceback" not in err
    assert (out / "train_end").exists() and len(list_checkpoints(out / "checkpoints")) == 1


if __name__ == "__main__":
    child(sys.argv[1], Path(sys.argv[2]))
