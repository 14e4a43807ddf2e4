"""Two training ranks' receivers of one run, optionally resumed from another run's
checkpoint: the set-up of the rerun tests (tests/client/test_rerun_follow_sends.py,
tests/client/test_held_rerun_skips.py, tests/c/test_c_rerun_skips.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from waiting import wait_until

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["CHECKPOINTS", "Run"]

#: the rerun tests' cases: the steps the first attempt sends (`before`) and the samples
#: each rank has put when its checkpoint is taken (`puts`). The second: rank 0's
#: checkpoint holds it all, rank 1's lacks steps 7 and 9, which it took after its
#: checkpoint: the trial's simulation that another rank lacked. (The tests' STEPS: 10.)
CHECKPOINTS = pytest.mark.parametrize(
    ("before", "puts"),
    [(list(range(10)), [5, 5]), ([0, 1, 2, 3, 4, 5, 6, 8], [5, 3])],
    ids=["all_held", "rank_1_lacks_two"],
)


class Run:
    """Two receivers in `rendezvous` under `run_id`, started, each on a FIFO of 100 of its
    own; with `checkpoint` (as `checkpoint` returns it), each resumed from its rank's
    record and buffer. The caller stops them (`stop`)."""

    def __init__(self, rendezvous: Path, run_id: str, checkpoint: Any = None) -> None:
        self.buffers = [FIFOBuffer(100), FIFOBuffer(100)]
        config = ReceiverConfig(
            expected_simulations=1, bind="tcp://127.0.0.1:*", rendezvous_dir=str(rendezvous),
            run_id=run_id,
        )  # fmt: skip
        self.receivers = [Receiver(self.buffers[r], r, 2, config) for r in range(2)]
        if checkpoint is not None:
            records, states = checkpoint
            for r in range(2):
                self.buffers[r].load_state_dict(*states[r])
                self.receivers[r].load_state_dict(records[r])
        for receiver in self.receivers:
            receiver.start()

    def checkpoint(self, puts: list[int]) -> Any:
        """Once rank r has put `puts[r]` samples: each rank's record and buffer."""
        wait_until(lambda: [b.stats().put for b in self.buffers] == puts, "the samples", 30)
        return [r.state_dict() for r in self.receivers], [b.state_dict() for b in self.buffers]

    def complete(self, simulation_id: int) -> None:
        """Wait until both receivers found the simulation complete (its BYE in)."""
        done = [simulation_id]
        wait_until(lambda: all(r.completed() == done for r in self.receivers), "the BYEs", 30)

    def stop(self) -> None:
        for receiver in self.receivers:
            receiver.stop()
