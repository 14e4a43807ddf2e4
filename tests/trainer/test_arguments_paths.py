"""`TrainingArguments`' path checks, when the arguments are made: a resume path that
does not exist (a typo of 'latest' named), a file where a directory goes."""

from __future__ import annotations

import os
from pathlib import Path

from config_errors import config_error

from melissa_trainer.config.arguments import TrainingArguments


def test_a_resume_path_that_does_not_exist_is_refused_at_once(tmp_path: Path) -> None:
    """A typo in --resume_from_checkpoint ('lates', a wrong step) is a ConfigError when the
    arguments are made, naming the field and the fix: it was a FileNotFoundError traceback
    from `train()`, after the model, the validation set and the trainer were built (the
    user trial of the Navier-Stokes example)."""
    err = str(config_error(resume_from_checkpoint="lates", output_dir=str(tmp_path / "out")))
    assert "resume_from_checkpoint='lates' is not a directory (did you mean 'latest'?)" in err
    assert "give 'latest'" in err and os.path.join(str(tmp_path / "out"), "checkpoints") in err
    missing = str(tmp_path / "out" / "checkpoints" / "checkpoint-40")
    err = str(config_error(resume_from_checkpoint=missing))
    assert f"resume_from_checkpoint={missing!r} is not a directory: give" in err
    assert "did you mean" not in err
    (tmp_path / "file").write_text("x")
    assert "is not a directory" in str(config_error(resume_from_checkpoint=str(tmp_path / "file")))
    # 'latest' needs no checkpoint yet (a job script's first run); a directory is taken
    assert TrainingArguments(resume_from_checkpoint="latest").resume_from_checkpoint == "latest"
    there = str(tmp_path / "out")
    os.makedirs(there)
    assert TrainingArguments(resume_from_checkpoint=there).resume_from_checkpoint == there


def test_a_file_where_a_directory_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("not a directory")
    err = str(config_error(output_dir=str(tmp_path / "f")))
    assert f"output_dir={str(tmp_path / 'f')!r} is a file, not a directory" in err
    assert "give a directory path" in err
    err = str(config_error(logging_dir=str(tmp_path / "f" / "runs")))
    assert f"is inside {str(tmp_path / 'f')!r}, a file" in err
    # a directory that exists, or that can be made, is fine
    assert TrainingArguments(output_dir=str(tmp_path)).output_dir == str(tmp_path)
    assert TrainingArguments(output_dir=str(tmp_path / "new" / "sub")).output_dir
