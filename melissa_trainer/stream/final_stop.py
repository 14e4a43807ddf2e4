"""A torchrun restart after a final stop: the failed attempt's stop records, read by the
restarted attempt before it sets anything up, saying whether there is anything to
restart.

torchrun (``accelerate launch --max_restarts N``) restarts a failed run whatever made
it fail. A stop the record marks final whatever restarts are left (`FINAL_CODES`:
``nonfinite``, a sample holding NaN or Inf under ``nonfinite="fail"``; `stop_record`'s
docstring) is the data's, not the run's: the restart runs the same command from the
last checkpoint, which precedes the sample, takes it again and stops on it again, after
retraining what followed the checkpoint; and its solvers were told the stop is final
(they do not follow it). `read_final_stop` finds such a record in the rendezvous
directory on a restart, so that the restarted attempt ends at once (`trainer.final_restart`),
leaving the record as it is.

Which records: ``rank_0.json`` .. ``rank_{W-1}.json`` (``WORLD_SIZE``), marked stopped,
with a valid record (`stop_record_read.parse_record`). Every rank reads the same files,
written before torchrun restarted the run, so every rank decides alike. A record is
taken as the failed attempt's only when every rank's file names its run: a file of
another run (an earlier launch's, a rank that failed before it published) makes the
directory ambiguous, and the restart goes on as before (a record of another launch
must not stop this one). A record of another launch (`launch_identity.is_ours`: its
``launch`` is not this one's, as when this launch's first attempt failed before any
receiver published, leaving an earlier launch's records) decides nothing either, even
when every file names one run. A first attempt, or a worker not run by torchrun: nothing (a
record there is another launch's; a user's resume by hand is never refused here).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from melissa_trainer.stream.launch_identity import is_ours
from melissa_trainer.stream.stop_record import RECORD_KEY, StopReason
from melissa_trainer.stream.stop_record_read import parse_record

__all__ = ["FINAL_CODES", "FinalStop", "read_final_stop"]

#: the codes after which no restart may resume, whatever restarts are left (the stop is
#: the data's: `stop_record`'s docstring); ``end``, ``stopped`` and an ``error`` with no
#: restart left are final for clients, but a restart after them is the command's choice
#: (one without ``--resume_from_checkpoint`` starts afresh, as another run)
FINAL_CODES = ("nonfinite",)


@dataclass(frozen=True)
class FinalStop:
    """A final stop of the failed attempt: the rank whose record says it, its file, and
    the record's reason."""

    rank: int
    path: Path
    reason: StopReason
    #: torchrun's restart count of this attempt, and its ``--max_restarts``
    attempt: int
    most: int

    def words(self) -> str:
        """The restarted attempt's one line: why it does not train, and what to do."""
        message = (self.reason.message.splitlines() or [""])[0][:200]
        return (
            f"restart {self.attempt} of {self.most} by the launcher does not train: the "
            f"failed run stopped for good ({self.reason.code}: {message}; the stop record of "
            f"rank {self.rank} in {self.path}), and a restart runs the same command on the "
            f"same data from the last checkpoint, which would stop again. Fix the data or the "
            f"simulation (or refuse such samples: ReceiverConfig(nonfinite='refuse')), then "
            f"resume by hand with --resume_from_checkpoint latest"
        )


def read_final_stop(
    directory: str | os.PathLike[str] | None, environ: Mapping[str, str] | None = None
) -> FinalStop | None:
    """The failed attempt's final stop in the rendezvous `directory`, on a torchrun
    restart (`environ`, default `os.environ`: ``TORCHELASTIC_RUN_ID``,
    ``TORCHELASTIC_RESTART_COUNT`` above 0, ``WORLD_SIZE``); None when this is no
    restart, `directory` is None, a record there is another launch's, or no record
    there says a `FINAL_CODES` stop of the run every rank's file names (module
    docstring). Never raises for the files."""
    env = os.environ if environ is None else environ
    if directory is None or "TORCHELASTIC_RUN_ID" not in env:
        return None
    try:
        attempt = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
        most = int(env.get("TORCHELASTIC_MAX_RESTARTS", "0"))
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        return None
    if attempt <= 0:
        return None
    runs: set[object] = set()
    found: FinalStop | None = None
    for rank in range(max(world, 1)):
        path = Path(directory) / f"rank_{rank}.json"
        try:
            entry = json.loads(path.read_text())
        except FileNotFoundError:
            continue
        except (OSError, ValueError):
            return None  # (unreadable: not known to be this run's, nothing decided)
        if not isinstance(entry, dict):
            return None
        record = entry.get(RECORD_KEY)
        if isinstance(record, dict) and not is_ours(record):
            return None  # (another launch's record: nothing of this one is decided by it)
        runs.add(entry.get("run_id", record.get("run_id") if isinstance(record, dict) else None))
        if entry.get("stopped") is not True or record is None:
            continue
        try:
            reason = parse_record(record).reason
        except (ValueError, TypeError, KeyError):
            continue
        if found is None and reason.code in FINAL_CODES:
            found = FinalStop(rank, path, reason, attempt, most)
    return found if len(runs) == 1 else None
