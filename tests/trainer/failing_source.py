"""A `Source` that fails part-way (`Failing`): what the tests of a trainer whose source
fails share (test_failure_checkpoint.py: the checkpoint at a failure and its resume
note; test_source_failure_said.py: the words of the failure)."""

from __future__ import annotations

from helpers import linear_samples

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources.source import Source, SourceError

__all__ = ["Failing"]


class Failing(Source):
    """Puts 16 samples, then fails with `SourceError("the producer failed")` once
    training has drawn them all (two steps of 8): with `cause` as its ``__cause__``
    (None: none), and `note` as its ``resume_note`` (what a resume does; "" none)."""

    def __init__(self, cause: BaseException | None = None, note: str = "") -> None:
        self.cause, self.note = cause, note
        self.buffer: Buffer | None = None

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        self.buffer = buffer
        for sample in linear_samples(16):
            buffer.put(sample)

    def wait_for(self, n_samples: int, timeout: float) -> None:
        assert self.buffer is not None
        if self.buffer.stats().got >= 16:
            error = SourceError("the producer failed")
            error.resume_note = self.note
            raise error from self.cause

    def stop(self) -> None:
        pass
