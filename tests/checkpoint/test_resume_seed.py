"""Resuming with another `seed`. The resume restores the checkpoint's random states
(every rank's torch, numpy and random generators, each buffer's), so the new seed draws
nothing differently: the run is the one an unchanged resume trains, bit for bit. The
settings warning said of it "This run's settings apply ... not the run that checkpoint's
would have been", which was untrue; it now says the seed has no effect. Another setting
changed with it is still said to apply."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from helpers import small_model
from tiny_resume import said, tiny_run

from melissa_trainer import OnlineTrainer
from melissa_trainer.checkpoint.resumed_args import warn_changed_settings

pytestmark = pytest.mark.timeout(90)

WARNING = "with settings changed since it was written"


def run(out: Path, **overrides: Any) -> OnlineTrainer:
    """A tiny run that draws random numbers: dropout, and a reservoir buffer's draws."""
    return tiny_run(out, model=small_model(0, dropout=0.3), buffer="reservoir", **overrides)


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return said(caplog, WARNING)


def test_a_resume_with_another_seed_trains_the_same_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "a", max_steps=6)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    same = run(tmp_path / "a", max_steps=12, resume_from_checkpoint="latest")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        other = run(tmp_path / "b", max_steps=12, seed=7, resume_from_checkpoint="latest")
    for mine, theirs in zip(same.model.parameters(), other.model.parameters(), strict=True):
        assert torch.equal(mine, theirs)  # the seed changed nothing
    (message,) = warnings_of(caplog)
    assert "seed 42 -> 7, which has no effect on a resume" in message
    assert "settings apply" not in message


def test_another_seed_and_batch_size_are_each_said_for_what_they_are(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run(tmp_path / "out", max_steps=6)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        run(tmp_path / "out", max_steps=6, seed=7, batch_size=4, resume_from_checkpoint="latest")
    (message,) = warnings_of(caplog)
    assert "batch_size 8 -> 4. This run's settings apply" in message
    assert "seed 42 -> 7, which has no effect on a resume" in message


@pytest.mark.timeout(10)
def test_the_seed_warning_is_true_of_a_resize_too(caplog: pytest.LogCaptureFixture) -> None:
    # (on another number of ranks nothing is restored as such: the RNGs are seeded from
    # the checkpoint's, `reshard.reshard_seed` and `buffers.reshard`: the seed still has
    # no effect, which a 1 -> 2 rank resume with seed 42 and 7 shows, bitwise equal
    # weights: test_resume_changes_ranks.py; but "restored, so the run draws as the
    # checkpoint's would have" was not so)
    with caplog.at_level(logging.WARNING):
        warn_changed_settings(Path("ckpt"), {"seed": 42}, {"seed": 7})
    (message,) = warnings_of(caplog)
    assert "on another number of ranks each rank's are derived from the checkpoint's" in message
    assert "as the checkpoint's would have" not in message
