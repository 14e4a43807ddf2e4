"""How a receiver's failure is said (`ingest_loop.IngestLoop`, from its thread and its
pumps): the words of the `SourceError` (`failure_words`), the cause chained to it
(`failure_cause`), and the log line (`log_failure`); a study that ended lacking data
(`StudyLacksError`) is said once, in its own words, without a traceback.
"""

from __future__ import annotations

import logging

from melissa_trainer.sources.ingest_transform import IngestTransformError
from melissa_trainer.stream.nonfinite import NonFiniteDataError
from melissa_trainer.stream.study_end import StudyLacksError
from melissa_trainer.stream.watchdog import StallError

__all__ = ["failure_cause", "failure_words", "log_failure"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages


def failure_words(error: BaseException) -> str:
    """An error for a message: a stall's, non-finite data's or the ingest transform's
    own words (each names what failed), anything else as its repr."""
    own = StallError | NonFiniteDataError | IngestTransformError | StudyLacksError
    return str(error) if isinstance(error, own) else repr(error)


def failure_cause(error: BaseException) -> BaseException | None:
    """The cause to chain to the `SourceError` of `error`: none for a study that ended
    lacking data (its message says it all: the trainer says it in one line, with no
    traceback, `trainer.ending.source_failed`), else `error` itself."""
    return None if isinstance(error, StudyLacksError) else error


def log_failure(rank: int, error: BaseException) -> None:
    """Log the receiver's failure, but not a study that ended lacking data: its
    `SourceError` says it once (`failure_cause`)."""
    if not isinstance(error, StudyLacksError):
        logger.error("receiver of rank %d failed: %r", rank, error)
