"""``kill -9`` of ``accelerate launch`` (2 ranks, gloo on CPU) while the ranks start,
before `train()`: both ranks exit within seconds, each saying that the launcher is gone
before training started (`melissa_trainer.trainer.launcher_watch`), and the same command
in the same output directory runs afterwards. Before that watch, a user trial's ranks
lived on for minutes, retrying the dead launcher's rendezvous store.

This file is also the ranks' script (run as ``__main__``). ``HOLD`` in the environment
says where they stop, provably before `train()`, writing ``held RANK PID`` (one write)
there: "import": both before importing the trainer (whose import arms the watch) until
the launcher is gone, then on (into the rendezvous, whose store died with it);
"rendezvous": rank 1 before making its trainer, forever, rank 0 just before
making its own (whose ``Accelerator()`` then waits on rank 1 in the rendezvous, and
after the launcher's death retries its store); "built": both after making their trainer
(the group formed, the output directory locked), forever; "": no hold, a short run.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]


def _launch(out: Path, hold: str, *flags: str) -> subprocess.Popen[str]:
    """This file on two ranks, in a session of its own, stdout and stderr in one pipe."""
    sys.path.insert(0, str(HERE))
    from held_ports import held_port  # (here: this file is also the rank script)

    cmd = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
        "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--main_process_port", str(held_port()), str(Path(__file__)),
        "--output_dir", str(out), "--batch_size", "4", "--report_to", "none",
        "--disable_progress_bar", "--stop_sync_steps", "2", *flags,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "HOLD": hold}
    env.update({"CUDA_VISIBLE_DEVICES": "", "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )


def _gone(pid: int) -> bool:
    """No such process, or a zombie (exited; init has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("hold", ["import", "rendezvous", "built"])
def test_ranks_whose_launcher_dies_before_training_exit_and_say_so(
    tmp_path: Path, hold: str
) -> None:
    sys.path.insert(0, str(HERE.parent))
    from waiting import wait_until

    out = tmp_path / "out"
    launch = _launch(out, hold, "--max_steps", "1000000")
    assert launch.stdout is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(launch.stdout or ()), daemon=True)
    reader.start()  # (to EOF: every rank, which inherited the launcher's pipe, has exited)

    def held() -> dict[int, int]:
        found = (re.match(r"held (\d) (\d+)$", line.strip()) for line in list(lines))
        return {int(m[1]): int(m[2]) for m in found if m}

    ranks: dict[int, int] = {}
    try:
        wait_until(lambda: len(held()) == 2, lambda: "".join(lines[-60:]), 240, procs=[launch])
        ranks = held()
        os.kill(launch.pid, signal.SIGKILL)  # the launcher alone: its ranks live on
        launch.wait(30)
        # (the watch looks once a second; before it, the ranks lived on for minutes)
        wait_until(lambda: all(map(_gone, ranks.values())), lambda: "".join(lines), 30)
        reader.join(30)
    finally:
        _kill([launch.pid, *ranks.values()])
        launch.wait(30)
        reader.join(30)
        launch.stdout.close()
    text = "".join(lines)
    if "subreaper" in text:  # (the orphaned ranks' new parent is not init)
        pytest.skip("a subreaper adopts orphans here: a launcher gone before the watch is unseen")
    # (a launcher dead before the watch was armed is known by no pid)
    launcher = "" if hold == "import" else rf" \(accelerate launch, pid {launch.pid}\)"
    said = re.findall(
        rf"the launcher{launcher} is gone before training started: rank (\d) exits; "
        r"nothing to checkpoint",
        text,
    )
    assert sorted(said) == ["0", "1"], text[-4000:]
    assert "Traceback" not in text, text[-4000:]
    if hold != "built":
        return
    # the output directory's lock went with rank 0: the same command runs there
    again = _launch(out, "", "--max_steps", "2")
    try:
        rest, _ = again.communicate(timeout=200)
    finally:
        _kill([again.pid])
        again.wait(30)
    assert again.returncode == 0, rest[-4000:]


# -- the ranks' script --------------------------------------------------------------------


def endless(rank: int, world: int) -> Iterator[dict[str, Any]]:
    """An endless stream (the run with no hold stops at its max_steps)."""
    sys.path.insert(0, str(HERE.parent))
    from helpers import linear_samples

    while True:
        yield from linear_samples(64, seed=rank)


def wait_for_the_launcher_s_death(rank: int) -> None:
    """Say ``held RANK PID``, wait until the parent (the launcher) is gone, or 200 s."""
    launcher = os.getppid()
    os.write(1, f"held {rank} {os.getpid()}\n".encode())
    deadline = time.monotonic() + 200
    while os.getppid() == launcher and time.monotonic() < deadline:
        time.sleep(0.01)
    if os.getppid() != 1:  # (adopted by a subreaper: `launcher_watch.orphaned` says no)
        os.write(1, f"subreaper {rank}\n".encode())
        sys.exit(0)


def main() -> None:
    if os.environ["HOLD"] == "import":  # (before the trainer's import, which arms the watch)
        wait_for_the_launcher_s_death(int(os.environ["RANK"]))
    import torch

    sys.path.insert(0, str(HERE.parent))
    from helpers import small_model, xy

    from melissa_trainer import ArgumentParser, OnlineTrainer, TrainingArguments

    hold, rank = os.environ["HOLD"], int(os.environ["RANK"])

    def say_held(forever: bool) -> None:
        os.write(1, f"held {rank} {os.getpid()}\n".encode())  # (one write: a shared pipe)
        if forever:  # (until the launcher's watch ends this process)
            threading.Event().wait()

    (args,) = ArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    torch.set_num_threads(1)
    model = small_model(0)
    if hold == "rendezvous":
        say_held(forever=rank == 1)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=endless,
        process_sample=xy,
    )
    if hold == "built":
        say_held(forever=True)
    trainer.train()


if __name__ == "__main__":
    main()
