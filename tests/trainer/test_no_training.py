"""A run whose stream ended before its first step fails, saying why
(`melissa_trainer.trainer.no_training`): a trial run of 2 ranks, whose 2 simulations of
one time step each sent their samples to rank 0 only, ended at step 0 with exit code 0,
a checkpoint of the untrained model and no word of why."""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.trainer.no_training import NoTrainingError
from melissa_trainer.trainer.no_training_words import untrained_words

SCRIPTS = Path(__file__).parents[1] / "scripts"


def test_the_words_name_the_empty_rank_each_ranks_samples_and_the_fix() -> None:
    words = untrained_words([2, 0])
    said = "stream of rank 1 ended with no sample (samples received by then: rank 0: 2, rank 1: 0)"
    assert said in words
    assert "time step t of simulation s to rank (s + t) mod 2" in words
    assert "fewer simulations than ranks" in words
    assert "Run at least 2 simulations (or give each at least 2 time steps)" in words
    assert "or train on fewer ranks (--num_processes 1)" in words
    assert "no sample on any rank" in untrained_words([0, 0])
    assert "ranks 1, 2" in untrained_words([5, 0, 0])


@pytest.mark.timeout(60)
def test_a_stream_with_no_sample_fails_with_no_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    args = TrainingArguments(
        output_dir=str(out), report_to="none", disable_progress_bar=True, batch_size=1,
        buffer="fifo", buffer_size=8, stop_sync_steps=1,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(0), process_sample=xy,
    )  # fmt: skip
    with caplog.at_level(logging.ERROR), pytest.raises(NoTrainingError) as info:
        trainer.train()
    assert isinstance(info.value, SystemExit) and info.value.code == 1  # quiet, status 1
    assert "no sample on this rank" in str(info.value)
    said = [r.getMessage() for r in caplog.records if "no training step" in r.getMessage()]
    assert said == [str(info.value)]  # once, at ERROR
    assert not list((out / "checkpoints").glob("checkpoint-*"))  # no untrained model


@pytest.mark.e2e
@pytest.mark.timeout(180)
@pytest.mark.skipif(sys.platform != "linux", reason="accelerate launch with gloo")
def test_a_rank_with_no_sample_fails_the_run_on_every_rank_saying_why(tmp_path: Path) -> None:
    from two_ranks import launch_two_ranks

    out = tmp_path / "out"
    proc = launch_two_ranks(SCRIPTS / "empty_rank.py", str(out), timeout=150)
    said = proc.stdout[-3000:] + proc.stderr[-8000:]
    assert proc.returncode != 0, said
    ends = [(tmp_path / f"exit-{r}.txt").read_text().split() for r in range(2)]
    assert ends == [["NoTrainingError", "0"]] * 2, said
    (full,) = [x for x in proc.stderr.splitlines() if "no training step" in x]
    # (rank 0's count is what its source had put when rank 1's stream ended: 1 or 2)
    assert re.search(r"stream of rank 1 ended with no sample \(samples received by then: "
                     r"rank 0: [12], rank 1: 0\)", full), said  # fmt: skip
    (own,) = [x for x in proc.stderr.splitlines() if "rank 1 received no sample" in x]
    assert "rank 0's error says why" in own, said
    # no traceback of ours (torchrun prints its own, of the launcher)
    assert "melissa_trainer/" not in proc.stderr, said
    assert not list((out / "checkpoints").glob("checkpoint-*")), said
