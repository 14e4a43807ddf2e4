"""Training that waits long for data says so (`core.data_wait`): a rank whose source
stops sending (a simulation that hangs without sending, before the launcher's timeout
kills it) used to wait in silence, the log stopped for minutes. The oracle is the
source's own count: 20 samples put, two batches of 8 trained, the third never comes."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, Preempted, TrainingArguments
from melissa_trainer.buffers import Buffer
from melissa_trainer.sources.source import Source


class Stuck(Source):
    """Puts 20 samples, then nothing, and never ends the stream (a hung simulation)."""

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        for sample in linear_samples(20):
            buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        time.sleep(timeout)  # nothing to come: the trainer's wait is what is tested

    def stop(self) -> None:
        pass


class Said(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.event = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "training has waited" in record.getMessage():
            self.messages.append(record.getMessage())
            self.event.set()


@pytest.mark.timeout(60)
def test_a_long_wait_for_data_is_said_with_what_the_buffer_holds(tmp_path: Path) -> None:
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), batch_size=8, buffer="fifo", buffer_size=64,
        watermark=8, stop_sync_steps=1, report_to="none", disable_progress_bar=True,
    )  # fmt: skip
    model = small_model()
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2), train_source=Stuck(),
        process_sample=xy,
    )  # fmt: skip
    trainer.dataset.data_wait.notice = 0.2  # (60 s by default)
    said = Said()
    log = logging.getLogger("melissa_trainer.core.dataset")
    log.addHandler(said)

    def stop_once_said() -> None:  # bounded: without the notice, SIGTERM after 20 s
        said.event.wait(20)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=stop_once_said)
    thread.start()
    try:
        with pytest.raises(Preempted, match="preempted by SIGTERM"):
            trainer.train()
    finally:
        thread.join()
        log.removeHandler(said)
    assert said.messages, "training waited for data in silence"
    first = said.messages[0]
    head = re.match(r"training has waited ([\d.]+) s for data \(a batch of 8 ", first)
    assert head is not None and float(head[1]) >= 0.2, first
    # 20 put, 16 taken: 4 left, fewer than a batch (no word of held-back draws)
    assert "the buffer holds 4 samples of 64, 20 put so far. Training goes on" in first
    again = re.search(r"Said again at ([\d.]+) s$", first)
    assert again is not None and float(again[1]) >= 0.4  # (twice the wait)
