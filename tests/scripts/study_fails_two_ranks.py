"""Run by tests/study/test_failed_study_checkpoint_ranks.py under ``accelerate launch
--multi_gpu --num_processes 2`` (gloo on CPU): a study that fails on rank 0 after some
training, then its resume from the checkpoint written at the failure
(`trainer.source_failure`: every rank agrees on the failure and saves together).

Three simulations (as tests/study/test_failed_study_checkpoint.py's, one process):
simulation 0 sends 24 time steps (time step t to rank t % 2: 12 each) and exits 0;
simulation 1 waits until rank 0 has trained 2 steps (FLAG), then exits 1: with no
restart and ``on_failure="raise"`` the study fails, on rank 0 (its launcher), which
waits in that step's end until its launcher knows (so that the failure comes while
data is left); simulation 2 sleeps until the study's stop kills it, and in a resumed
run (RESUMED 1) exits 1 once rank 0 has trained 3 steps more (FLAG2): the resumed study
fails again, as the failure's line says. Batch size 1, a FIFO, an agreement every
step: at the failure, samples of simulation 0 wait in the buffers and in the batches
taken ahead (pending), which the checkpoint holds and the resume trains.

    python study_fails_two_ranks.py OUT SOLVER RESUMED [SLOW_RANK]

RESUMED 2: no failure, a preemption: simulation 1 sleeps as simulation 2 does, and rank
0 sends itself SIGTERM once it has trained 2 steps (every rank stops with a checkpoint
and exits 143).

With SLOW_RANK, that rank's source takes 3 s more to stop than the other's (its end
is slower: the launcher's SIGTERM as the other exits first would reach it still working,
tests/study/test_failed_study_slow_rank.py); each rank's last `atexit` writes
``OUT/../gone-<rank>`` (its exit was its own, not a signal's). SLOW_RANK ``grace``: no
rank is made slow, but simulations 1 and 2 ignore SIGTERM, so that rank 0's stop lasts
the study's `kill_grace` (2 s), and the ranks' last meeting is given 0.5 s of its own
(`exit_meeting.MEET_TIMEOUT`, 120 s in a real run): a grace longer than that bound.

Each rank writes ``OUT/../exit-<rank>.json``: how its `train()` ended (the exception's
class or "returned"), the step it stopped at, its last save's step, the step it started
from, and the (simulation, time step) of each sample it trained on (padded copies left
out); every launch appends the simulation's id to ``OUT/../launches``.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rank_study import recording_end

from melissa_trainer import (
    Hook,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.trainer import exit_meeting

SOLVER = r"""
import os, sys, time
from pathlib import Path
import numpy as np
from melissa_trainer.client import Client, ClientTuning

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
if sid in (1, 2) and os.environ.get("IGNORE_TERM"):
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.environ["LAUNCHES"], "a") as f:
    f.write(f"{sid}\n")
if sid == 1 and os.environ.get("RESUMED") != "2":
    while not Path(os.environ["FLAG"]).exists():
        time.sleep(0.05)
    sys.exit(1)
if sid in (1, 2):
    if os.environ.get("RESUMED") == "1":
        while not Path(os.environ["FLAG2"]).exists():
            time.sleep(0.05)
        sys.exit(1)
    time.sleep(3600)
with Client({"x": ((2,), "f4")}, tuning=ClientTuning(batch_bytes=0)) as c:
    for t in range(24):  # (time step t goes to rank (0 + t) % 2)
        c.send(t, x=np.array([c.parameters["a"], float(t)], np.float32))
"""


def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample's ``x = (a, t)`` as (input a, target t)."""
    return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])


class Trained(Hook):
    """Notes the step training started from and the (simulation, time step) of each
    sample trained on (not a pad's copy). On rank 0: in a first run, writes `flag` once
    2 steps are trained and waits there until its launcher has failed; in a resumed one,
    writes `flag2` once 3 steps more are trained."""

    def __init__(self, here: Path, rank: int, resumed: bool, preempt: bool = False) -> None:
        self.flag = here / ("flag2" if resumed else "flag")
        self.rank, self.resumed, self.preempt = rank, resumed, preempt
        self.pairs: list[tuple[int, int]] = []
        self.started: int | None = None

    def on_train_start(self, trainer: Any, state: Any, control: Any) -> None:
        self.started = state.global_step

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        dataset = trainer.dataset
        if not dataset.last_padded:
            for s in dataset.last_samples:
                self.pairs.append((int(s["simulation_id"]), int(s["time_step"])))
        assert self.started is not None
        if self.rank != 0 or self.flag.exists():
            return
        if state.global_step >= self.started + (3 if self.resumed else 2):
            self.flag.write_text("")
            if self.preempt:  # (the handler notes it at once; the stop comes at an agreement)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            deadline = time.monotonic() + 120
            while not self.resumed and not trainer.source.launcher.failed:
                assert time.monotonic() < deadline, "simulation 1's failure was not seen"
                time.sleep(0.02)


class PolledMeeting:
    """`torch.distributed` as `exit_meeting` sees it off gloo (NCCL: a barrier polled
    until the meeting's bound, on every rank), on gloo: its monitored barrier bounds rank
    0's wait only (the others wait for rank 0's answer as long as the process group's
    timeout), so a rank 0 late at the meeting is waited for there whatever the bound."""

    def __getattr__(self, name: str) -> Any:
        return getattr(dist, name)

    def get_backend(self, group: Any = None) -> str:
        return "nccl"


def main() -> None:
    out, solver, resumed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    preempt = sys.argv[3] == "2"
    grace = len(sys.argv) > 4 and sys.argv[4] == "grace"
    slow = int(sys.argv[4]) if len(sys.argv) > 4 and not grace else None
    if grace:  # (the meeting's own bound below the grace: 120 s > 5 s in a real run)
        exit_meeting.MEET_TIMEOUT = 0.5
        exit_meeting.meet.__defaults__ = (0.5, None)  # (and a caller that passes none)
        exit_meeting.dist = PolledMeeting()  # type: ignore[assignment]
    torch.set_num_threads(1)
    here = Path(out).parent
    # (registered first, run last: after the process group's teardown)
    atexit.register(lambda: (here / f"gone-{trainer.process_index}").write_text(""))
    env = {"FLAG": str(here / "flag"), "FLAG2": str(here / "flag2")}
    env["LAUNCHES"] = str(here / "launches")
    launcher = Launcher(
        [sys.executable, solver],
        [{"a": 0.1}, {"a": 0.7}, {"a": 0.2}],
        3,
        job_limit=3,
        backend=LocalBackend(),
        env={**env, "RESUMED": sys.argv[3], **({"IGNORE_TERM": "1"} if grace else {})},
        tuning=LauncherTuning(
            poll_interval=0.05, kill_grace=2.0, max_restarts=0, on_failure="raise"
        ),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(1, 1)
    args = TrainingArguments(
        output_dir=out, batch_size=1, buffer="fifo", buffer_size=20, watermark=1,
        stop_sync_steps=1, logging_steps=100, disable_progress_bar=True, report_to="none",
        resume_from_checkpoint="latest" if resumed else None,
    )  # fmt: skip
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=process,
    )
    rank = trainer.process_index
    if rank == slow:
        stop = trainer.source.stop

        def slow_stop() -> None:
            time.sleep(3)
            stop()

        trainer.source.stop = slow_stop  # type: ignore[method-assign]
    trained = Trained(here, rank, resumed, preempt)
    trainer.hooks.add(trained)

    def write(ended: str) -> None:
        record = {
            "ended": ended,
            "steps": trainer.state.global_step,
            "last_save_step": trainer.state.last_save_step,
            "started": trained.started,
            "trained": trained.pairs,
        }
        (here / f"exit-{rank}.json").write_text(json.dumps(record))

    with recording_end(write):
        trainer.train()


if __name__ == "__main__":
    main()
