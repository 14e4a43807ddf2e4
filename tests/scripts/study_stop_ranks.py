"""Run by tests/study/test_stop_kills_on_every_rank.py under ``accelerate launch
--multi_gpu --num_processes 2``: a study of N solvers (the test's SOLVER, argv[2]), each
sending its steps 0 and 1 (one to each rank) then blocked until killed, preempted while
they run; rank 1 reaches its own `Study.stop` only after rank 0 has killed them.

    python study_stop_ranks.py OUT SOLVER PIDS

The run, driven by hooks that block on each rank's own receiver (every wait bounded by
`WAIT`, its failure naming what was not seen, on which rank) and agree between the ranks
by collectives (gloo), not by files polled at each step; training takes no step while a
hook waits, so nothing it waits for competes with a spinning loop:

1. At the first step, each rank waits until its receiver has counted DATA of every
   solver (its one step there: not only its HELLO), the ranks agree, and rank 0 SIGKILLs
   simulation 0's solver: a solver dead on its own, mid-study.
2. Each rank waits for its warning of that close and for a step of simulation 0's
   restart (its second DATA there: the restart skips the step the rank holds, HELD,
   and sends one the first run lacked); the ranks agree, and rank 0 sends itself
   SIGTERM: a preemption, agreed by both ranks at the next stop synchronisation.
3. Rank 1, in `on_preempted` (after the preemption's checkpoint; before its `Study.stop`,
   with no collective between: rank 0 goes on to its own), waits until its receiver has
   counted the close of every solver (1 + N: rank 0's `Study.stop` kills them meanwhile,
   the restarted one slow to die). A user's hook that takes its time there (an upload of
   the checkpoint) does the same.

Why DATA, not HELLO, in 1: a solver's step 1 leaves in its client's batch, up to
``batch_delay`` after its HELLO (the flusher thread: later on a loaded machine). Killed
in between, rank 1 never had the first attempt's step, counted one message of simulation
0 after the restart, never two, and the run spun until its bound (a loaded CI run; it
recurs under load). The test's solver holds simulation 0's step 1 for 1 s: that window
is open in every run.

Each rank writes OUT/log_R.json in `on_train_end`, after its `Study.stop` (its receiver's
last line is in): the receiver's lines at INFO and above, whether rank 1's wait ended in
time, the seconds each wait took, and how many steps the restart was told this rank
held (read at 2: told before the restart sent anything). Then the ranks meet at a
barrier: neither exits (Preempted, 143: the launch then SIGTERMs the other) before the
other's log is written.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from melissa_trainer import Hook, OnlineTrainer, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend
from melissa_trainer.stream.receiver import Receiver

N = 3
#: seconds each wait may take: a solver's start-up (or restart) on a loaded machine
WAIT = 90.0
#: the warning of simulation 0's SIGKILL (the test asserts it is the only one)
KILL_WARNING = "simulation 0 client rank 0: its connection closed before its BYE"


class Lines(logging.Handler):
    """The receiver's lines (INFO and above); `warned` is set at its warning of
    simulation 0's close (emitted by whichever thread ingests)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[int, str]] = []
        self.warned = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        self.lines.append((record.levelno, message))
        if record.levelno >= logging.WARNING and message.startswith(KILL_WARNING):
            self.warned.set()


def wait_until(
    done: Callable[[], bool], what: Callable[[], str], event: threading.Event | None = None
) -> tuple[str | None, float]:
    """Block until `event` is set (if any), then until `done()`, at most `WAIT` s in all;
    (None, or what was missing (`what()`), the seconds waited).

    A local wait on this rank's receiver, whose own thread ingests meanwhile (no pump
    comes while this blocks training: it takes over). No event tells a counter's change,
    so `done` is read every 10 ms, by a sleeping thread."""
    start = time.monotonic()
    if event is not None and not event.wait(WAIT):
        return what(), time.monotonic() - start
    while not done():
        if time.monotonic() - start > WAIT:
            return what(), time.monotonic() - start
        time.sleep(0.01)
    return None, time.monotonic() - start


def agree(missing: str | None, phase: str) -> None:
    """Every rank's outcome of `phase` (a collective); AssertionError on every rank if
    any rank missed something, naming the rank and what it missed."""
    said: list[str | None] = [None, None]
    dist.all_gather_object(said, missing)
    failed = [f"rank {r}: {m}" for r, m in enumerate(said) if m is not None]
    if failed:
        raise AssertionError(f"{phase}: not within {WAIT:.0f} s on {'; '.join(failed)}")


class Choreography(Hook):
    """Steps 1-3 of the module docstring, for this rank."""

    def __init__(self, out: Path, pids: Path, study: Study, rank: int, lines: Lines) -> None:
        self.out, self.pids, self.study, self.rank, self.lines = out, pids, study, rank, lines
        self.done = False
        self.waited: str = "no preemption"
        self.waits: dict[str, float] = {}  # seconds each wait took (OUT/log_R.json)
        self.rerun_held = -1  # steps simulation 0's restart was told held here (at 2)

    def _receiver(self) -> Receiver:
        receiver = self.study.stream.receiver
        assert receiver is not None
        return receiver

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if self.done:  # (the steps that reach the preemption's stop synchronisation)
            return
        self.done = True
        receiver = self._receiver()

        def counted(sid: int) -> int:
            return receiver.activity().get(sid, 0)

        # 1. every solver's step here (its HELLO alone is not enough: module docstring)
        missing, self.waits["first steps"] = wait_until(
            lambda: all(counted(s) >= 1 for s in range(N)),
            lambda: f"DATA of every solver (DATA messages by simulation: {receiver.activity()})",
        )
        agree(missing, "every solver's first step")
        if self.rank == 0:
            # (written by the solver before its client opens: there once its DATA is)
            (first,) = [p for p in self.pids.iterdir() if p.name.startswith("0.")]
            os.kill(int(first.suffix[1:]), signal.SIGKILL)
        # 2. the warning of that close, and the restart's step (its second DATA here)
        missing, self.waits["warning and restart"] = wait_until(
            lambda: counted(0) >= 2,
            lambda: (
                f"the warning of simulation 0's close (warned: {self.lines.warned.is_set()}) "
                f"and its restart's step (DATA messages of simulation 0: {counted(0)}, "
                f"2 awaited)"
            ),
            self.lines.warned,
        )
        agree(missing, "the kill's warning and the restart's step")
        # (the HELD answer's count, set before the restart sent: its DATA came after)
        self.rerun_held = receiver.ingest.rerun_held.get(0, 0)
        if self.rank == 0:
            os.kill(os.getpid(), signal.SIGTERM)

    def on_preempted(self, trainer: Any, state: Any, control: Any) -> None:
        # 3. rank 1 reads rank 0's kills before its own `Study.stop`
        if self.rank != 1:
            return
        receiver = self._receiver()
        missing, self.waits["closes"] = wait_until(
            lambda: receiver.telemetry()["connections_lost"] >= 1 + N,
            lambda: f"timed out: {receiver.telemetry()['connections_lost']:.0f} closes",
        )
        self.waited = missing or "every close counted"

    def on_train_end(self, trainer: Any, state: Any, control: Any) -> None:
        write_log(self.out, self.rank, self.lines, self)
        # neither rank leaves train() (Preempted: its exit makes the launch SIGTERM the
        # other) before the other's log is written; gloo's barrier is the bounded one (it
        # outlasts rank 1's wait in `on_preempted`, and rank 0's kills in its stop)
        dist.monitored_barrier(timeout=timedelta(seconds=2 * WAIT))


def write_log(out: Path, rank: int, lines: Lines, choreography: Choreography) -> None:
    """OUT/log_R.json, whole or not at all (a rank SIGTERMed while it writes)."""
    record = {
        "lines": lines.lines,
        "waited": choreography.waited,
        "waits": choreography.waits,
        "rerun_held": choreography.rerun_held,
    }
    part = out / f"log_{rank}.json.part"
    part.write_text(json.dumps(record))
    part.replace(out / f"log_{rank}.json")


def main() -> None:
    out, solver, pids = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    lines = Lines()
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
    choreography = Choreography(out, pids, study, rank, lines)
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
            # (draws without waiting for new samples: the steps after the choreography's
            # reach the preemption's stop synchronisation; the hook blocks until then)
            sample_to_insert_ratio=0,
        ),
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=study,
        process_sample=lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["x"][:1])),
        hooks=[choreography],
    )
    try:
        trainer.train()
    finally:
        if not (out / f"log_{rank}.json").exists():  # (train() failed before its end)
            write_log(out, rank, lines, choreography)


if __name__ == "__main__":
    main()
