"""Run by tests/study/test_stop_kills_on_every_rank.py under ``accelerate launch
--multi_gpu --num_processes 2``: a study of N solvers (the test's SOLVER, argv[2]), each
sending its steps 0 and 1 (one to each rank) then blocked until killed, preempted while
they run; rank 1 reaches its own `Study.stop` only after rank 0 has killed them.

    python study_stop_ranks.py OUT SOLVER PIDS

The run, driven by hooks (every wait bounded, on files and the receivers' own figures):

1. Each rank writes OUT/ready_R once its receiver has read every solver's HELLO; rank 0,
   once both files exist, SIGKILLs simulation 0's solver: a solver dead on its own, mid-study.
2. Each rank's log handler writes OUT/warned_R at its warning of that close; each rank
   writes OUT/restarted_R once simulation 0's restart has sent its step there; rank 0,
   once all four exist, sends itself SIGTERM: a preemption, agreed by both ranks at one step.
3. Rank 1, in `on_preempted` (after the preemption's checkpoint, the last collective; before
   its `Study.stop`), waits until its receiver has counted the close of every solver (1 + N:
   rank 0's `Study.stop` kills them meanwhile, the restarted one slow to die). A user's
   hook that takes its time there (an upload of the checkpoint) does the same.

Each rank writes OUT/log_R.json: the receiver's lines at INFO and above, and whether
rank 1's wait ended in time; it exits once the other rank's is there.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch

from melissa_trainer import Hook, OnlineTrainer, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend

N = 3


class Lines(logging.Handler):
    """The receiver's lines; writes OUT/warned_R at its warning of simulation 0's close."""

    def __init__(self, warned: Path) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []
        self.warned = warned

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.lines.append((record.levelno, message))
        if record.levelno >= logging.WARNING and message.startswith("simulation 0 client"):
            self.warned.write_text("")


class Choreography(Hook):
    """Steps 1-3 of the module docstring, for this rank."""

    def __init__(self, out: Path, pids: Path, study: Study, rank: int) -> None:
        self.out, self.pids, self.study, self.rank = out, pids, study, rank
        self.killed = self.preempted = False
        self.both: set[str] = set()
        self.waited: str = "no preemption"

    def _mark(self, name: str) -> bool:
        """Write OUT/name_R; whether both ranks have (once true, no file is touched)."""
        if name in self.both:
            return True
        (self.out / f"{name}_{self.rank}").touch()
        if all((self.out / f"{name}_{r}").exists() for r in (0, 1)):
            self.both.add(name)
        return name in self.both

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        receiver = self.study.stream.receiver
        assert receiver is not None
        activity = receiver.activity()
        if len(activity) == N and self._mark("ready") and self.rank == 0 and not self.killed:
            (first,) = [p for p in self.pids.iterdir() if p.name.startswith("0.")]
            os.kill(int(first.suffix[1:]), signal.SIGKILL)
            self.killed = True
        if (
            activity.get(0, 0) >= 2
            and self._mark("restarted")
            and all((self.out / f"warned_{r}").exists() for r in (0, 1))
            and self.rank == 0
            and not self.preempted
        ):
            self.preempted = True
            os.kill(os.getpid(), signal.SIGTERM)

    def on_preempted(self, trainer: Any, state: Any, control: Any) -> None:
        receiver = self.study.stream.receiver
        if self.rank != 1 or receiver is None:
            return
        deadline = time.monotonic() + 90
        while receiver.telemetry()["connections_lost"] < 1 + N:
            if time.monotonic() > deadline:
                self.waited = f"timed out: {receiver.telemetry()['connections_lost']:.0f} closes"
                return
            time.sleep(0.05)
        self.waited = "every close counted"


def main() -> None:
    out, solver, pids = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    lines = Lines(out / f"warned_{rank}")
    receiver_log = logging.getLogger("melissa_trainer.stream.receiver")
    receiver_log.addHandler(lines)
    receiver_log.setLevel(logging.INFO)
    launcher = Launcher(
        [sys.executable, solver],
        [{"a": float(i)} for i in range(N)],
        N,
        job_limit=N,
        backend=LocalBackend(),
        env={"PID_DIR": str(pids)},
        # (no silence timeout: a solver blocked on purpose is not killed as hung, on a
        # machine busy enough to slow the choreography)
        tuning=LauncherTuning(
            poll_interval=0.05, kill_grace=2.0, max_restarts=3, simulation_timeout=None
        ),
    )
    study = Study(launcher, StreamSource())
    choreography = Choreography(out, pids, study, rank)
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(out / "run"),
            batch_size=1,
            buffer="reservoir",
            buffer_size=16,
            watermark=2,
            disable_progress_bar=True,
            report_to="none",
            stop_sync_steps=1,
            sample_to_insert_ratio=0,  # (draws as fast as training runs: steps go on)
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=study,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"][:1])),
        hooks=[choreography],
    )
    try:
        trainer.train()
    finally:
        record = {"lines": lines.lines, "waited": choreography.waited}
        (out / f"log_{rank}.json").write_text(json.dumps(record))
        # neither exits before the other has written its log: a rank's exit (Preempted,
        # 143) makes the launch SIGTERM the other, which may still be in train()
        other, deadline = out / f"log_{1 - rank}.json", time.monotonic() + 90
        while not other.exists() and time.monotonic() < deadline:
            time.sleep(0.05)


if __name__ == "__main__":
    main()
