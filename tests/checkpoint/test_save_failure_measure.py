"""The failing rank's account of a failed save never raises: it runs before every rank
agrees on the failure, so a rank that raised there would leave the others waiting in the
agreement (gloo: "Connection closed by peer" on rank 0, the clean CheckpointSaveError on
no rank; seen once in CI, 2026-11-30, in test_checkpoint_save_errors' 2-rank run).

Its measure walks the staging directory while another rank may still be writing into
it: a file written aside and renamed between the listing and its size is gone."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from melissa_trainer.checkpoint import manifest
from melissa_trainer.checkpoint.errors import describe_save_failure


def _staging(tmp_path: Path) -> Path:
    staging = tmp_path / "checkpoints" / ".tmp-checkpoint-20"
    (staging / "rank_1").mkdir(parents=True)
    (staging / "rank_1" / "buffer.bin").write_bytes(b"x" * 100)
    (staging / "trainer_state.json.tmp").write_text("{}")  # (another rank's, aside)
    return staging


def test_a_file_renamed_while_measured_counts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = _staging(tmp_path)
    real = os.path.getsize

    def renamed_meanwhile(path: str | os.PathLike[str]) -> int:
        if str(path).endswith(".tmp"):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real(path)

    monkeypatch.setattr(os.path, "getsize", renamed_meanwhile)
    assert manifest.total_size(staging) == 100


def test_the_account_of_a_failure_says_the_error_when_nothing_can_be_measured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staging = _staging(tmp_path)

    def unlistable(path: str | os.PathLike[str]) -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os.path, "getsize", unlistable)
    failure = OSError(errno.EFBIG, "File too large")
    final = staging.parent / "checkpoint-20"
    said = describe_save_failure(failure, staging, final, None, 1)
    assert said == "rank 1: OSError: [Errno 27] File too large", said
