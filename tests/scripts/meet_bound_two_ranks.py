"""Run by tests/trainer/test_meet_bound_agreed.py under ``accelerate launch --multi_gpu
--num_processes 2`` (gloo on CPU): the ranks' last meeting when their sources' stop
bounds differ (`Source.stop_bound`: a study's `kill_grace`, which each rank's script
may set apart, or another source on another rank).

    python meet_bound_two_ranks.py OUT MODE

Each rank trains on its own samples (batch size 1, an agreement every step). Rank 0's
source says it may take `SLOW_STOP` s to stop, and does (its `stop` sleeps that long, as
a study killing simulations that ignore SIGTERM waits out its grace); rank 1's says 0.
The meeting's own bound is made `MEET` s (`exit_meeting.MEET_TIMEOUT`, 120 s in a real
run) and its barrier the one used off gloo (`PolledMeeting`: polled until the bound on
every rank; gloo's monitored barrier bounds rank 0's wait only).

MODE ``preempt``: rank 0 sends itself SIGTERM once it has trained 2 steps; every rank
stops with a checkpoint and meets the others. MODE ``short_group``: the process group's
timeout is made `SHORT_GROUP` s (``InitProcessGroupKwargs``), less than the meeting's
bound: training is refused at its start. MODE ``raising``: as ``preempt``, but rank 1's
`stop_bound` raises (a user's override).

Each rank writes ``OUT/../exit-<rank>.json``: how its `train()` ended (the exception's
class and message, or "returned") and the step it stopped at; its last `atexit`
handler writes ``OUT/../gone-<rank>`` (its exit was its own, not a signal's).
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from accelerate.utils import InitProcessGroupKwargs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import linear_samples, small_model, xy  # noqa: E402

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments  # noqa: E402
from melissa_trainer.trainer import exit_meeting  # noqa: E402

#: the meeting's own bound here (`exit_meeting.MEET_TIMEOUT`, 120 s in a real run):
#: less than `SLOW_STOP`, more than rank 0's end takes beyond it (its checkpoint, lines)
MEET = 10.0
#: seconds rank 0's source takes to stop, and says it may (its `stop_bound`)
SLOW_STOP = 15.0
#: the process group's timeout in MODE short_group: below `MEET` + `SLOW_STOP`
SHORT_GROUP = 5.0


class PolledMeeting:
    """`torch.distributed` as `exit_meeting` sees it off gloo (a barrier polled until the
    meeting's bound, on every rank)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(dist, name)

    def get_backend(self, group: Any = None) -> str:
        return "nccl"


class SelfPreempt(Hook):
    """Rank 0 sends itself SIGTERM once 2 steps are trained (the stop comes at the next
    agreement, on every rank)."""

    def __init__(self, rank: int) -> None:
        self.rank, self.sent = rank, False

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        if self.rank == 0 and state.global_step >= 2 and not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def main() -> None:
    out, mode = Path(sys.argv[1]), sys.argv[2]
    here, rank = out.parent, int(os.environ["RANK"])
    exit_meeting.MEET_TIMEOUT = MEET
    exit_meeting.dist = PolledMeeting()  # type: ignore[assignment]
    torch.set_num_threads(1)
    # (registered first, run last: after the process group's teardown)
    atexit.register(lambda: (here / f"gone-{rank}").write_text(""))
    args = TrainingArguments(
        output_dir=str(out), batch_size=1, buffer="fifo", buffer_size=20, watermark=1,
        stop_sync_steps=1, logging_steps=100, disable_progress_bar=True, report_to="none",
    )  # fmt: skip
    handlers = []
    if mode == "short_group":
        handlers = [InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=SHORT_GROUP))]
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=1e-3),
        train_source=lambda r, w: linear_samples(10**6, seed=r),
        process_sample=xy,
        kwargs_handlers=handlers,
    )
    source = trainer.source
    stop = source.stop

    slept: list[bool] = []

    def slow_stop() -> None:  # (the trainer may stop it more than once: slow the first)
        stop()
        if not slept:
            slept.append(True)
            time.sleep(SLOW_STOP)

    def own_bound() -> float:
        if mode == "raising" and rank == 1:
            raise KeyError("kill_grace")
        return SLOW_STOP if rank == 0 else 0.0

    if rank == 0:
        source.stop = slow_stop  # type: ignore[method-assign]
    source.stop_bound = own_bound  # type: ignore[method-assign]
    trainer.hooks.add(SelfPreempt(rank))
    ended = "returned"
    try:
        trainer.train()
    except BaseException as exc:
        ended = f"{type(exc).__name__}: {exc}"
        raise
    finally:
        record = {"ended": ended, "steps": trainer.state.global_step}
        (here / f"exit-{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
