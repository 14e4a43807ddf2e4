"""A torchrun restart of a run that stopped for good ends before its set-up.

torchrun (``accelerate launch --max_restarts N``) restarts a failed run whatever made it
fail, also a stop its record marks final (``nonfinite``: `stream.final_stop`). Such a
restart would form the process group, resume the last checkpoint, retrain from there
and stop on the same sample again, while its solvers, told the stop is final, do not
follow it. `refuse_final_restart`, first thing in `OnlineTrainer.__init__` (before the
`Accelerator` and its process group, the output directory's lock and any file
written), asks the source (`Source.final_stop`) and, when the failed attempt's stop was
final, says why in one ERROR line and raises `RestartAfterFinalStop`: uncaught, the
process exits with status 1 (the failed attempt's) and no traceback; every rank decides
alike from the same records, so none waits for a peer. The final record is left as it
is; a peer's that promises a restart (``error`` with restarts left: its trainer failed
on the peer's stop) is rewritten to promise none (`stream.restart_failed`, as a restart
that fails early does): a `Predictor` reads ``rank_0.json`` alone.
"""

from __future__ import annotations

import logging

from melissa_trainer.common.refusal import SaidOnRankZero, launch_rank
from melissa_trainer.sources.source import Source

__all__ = ["RestartAfterFinalStop", "refuse_final_restart"]

logger = logging.getLogger(__name__)


class RestartAfterFinalStop(RuntimeError, SaidOnRankZero):
    """Raised by `OnlineTrainer` on a torchrun restart whose failed attempt stopped for
    good (module docstring); its message is the ERROR line already logged. Uncaught, it
    ends the process with exit code 1 and no traceback; ``except RuntimeError`` catches
    it."""

    def __init__(self, words: str) -> None:
        super().__init__(words)
        self.code = 1  # (SystemExit's: the exit status, the failed attempt's)


def refuse_final_restart(source: object, output_dir: str) -> None:
    """Raise `RestartAfterFinalStop`, its words logged at ERROR, when `source` (a
    `Source`; anything else given as the train source: nothing) says that this torchrun
    restart follows a final stop (`Source.final_stop`, its records under `output_dir`'s
    rendezvous for a study)."""
    if not isinstance(source, Source):
        return
    words = source.final_stop(output_dir)
    if words is None:
        return
    logger.error("%s", words)
    refused = RestartAfterFinalStop(words)
    # a peer's record of the failed attempt may promise this restart (its ``error`` with
    # restarts left): made truthful, no restart resumes (the final record: as it is)
    source.note_restarts_resume(False)
    source.note_start_failed(launch_rank(), refused)
    raise refused
