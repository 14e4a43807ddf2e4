"""Rank 0's word to every rank that its study kills the simulations.

Every rank hears the kills (each client rank of a simulation connects to every training
rank's receiver), but only rank 0 runs the launcher, and a rank k's own `Study.stop` may
come after rank 0's kills: a rank's hooks run later (at a preemption, after the last
collective), or rank 0 stopped alone (its study failed) while rank k still trains. So
rank 0 also says it in the rendezvous directory (`announce_study_stops`: a file
``study_stops`` holding the run id, written before the kills), and every rank's watch
reads that file when it reads a close whose BYE it has not read (`study_stops_announced`:
a ``stat`` and a read per such close, rare; none once it is seen, nothing on the data
path). A file, not a collective before the kills (a failed or a late rank would hold
the stop, or hang it) nor a judgment deferred on the other ranks (no delay is long
enough for a late rank, and a solver that died on its own in that delay would pass as
the study's): a kill's close comes after the file was written, so the rank that reads
it finds it, with no wait on any rank. On a shared file system whose clients cache a
missing name (NFS), a rank on another node may not see it at once: that close is then
warned of, as before. The run id in the file keeps an earlier run's file (a resume into
the same output directory) from silencing this run's warnings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path

__all__ = [
    "STUDY_STOPS_FILE",
    "announce_study_stops",
    "clear_study_stops",
    "study_stops_announced",
]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: rank 0's word to every rank that its study kills the simulations (module docstring)
STUDY_STOPS_FILE = "study_stops"


def announce_study_stops(directory: str | os.PathLike[str] | None, run_id: str | None) -> None:
    """Write ``{directory}/study_stops`` holding `run_id` (``"-"`` when None): every
    receiver of that run (`study_stops_announced`) takes the closes it reads from now on
    as the study's. Written aside then renamed (never read half-written). Never raises:
    an OSError is logged (the other ranks then warn of the kills, as before the file).
    Nothing without a `directory`."""
    if directory is None:
        return
    path, tmp = Path(directory), None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{STUDY_STOPS_FILE}.", dir=path)
        with os.fdopen(fd, "w") as f:
            f.write(run_id or "-")
        os.replace(tmp, path / STUDY_STOPS_FILE)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                Path(tmp).unlink(missing_ok=True)
        logger.info(
            "could not tell the other ranks that the study stops (%s): they may "
            "warn of the simulations it kills as of data lost",
            exc,
        )


def clear_study_stops(directory: str | os.PathLike[str]) -> None:
    """Remove an earlier run's ``study_stops`` (rank 0, before it launches anything)."""
    try:
        (Path(directory) / STUDY_STOPS_FILE).unlink(missing_ok=True)
    except OSError as exc:  # (its run id still tells it apart)
        logger.debug("removing %s: %s", STUDY_STOPS_FILE, exc)


def study_stops_announced(directory: str | os.PathLike[str] | None, run_id: str | None) -> bool:
    """Whether rank 0 said that the study of run `run_id` kills its simulations
    (`announce_study_stops`); False without a `directory`, and when the file is missing,
    unreadable or another run's."""
    if directory is None:
        return False
    try:
        return (Path(directory) / STUDY_STOPS_FILE).read_text() == (run_id or "-")
    except (OSError, UnicodeDecodeError):
        return False
