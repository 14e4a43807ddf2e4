"""``kill -9`` of ``accelerate launch`` (2 ranks, gloo on CPU): every rank stops with a
checkpoint, and every line it prints names the cause, the launcher's death (with its
pid), not a SIGTERM that nobody sent (`melissa_trainer.trainer.preemption`: the cause
travels with the stop request through the ranks' agreement).

This file is also the ranks' script (run as ``__main__``): it trains a small model on
an endless paced stream, and once both ranks have trained a step each prints
``training RANK PID`` on stdout: the test waits for those lines (no sleep), kills the
launcher alone, then reads the launch's output to its end (EOF: every rank, which
inherited the launcher's pipes, has exited).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


def _launch(out: Path, *flags: str) -> subprocess.Popen[str]:
    """This file on two ranks, in a session of its own, stdout and stderr in one pipe."""
    sys.path.insert(0, str(HERE))
    from held_ports import held_port  # (here: this file is also the rank script)

    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(held_port()), str(Path(__file__)),
        "--output_dir", str(out), "--batch_size", "4", "--report_to", "none",
        "--disable_progress_bar", "--logging_steps", "1000", "--save_steps", "100000",
        "--stop_sync_steps", "2", *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.update({"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_ranks_whose_launcher_is_killed_say_so_and_stop_with_a_checkpoint(tmp_path: Path) -> None:
    """Both ranks print that the launcher (accelerate launch, its pid) is gone, at the
    step they stopped at, with the checkpoint of that step and how to resume; no line
    says SIGTERM (none was sent); the checkpoint is there and the same command resumes
    from it."""
    out = tmp_path / "out"
    launch = _launch(out, "--max_steps", "1000000")
    ranks: dict[int, int] = {}
    lines: list[str] = []
    try:
        assert launch.stdout is not None
        for line in launch.stdout:  # until both ranks train (pytest-timeout bounds it)
            lines.append(line)
            found = re.match(r"training (\d) (\d+)$", line.strip())
            if found:
                ranks[int(found[1])] = int(found[2])
                if len(ranks) == 2:
                    break
        assert len(ranks) == 2, "".join(lines[-80:])
        os.kill(launch.pid, signal.SIGKILL)  # the launcher alone: its ranks live on
        launch.wait(30)
        lines += launch.stdout.readlines()  # to EOF: every rank (holding the pipe) exited
    finally:
        _kill([launch.pid, *ranks.values()])
        launch.wait(30)
        if launch.stdout is not None:
            launch.stdout.close()
    text = "".join(lines)
    pid = launch.pid
    said = re.findall(
        rf"the launcher \(accelerate launch, pid {pid}\) is gone: rank (\d) stopped at step "
        r"(\d+), as every rank; (?:writing a checkpoint|its checkpoint is written)",
        text,
    )
    assert sorted(r for r, _ in said) == ["0", "1"], text[-4000:]
    step = int(said[0][1])
    assert {int(s) for _, s in said} == {step}, said
    checkpoint = out / "checkpoints" / f"checkpoint-{step}"
    final = (
        f"stopped at step {step} because the launcher (accelerate launch, pid {pid}) is gone; "
        f"checkpoint {checkpoint}; resume with the same command and "
    )
    assert final in text, text[-4000:]
    assert "SIGTERM" not in text, text[-4000:]  # nobody sent one
    assert (checkpoint / "trainer_state.json").is_file(), sorted(out.rglob("*"))

    resumed = _launch(out, "--max_steps", str(step + 2), "--resume_from_checkpoint", "latest")
    try:
        rest, _ = resumed.communicate(timeout=180)
    finally:
        _kill([resumed.pid])
        resumed.wait(30)
    assert resumed.returncode == 0, rest[-4000:]
    assert f"step {step} | resumed from {checkpoint}" in rest, rest[-4000:]


# -- the ranks' script --------------------------------------------------------------------


def endless(rank: int, world: int) -> Iterator[dict[str, Any]]:
    """An endless stream, paced (a simulation's rate: the ranks stay near step 0)."""
    sys.path.insert(0, str(HERE.parent))
    from helpers import linear_samples

    while True:
        for sample in linear_samples(64, seed=rank):
            time.sleep(0.002)
            yield sample


def main() -> None:
    import torch

    sys.path.insert(0, str(HERE.parent))
    from helpers import small_model, xy

    from melissa_trainer import ArgumentParser, Hook, OnlineTrainer, TrainingArguments

    class SayTraining(Hook):
        """Prints ``training RANK PID`` once, at the first step's end (both ranks then
        run the loop: the launcher's death is watched)."""

        def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
            if state.global_step == 1:  # one write: the two ranks share the pipe, and an
                # unbuffered print writes word by word (the ranks' words interleaved)
                os.write(1, f"training {trainer.process_index} {os.getpid()}\n".encode())

    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    source: Callable[[int, int], Iterator[dict[str, Any]]] = endless
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=source,
        process_sample=xy,
        hooks=[SayTraining()],
    )
    trainer.train()


if __name__ == "__main__":
    main()
