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
from melissa_trainer.trainer.output_lock import LOCK_FILE, OutputDirLock

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
    lock = OutputDirLock(tmp_path, output_lock.new_run_id())
    with pytest.raises(OSError) as caught:
        lock.acquire()
    assert caught.value.errno == errno.EROFS
    message = str(caught.value)
    assert f"cannot write the lock '{lock_path}' in output_dir '{tmp_path}'" in message
    assert "Read-only file system" in message
    assert "give another --output_dir and --resume_from_checkpoint PATH" in message
    assert not lock.held
