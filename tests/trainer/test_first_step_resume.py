"""A run's first window is one step (`OnlineTrainer.train`), then the windows realign
on the multiples of `stop_sync_steps`; a resume from a checkpoint at any step keeps
the windows of the checkpointed run (its first runs to the next multiple: what it
takes from the buffer at each step is the run's, tests/checkpoint/test_resume_kill.py)
and trains each sample exactly once, as the uninterrupted run did; a window shorter
than asked still means the end of the stream, nothing else.

One process (in-process, FIFO: the data order does not depend on timing); the two-rank
resume inside a window is tests/trainer/test_rank_counters.py's."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import linear_samples, small_model, xy

from melissa_trainer import Hook, OnlineTrainer, TrainingArguments

pytestmark = pytest.mark.timeout(120)

BATCH, WINDOW, STEPS = 4, 4, 12


class Trained(Hook):
    """The samples (their ``index``) each step trained on, by step, and the buffer's
    draws when it ended (what training had taken from the buffer by then: its logs'
    ``buffer_got``)."""

    def __init__(self) -> None:
        self.by_step: dict[int, list[int]] = {}
        self.got_by_step: dict[int, int] = {}

    def on_step_end(self, trainer: Any, state: Any, control: Any) -> None:
        samples = trainer.dataset.last_samples
        self.by_step[state.global_step] = [int(s["index"]) for s in samples]
        self.got_by_step[state.global_step] = trainer.buffer.stats().got


def _train(out: Path, samples: int, **overrides: Any) -> tuple[OnlineTrainer, Trained, list[int]]:
    """Train; returns the trainer, what each step trained on, and the steps at which an
    agreement on a window was started (the windows' starts)."""
    args = TrainingArguments(
        output_dir=str(out),
        batch_size=BATCH,
        buffer="fifo",
        buffer_size=2 * BATCH,
        report_to="none",
        disable_progress_bar=True,
        stop_sync_steps=WINDOW,
        max_steps=STEPS,
        save_at_end=False,
        **overrides,
    )
    trained = Trained()
    model = small_model(0)
    trainer = OnlineTrainer(
        model,
        args,
        torch.optim.SGD(model.parameters(), lr=0.01),
        train_source=lambda rank, world: linear_samples(samples, seed=3),
        process_sample=xy,
        hooks=[trained],
    )
    starts: list[int] = []
    sync_start = trainer.stop_sync.start

    def start(*a: Any, **k: Any) -> None:
        starts.append(trainer.state.global_step)
        sync_start(*a, **k)

    trainer.stop_sync.start = start  # type: ignore[method-assign]
    trainer.train()
    return trainer, trained, starts


def test_a_resume_at_any_step_trains_each_sample_once_in_the_same_windows(
    tmp_path: Path,
) -> None:
    """From a checkpoint at step k (on a multiple of WINDOW or not): the resumed run
    trains at steps k+1.. exactly the samples the uninterrupted run did; its windows
    start at k, then at the multiples of WINDOW, as the uninterrupted run's (whose own
    first window is step 1 alone, then steps 2 to WINDOW), and by each step's end it has
    taken from the buffer what that run had (its logged buffer counters are the run's).

    So a resume on a multiple (k = 4, 8), nothing pending, takes a whole window before
    its first step, as the uninterrupted run did there: a first window of one step
    trains the same samples on one rank, but its logs' buffer counters differ from the
    run's (buffer_got at step k + 1: (k + 1) x BATCH, not (k + WINDOW) x BATCH), and
    under several ranks a rank whose data ends in that window would pad with other
    batches (docs/concepts/loop.md)."""
    out = tmp_path / "full"
    full, trained, starts = _train(out, 10**4, save_steps=1, max_to_keep=STEPS)
    assert full.state.global_step == STEPS
    multiples = list(range(WINDOW, STEPS, WINDOW))
    assert starts == [0, 1, *multiples]
    every = [i for s in range(1, STEPS + 1) for i in trained.by_step[s]]
    assert sorted(set(every)) == list(range(STEPS * BATCH))  # each sample once, in order
    for k in (1, 2, 3, 4, 6, 8):
        # (each resume in its own copy: a resume from checkpoint-k sets the later ones
        # aside, `checkpoint.later_runs`, and the next k needs them)
        copy = tmp_path / f"resume-{k}"
        shutil.copytree(out, copy)
        resumed, again, starts = _train(
            copy, 10**4, resume_from_checkpoint=str(copy / "checkpoints" / f"checkpoint-{k}")
        )
        assert resumed.state.global_step == STEPS
        assert again.by_step == {s: trained.by_step[s] for s in range(k + 1, STEPS + 1)}, k
        assert starts == [k, *(m for m in multiples if m > k)], k
        after = {s: trained.got_by_step[s] for s in range(k + 1, STEPS + 1)}
        assert again.got_by_step == after, k


@pytest.mark.parametrize("samples", [BATCH, 3 * BATCH, 2 * BATCH + 1, 5 * BATCH])
def test_a_short_first_window_means_the_end_of_the_stream(tmp_path: Path, samples: int) -> None:
    """A stream shorter than the first windows: the first step at the first batch held,
    the next window ends at the end of the stream (not before it), every sample trained
    once (the end of stream serves a short last batch)."""
    trainer, trained, starts = _train(tmp_path / "out", samples)
    steps = -(-samples // BATCH)
    assert trainer.state.global_step == steps
    assert trainer.state.stream_ended and trainer.ended_by.startswith("end of stream")
    every = [i for s in sorted(trained.by_step) for i in trained.by_step[s]]
    assert every == list(range(samples))
    assert starts == [0, 1, *([WINDOW] if steps >= WINDOW else [])]
