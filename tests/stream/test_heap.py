"""keep_freed_memory: frames of large fields are recycled, not mapped again per frame."""

from __future__ import annotations

import subprocess
import sys

import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import heap
from melissa_trainer.stream import stream_source as source_module
from melissa_trainer.stream.stream_source import StreamSource

# Rounds of 64 blocks of 1 MiB, written, then freed: the minor page faults of the rounds
# after the first tell whether freed memory was kept (a few) or given back (~256 each).
FAULTS = r"""
import resource, sys
import numpy as np
from melissa_trainer.stream.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def round_():
    blocks = [np.ones(1 << 17) for _ in range(64)]
    del blocks
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc only")
def test_freed_frames_memory_is_kept_instead_of_faulted_in_again() -> None:
    default, kept = _faults("default"), _faults("keep")
    assert default > 4 * 64 * 256 // 2  # most pages of the 4 rounds faulted in again
    assert kept < 64 * 256 // 4  # not even a quarter of one round


def test_keep_freed_memory_is_idempotent() -> None:
    first = heap.keep_freed_memory()
    assert heap.keep_freed_memory() is first
    assert first is sys.platform.startswith("linux")


@pytest.mark.parametrize("keep", [True, False, None])
@pytest.mark.timeout(30)
def test_stream_source_sets_it_at_start_only_when_asked(
    keep: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(source_module.heap, "keep_freed_memory", lambda: calls.append(1) or True)
    # None: the default, which leaves the process's malloc as it is
    source = StreamSource() if keep is None else StreamSource(keep_freed_memory=keep)
    assert calls == []  # nothing before start
    source.start(FIFOBuffer(4), 0, 1)
    try:
        assert calls == ([1] if keep is True else [])
    finally:
        source.stop()
