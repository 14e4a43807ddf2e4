"""The long waits for data mid-study (`DataWait`, "training has waited 60 s / 120 s for
data ...") name the simulations the scheduler still queues, with its reasons, in the
first-data notice's words (`in_queue`); htrial30: they never said that the simulations
were PENDING in Slurm's queue, though the launcher knew. `StreamDataset` takes the
count from its source's launcher (`Launcher.queued`). Failed before (no queue words;
DataWait took no `queued`)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.core.data_wait import WAIT_NOTICE, DataWait, in_queue
from melissa_trainer.core.dataset import StreamDataset

pytestmark = pytest.mark.timeout(30)


def _notice(wait: DataWait, now: list[float], caplog: pytest.LogCaptureFixture) -> str:
    buffer = FIFOBuffer(16)
    buffer.put({"x": np.zeros(2, np.float32)})  # (one sample of a batch of 4: a wait)
    caplog.clear()
    caplog.set_level(logging.WARNING, "melissa_trainer.core.dataset")
    wait.empty(buffer, 4)
    now[0] = WAIT_NOTICE + 1
    wait.empty(buffer, 4)
    (said,) = [r.getMessage() for r in caplog.records if "waited" in r.getMessage()]
    return said


def test_the_wait_names_the_queued_simulations(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    queue = (6, {"Resources": 5, "Priority": 1})
    said = _notice(DataWait(clock=lambda: now[0], queued=lambda: queue), now, caplog)
    words = in_queue(*queue, "simulation")  # (the first-data notice's words)
    assert words.startswith(", 6 simulations queued by the scheduler") and words in said, said
    assert "(the scheduler's reason: Priority, Resources x5)" in said, said


def test_no_queue_no_words(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    said = _notice(DataWait(clock=lambda: now[0], queued=lambda: (0, {})), now, caplog)
    assert "queued" not in said, said


class _Launcher:
    def queued(self) -> tuple[int, dict[str, int]]:
        return 2, {"Resources": 2}


class _Study:
    """What `StreamDataset` reads of a `Study`: its launcher."""

    launcher = _Launcher()

    def wait_for(self, n: int, timeout: float) -> None:
        pass


def test_the_dataset_takes_the_queue_from_its_source_launcher() -> None:
    wait = StreamDataset(FIFOBuffer(4), 2, source=_Study()).data_wait  # type: ignore[arg-type]
    assert wait.queued is not None and wait.queued() == (2, {"Resources": 2})
    assert StreamDataset(FIFOBuffer(4), 2).data_wait.queued is None
