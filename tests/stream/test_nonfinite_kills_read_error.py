"""`NonfiniteKills.failures` keeps the counts it read last when a read fails (a
transient error: NFS) rather than take it for a file removed: a rank that counted 2
failures of a simulation answered 0 for a moment, and a hand-off then named a wrong
count of rank 0's failures. A file removed still counts 0."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from melissa_trainer.stream.nonfinite_kills import NONFINITE_KILLS_FILE, NonfiniteKills

pytestmark = pytest.mark.timeout(60)


def test_a_read_error_keeps_the_counts_read_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / NONFINITE_KILLS_FILE
    path.write_text("r\n5\n5\n6\n")
    kills = NonfiniteKills(tmp_path, "r")
    assert (kills.failures(5), kills.failures(6)) == (2, 1)
    path.write_text("r\n5\n5\n6\n5\n")  # (changed: read again, and that read fails)
    real_open = Path.open

    def failing_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:
            raise OSError(errno.EIO, "Input/output error", str(self))
        return real_open(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(Path, "open", failing_open)
        assert kills.failures(5) == 2  # (before: 0, the cache reset)
    assert kills.failures(5) == 3  # read again once it reads
    path.write_bytes(b"r\n\xff\n")  # (undecodable: kept too)
    assert kills.failures(5) == 3
    path.unlink()  # removed: no failure
    assert kills.failures(5) == 0
