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

With ``--max_restarts`` above 1, torchrun restarts each such attempt again (any failure
is restarted while restarts are left: no exit status ends the launch but every worker's
0, which would say it succeeded); the ERROR paragraph is said by the first of them on
each rank, and the later ones say a short line naming it (`final_said`).
"""

from __future__ import annotations

import logging
import os

from melissa_trainer.common.refusal import SaidOnRankZero, launch_rank
from melissa_trainer.sources.source import Source
from melissa_trainer.trainer.final_said import first_saying

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
    rank, attempt = launch_rank(), _restart_count()
    first = first_saying(rank, attempt)  # (said once per launch and rank: `final_said`)
    logger.error("%s", words if first == attempt else _again(attempt, first))
    refused = RestartAfterFinalStop(words)
    # a peer's record of the failed attempt may promise this restart (its ``error`` with
    # restarts left): made truthful, no restart resumes (the final record: as it is)
    source.note_restarts_resume(False)
    source.note_start_failed(rank, refused)
    raise refused


def _restart_count() -> int:
    """torchrun's restart count of this attempt (0 when not said)."""
    count = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return int(count) if count.isdigit() else 0


def _again(attempt: int, first: int) -> str:
    """A later attempt's line: the paragraph was said by restart `first`."""
    most = os.environ.get("TORCHELASTIC_MAX_RESTARTS", "?")
    return (
        f"restart {attempt} of {most} by the launcher does not train either: the failed "
        f"run stopped for good, as restart {first} said above (the same record); the "
        f"launcher restarts on any failure while restarts are left, and each ends so"
    )
