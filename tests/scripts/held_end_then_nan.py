"""Run by tests/study/test_end_notice_then_failure.py under ``accelerate launch
--multi_gpu --num_processes 2`` (gloo on CPU): a study that fails after rank 0's held
end-of-study notice went out (the reviewer's scenario of `study.end_notice`).

Two simulations; simulation s sends 12 time steps to rank 0 and 4 to rank 1 (step t
goes to rank (s + t) % 2, the client's round robin), one message each; simulation 1's
last step, to rank 0, is NaN. Each rank's buffer is a FIFO of 2, batch size 1, an
agreement every step. Rank 0's training thread waits, in its first `on_step_end`, until
its study-end thread has sent the STUDY_END (`StudyEndNotice.told`; an event): meanwhile
rank 0's receiver waits for room (the NaN, behind 11 earlier steps of simulation 1, still
in its socket), both simulations exit 0 ("exited": their data not all in on rank 0), and
after `HELD` s the notice goes, held, to rank 1, whose receiver (held too: 8 samples for
a buffer of 2) reads it before the end of its stream. Then both train: rank 1's stream
ends (it has every simulation) and it pads; rank 0 reads the NaN (``nonfinite="fail"``),
the launcher fails simulation 1 (no restart) and, under ``on_failure="raise"``, the
study: rank 0's `train()` raises.

    python held_end_then_nan.py OUT SOLVER ON

With ON 1 the NaN is simulation 1's last step to rank 1 instead, refused there after the
notice (its failure handed to rank 0), with one restart allowed, which starts 8 s late
(longer than rank 1's grace): rank 1 awaits it, and the study completes.

Each rank writes ``OUT/../exit-<rank>.json``: how its `train()` ended (the exception's
class or "returned"), the steps trained, whether a checkpoint was saved at the end, and
what the notice did (rank 0: told, held; rank 1: the ids its receiver was told ended, and
the first step end at which its stream had ended), and the attempts of simulation 1 its
receiver read (HELLOs: 2 once the restart ran).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch
from rank_study import recording_end, study_trainer

from melissa_trainer import Hook, ReceiverConfig, Study
from melissa_trainer.launcher import LauncherTuning

#: seconds rank 0 waits for its notice (the solvers' start-up and `HELD`, on a loaded machine)
WAIT = 120.0

#: simulation s sends time steps 2i + s (to rank 0, i < 12) and 2i + s + 1 (to rank 1,
#: i < 4), in increasing order, one message each (no batch: the NaN is read in its turn,
#: not with the steps batched before it). Its first attempt's step NAN is NaN: 23, its
#: last to rank 0 (parameter "on" 0), or 8, its last to rank 1 ("on" 1); a restart sends
#: no NaN and starts 8 s late (a loaded node, a big solver: longer than rank 1's grace)
SOLVER = r"""
import json, os, time
import numpy as np
from melissa_trainer.client import Client, ClientTuning

sid = int(os.environ["MELISSA_TRAINER_SIMULATION_ID"])
first = os.environ["MELISSA_TRAINER_ATTEMPT"] == "0"
on = json.loads(os.environ["MELISSA_TRAINER_PARAMETERS"])["on"]
if not first:
    time.sleep(8)
steps = sorted({2 * i + sid for i in range(12)} | {2 * i + sid + 1 for i in range(4)})
nan = 8 if on else 23
with Client({"x": ((2,), "f4")}, tuning=ClientTuning(batch_bytes=0)) as c:
    for t in steps:
        x = np.array([c.parameters["a"], float(t)], np.float32)
        if sid == 1 and t == nan and first:
            x[:] = np.nan
        c.send(t, x=x)
"""


def process(s: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """A sample's ``x = (a, t)`` as (input a, target t)."""
    return torch.from_numpy(s["x"][:1]), torch.from_numpy(s["x"][1:])


class Watch(Hook):
    """Rank 0's first step end waits for its STUDY_END to be sent (module docstring);
    every rank notes the first step end at which its stream had ended (`ended_at`)."""

    def __init__(self, study: Study, rank: int) -> None:
        self.study, self.rank = study, rank
        self.waited = False
        self.told = False
        self.ended_at: int | None = None

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        receiver = self.study.stream.receiver
        if self.ended_at is None and receiver is not None and receiver.ended:
            self.ended_at = state.global_step
        if self.waited or self.rank != 0:
            return
        self.waited = True
        notice = self.study._end_notice
        assert notice is not None
        self.told = notice.told.wait(WAIT)


def main() -> None:
    out, solver, on = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    parameters = [{"a": float(i), "on": float(on)} for i in range(2)]
    tuning = LauncherTuning(poll_interval=0.05, kill_grace=2.0, max_restarts=on, on_failure="raise")
    trainer = study_trainer(
        out, solver, parameters, 2, ReceiverConfig(nonfinite="fail"), process,
        tuning=tuning, batch_size=1, buffer="fifo", buffer_size=2, watermark=1,
        stop_sync_steps=1, max_steps=1000,
    )  # fmt: skip
    study = trainer.source
    assert isinstance(study, Study)
    rank = trainer.process_index
    watch = Watch(study, rank)
    trainer.hooks.add(watch)

    def write(ended: str) -> None:
        notice = study._end_notice
        receiver = study.stream.receiver
        record = {
            "ended": ended,
            "steps": trainer.state.global_step,
            "last_save_step": trainer.state.last_save_step,
            "told": watch.told,
            "stream_ended_at": watch.ended_at,
            "held": bool(notice and notice.held),
            "study_end": None if receiver is None else receiver.study_end.finished,
            "attempts_1": None if receiver is None else receiver.ingest.nonfinite.attempt(1),
        }
        (Path(out).parent / f"exit-{rank}.json").write_text(json.dumps(record))

    with recording_end(write):
        trainer.train()


if __name__ == "__main__":
    main()
