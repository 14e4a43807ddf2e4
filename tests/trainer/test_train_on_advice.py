"""The advice on training past the stream's end (`core.train_on`), in the end-of-run
line and in the resume warning of a checkpoint at or past `max_steps`: a replay on
resume (`--pseudo_epochs`) is offered only when the buffer keeps samples to replay,
and a larger `max_steps` only while the stream has not ended. The oracle: the resumed
runs' steps."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.buffers import BufferConfig, make_buffer

pytestmark = pytest.mark.timeout(120)
N = 400  # samples streamed: 50 steps of 8


def run(out: Path, buffer: str = "fifo", **overrides: Any) -> OnlineTrainer:
    extra = {"sample_to_insert_ratio": 0} if buffer == "reservoir" else {}
    args = TrainingArguments(
        output_dir=str(out), report_to="none", disable_progress_bar=True, batch_size=8,
        buffer=buffer, buffer_size=64, watermark=16, stop_sync_steps=1, seed=3,
        **extra, **overrides,
    )  # fmt: skip
    model = small_model(0)
    trainer = OnlineTrainer(
        model, args, torch.optim.SGD(model.parameters(), lr=1e-2),
        train_source=lambda rank, world: linear_samples(N), process_sample=xy,
    )  # fmt: skip
    trainer.train()
    return trainer


def end_line(out: str) -> str:
    (line,) = [ln for ln in out.splitlines() if "each sample trained on" in ln]
    return line


def test_a_fifo_run_that_kept_nothing_is_not_promised_a_replay_on_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    ended = run(out).state.global_step  # fifo, pseudo_epochs 1: nothing retained
    capsys.readouterr()
    resumed = run(out, resume_from_checkpoint="latest", max_steps=1000)
    assert resumed.state.global_step == ended
    line = end_line(capsys.readouterr().out)
    assert "(end of stream, before max_steps 1000)" in line, line
    assert "also on resume" not in line, line
    assert "keeps no sample to replay" in line and "--buffer reservoir" in line, line
    # what the line says: a replay on resume trains on nothing here, and says so
    caplog.clear()  # (the resume above warned that it trains nothing, naming it too)
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        replayed = run(out, resume_from_checkpoint="latest", max_steps=1000, pseudo_epochs=2)
    assert replayed.state.global_step == ended
    (said,) = [r.getMessage() for r in caplog.records if "no sample to replay" in r.message]
    assert said.startswith("pseudo-epoch 1: "), said
    assert "keeps no sample to replay" in end_line(capsys.readouterr().out)


def test_a_fifo_run_with_pseudo_epochs_keeps_its_replay_for_a_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        ended = run(out, pseudo_epochs=2, max_steps=1000).state.global_step
        line = end_line(capsys.readouterr().out)
        assert "--pseudo_epochs 3 or more replays the buffer (also on resume)" in line, line
        replayed = run(out, resume_from_checkpoint="latest", max_steps=1000, pseudo_epochs=3)
    assert replayed.state.global_step > ended and replayed.state.pseudo_epoch == 2
    assert not [r for r in caplog.records if "no sample to replay" in r.message]


def test_the_past_max_steps_warning_of_an_ended_stream_names_the_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    ended = run(out, buffer="reservoir").state.global_step  # to the stream's end
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(out, buffer="reservoir", resume_from_checkpoint="latest", max_steps=10)
    (said,) = [r.getMessage() for r in caplog.records if "at or past max_steps" in r.message]
    assert "larger --max_steps (or none" not in said, said
    assert "its stream had ended" in said, said
    assert "--pseudo_epochs 2 or more replays the buffer (also on resume)" in said, said
    # what it says: a replay on resume trains on (a larger max_steps alone does not)
    longer = run(out, buffer="reservoir", resume_from_checkpoint="latest", max_steps=1000)
    assert longer.state.global_step == ended
    replayed = run(
        out, buffer="reservoir", resume_from_checkpoint="latest", max_steps=1000, pseudo_epochs=2
    )
    assert replayed.state.global_step > ended


def test_the_past_max_steps_warning_of_a_live_stream_asks_for_a_larger_max_steps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "out"
    assert run(out, max_steps=10).state.global_step == 10  # stream not ended
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        run(out, resume_from_checkpoint="latest", max_steps=10)
    (said,) = [r.getMessage() for r in caplog.records if "at or past max_steps" in r.message]
    assert "resume with a larger --max_steps (or none: until the stream ends)" in said, said


@pytest.mark.parametrize(
    ("kind", "retain", "replayable"),
    [("fifo", False, 0), ("firo", True, 3), ("reservoir", False, 4)],
)
def test_replayable_is_what_a_rewind_would_serve_again(
    kind: str, retain: bool, replayable: int
) -> None:
    buffer = make_buffer(BufferConfig(kind=kind, capacity=8, retain=retain))
    for i in range(4):
        buffer.put({"x": np.full(2, i, np.float32)})
    buffer.get_batch(3)
    assert buffer.replayable == replayable
    if kind != "fifo":  # (a fifo without retain refuses to rewind)
        assert buffer.rewind() == replayable


@pytest.mark.parametrize("buffer", ["fifo", "reservoir"])
def test_resuming_a_run_whose_stream_ended_says_it_trains_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, buffer: str
) -> None:
    """A requeued job resuming a finished run (no max_steps) trains nothing and exits 0:
    it says so at WARNING, naming the checkpoint and how to train on (a user trial saw
    only `end of stream (pseudo-epoch 0)`). The oracle: the resumed run's steps."""
    out = tmp_path / "out"
    ended = run(out, buffer=buffer).state.global_step
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):
        resumed = run(out, buffer=buffer, resume_from_checkpoint="latest")
    assert resumed.state.global_step == ended  # what it says: nothing trained
    (said,) = [r.getMessage() for r in caplog.records if "stream had already ended" in r.message]
    assert f"checkpoint-{ended} is of a run whose stream had already ended" in said, said
    assert f"(at step {ended}, pseudo-epoch 0 of 1): this resume trains nothing" in said, said
    assert "another --output_dir" in said, said
    if buffer == "reservoir":
        assert "--pseudo_epochs 2 or more replays the buffer (also on resume)" in said, said
    else:
        assert "keeps no sample to replay" in said, said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer"):  # a replay left: silent
        run(out, buffer=buffer, resume_from_checkpoint="latest", pseudo_epochs=2)
    assert not [r for r in caplog.records if "stream had already ended" in r.message]
