"""A resume in an output_dir the run cannot write to (a read-only copy of a run: an
archive, a read-only mount) fails at its lock with the way on: another output_dir and
the checkpoint as PATH (`trainer.output_lock`).

Before, it raised the bare ``[Errno 30] Read-only file system: '.../trainer.lock'``
(seen on a read-only bind mount, as root). The read-only file system is stood in for by
the lock file's creation failing with EROFS, as the kernel fails it there (a real one
needs a mount, which needs root)."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.trainer import output_lock
from melissa_trainer.trainer.lock_holder import LOCK_FILE
from melissa_trainer.trainer.output_dir_errors import ENV_OUTPUT_LOCK
from melissa_trainer.trainer.output_lock import OutputDirLock
from melissa_trainer.trainer.run_id import new_run_id

pytestmark = pytest.mark.timeout(30)


def test_a_read_only_output_dir_says_how_to_resume_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_path = tmp_path / LOCK_FILE
    real_open = os.open

    def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path) == lock_path and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(output_lock.os, "open", read_only)
    lock = OutputDirLock(tmp_path, new_run_id())
    with pytest.raises(OSError) as caught:
        lock.acquire()
    assert caught.value.errno == errno.EROFS
    message = str(caught.value)
    assert f"cannot write the lock '{lock_path}' in output_dir '{tmp_path}'" in message
    assert "Read-only file system" in message
    assert "give another --output_dir and --resume_from_checkpoint PATH" in message
    assert not lock.held


def refuse_mkdir(monkeypatch: pytest.MonkeyPatch, below: Path) -> None:
    """Every directory made under `below` fails with EROFS, as ``mkdir`` fails on a
    read-only file system."""
    real_mkdir = Path.mkdir

    def read_only(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.is_relative_to(below) and self != below:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))
        real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", read_only)


@pytest.mark.parametrize("lock", ["on", "off"])
def test_a_missing_output_dir_on_a_read_only_file_system_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lock: str
) -> None:
    """Before: the bare ``[Errno 30] Read-only file system: '.../out'`` of the lock's
    ``mkdir`` (b5f9245e named only an existing read-only output_dir's lock file)."""
    from melissa_trainer.trainer.lock_share import lock_output_dir

    output_dir = tmp_path / "mount" / "out"
    refuse_mkdir(monkeypatch, tmp_path)
    monkeypatch.setenv(ENV_OUTPUT_LOCK, lock)
    with pytest.raises(OSError) as caught:
        lock_output_dir(str(output_dir), 0, 1, "cpu")
    assert caught.value.errno == errno.EROFS
    message = str(caught.value)
    assert f"cannot create output_dir '{output_dir}' (Read-only file system): " in message
    assert "Give an --output_dir on a file system this run can write to" in message
    assert "--resume_from_checkpoint PATH" in message
    assert not output_dir.exists()
