"""Saved arguments read back: a checkpoint's ``training_args.json`` names the
checkpoint its run resumed from, which rotation (``max_to_keep``) may have deleted
since. `TrainingArguments.from_file` / `from_dict` keep that value without looking for
the path (reading the arguments to inspect or reproduce the run must not fail for it);
the constructor and the command line still refuse a path that is not a directory at
once (tests/trainer/test_arguments_paths.py), and `train()` checks the path in every case
(`resolve_resume`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from melissa_trainer.checkpoint.paths import resolve_resume
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.config.parser import ArgumentParser
from melissa_trainer.config.reading import ConfigError


@pytest.mark.timeout(60)
def test_saved_arguments_whose_resumed_checkpoint_was_rotated_away_still_load(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    resumed = out / "checkpoints" / "checkpoint-40"
    resumed.mkdir(parents=True)
    saved = TrainingArguments(output_dir=str(out), resume_from_checkpoint=str(resumed))
    args_file = tmp_path / "training_args.json"
    args_file.write_text(saved.to_json())
    shutil.rmtree(resumed)  # rotated away by a later save
    loaded = TrainingArguments.from_file(args_file)
    assert loaded == saved  # every field as saved, the path too
    assert TrainingArguments.from_dict(saved.to_dict()) == saved
    # made anew, the same arguments are refused at once (a typo's early error) ...
    with pytest.raises(ConfigError, match="is not a directory"):
        TrainingArguments(output_dir=str(out), resume_from_checkpoint=str(resumed))
    with pytest.raises(SystemExit, match="^2$"):
        ArgumentParser(TrainingArguments).parse_args_into_dataclasses(
            ["--resume_from_checkpoint", str(resumed)]
        )
    # ... and checked at train() as well, for loaded arguments
    with pytest.raises(FileNotFoundError, match="is not a checkpoint directory"):
        resolve_resume(loaded.resume_from_checkpoint, out / "checkpoints")


@pytest.mark.timeout(60)
def test_loaded_arguments_keep_every_other_check(tmp_path: Path) -> None:
    """Only the path's existence is left to train(): a bad value is still refused."""
    with pytest.raises(ConfigError, match="resume_from_checkpoint=''"):
        TrainingArguments.from_dict({"resume_from_checkpoint": ""})
    with pytest.raises(ConfigError, match="choose one"):
        TrainingArguments.from_dict(
            {"resume_from_checkpoint": str(tmp_path / "gone"), "overwrite_output_dir": True}
        )
    # the constructor's check is back once the file is read (a context variable, reset)
    with pytest.raises(ConfigError, match="is not a directory"):
        TrainingArguments(resume_from_checkpoint=str(tmp_path / "gone"))
