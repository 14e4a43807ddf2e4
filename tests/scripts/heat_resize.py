"""The heat example as `heat_lineage.py` runs it (every step trained recorded in
``$LINEAGE_LOG``), recording also what the resize tests check across a change of the
number of ranks:

* ``$PUT_LOG.RANK``: every ``simulation:time_step`` this rank's receiver puts into its
  buffer, one a line, in the order of the puts (a receiver puts from one thread at a
  time, so this is the buffer's order: the first ``put`` lines of a rank are the
  samples its buffer counts as put at any moment);
* ``$LOAD_DUMP/rank_R/``: right after a resume has loaded the checkpoint (before the
  source starts, so before any new put), this rank's buffer and pending batches,
  written by the same `Buffer.save` and `StreamDataset.save` as a checkpoint's
  ``rank_R/`` (so the test reads both with one reader);
* ``$END_DUMP/rank_R/``: the same, once `train()` has returned: what the rank had not
  trained when the ranks stopped together at the end of the stream.

Arguments are the example's.
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import Buffer, Sample
from melissa_trainer.stream import feeder
from melissa_trainer.trainer.loop import OnlineTrainer

LINEAGE = Path(__file__).resolve().parent / "heat_lineage.py"
rank = int(os.environ.get("RANK", "0"))  # `accelerate launch` sets it; one process: 0
puts = open(f"{os.environ['PUT_LOG']}.{rank}", "a", buffering=1)  # noqa: SIM115 - the process's life


class RecordedPuts:
    """`buffer`, whose `put` and `put_available` record what they put (after the put:
    a sample recorded is in the buffer's count)."""

    def __init__(self, buffer: Buffer) -> None:
        self._buffer = buffer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._buffer, name)

    def put(self, sample: Sample, timeout: float | None = None) -> None:
        self._buffer.put(sample, timeout)
        self._record([sample])

    def put_available(self, samples: Sequence[Sample]) -> int:
        n = self._buffer.put_available(samples)
        self._record([samples[i] for i in range(n)])
        return n

    def _record(self, samples: Sequence[Sample]) -> None:
        if samples:  # one write: the lines of one put are never split by another's
            puts.write(
                "".join(f"{int(s['simulation_id'])}:{int(s['time_step'])}\n" for s in samples)
            )


plain_feeder_init = feeder.Feeder.__init__


def feeder_init(self: feeder.Feeder, buffer: Buffer, *args: Any, **kwargs: Any) -> None:
    plain_feeder_init(self, RecordedPuts(buffer), *args, **kwargs)  # type: ignore[arg-type]


plain_load = OnlineTrainer.load_checkpoint


def load_and_dump(self: OnlineTrainer, path: str | Path) -> None:
    plain_load(self, path)
    where = Path(os.environ["LOAD_DUMP"]) / f"rank_{self.process_index}"
    self.buffer.save(where)
    self.dataset.save(where)


plain_train = OnlineTrainer.train


def train_and_dump(self: OnlineTrainer) -> Any:
    state = plain_train(self)
    where = Path(os.environ["END_DUMP"]) / f"rank_{self.process_index}"
    self.buffer.save(where)
    self.dataset.save(where)
    return state


feeder.Feeder.__init__ = feeder_init  # type: ignore[method-assign]
OnlineTrainer.load_checkpoint = load_and_dump  # type: ignore[method-assign]
OnlineTrainer.train = train_and_dump  # type: ignore[method-assign]
sys.argv = [str(LINEAGE), *sys.argv[1:]]  # heat_lineage passes them on to the example
runpy.run_path(str(LINEAGE), run_name="__main__")
