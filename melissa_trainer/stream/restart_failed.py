"""A restarted attempt that fails before its receiver publishes: the stop record its
rank's rendezvous file still holds made truthful.

Under torchrun (``accelerate launch --max_restarts N``) a failed run's record says
``error`` with ``restarts_left`` (`stop_record`), and its clients wait up to their
``follow_timeout`` for the restarted run. A restarted attempt that fails before its
receiver publishes (its set-up, its resume, its bind) writes no record of its own (its
receiver marks only the file it published: `Receiver.stop`), so the failed attempt's
record keeps promising a restart: with none left (the last attempt failed), a promise
nobody keeps, and every waiting client waits its whole ``follow_timeout``.

The attempt that fails is the one that knows: `note_restart_failed`, on its early
failure paths (`Source.note_start_failed`: `trainer.starting`, from `train()`'s start
and from the trainer's set-up, its `Accelerator`, process group and output directory;
`trainer.final_restart`, a restart after a stop for good), rewrites the record of its
rank's file, if it promises a resume (`stop_record.resumable`) beyond what is left, as
``error`` with this attempt's ``restarts_left`` (0 when none is left, or when the
restart would not resume: `Source.note_restarts_resume`) and a message opening with
`RESTART_FAILED` and closing with `NO_RESTART` when none is left (`NO_RESUME` when some
are, none resuming): the words both clients say (they quote the record's message).
A first attempt (no restart) or a worker
not run by torchrun leaves the file alone: a record there is another launch's.

A worker killed outright (no Python runs: torchrun's SIGTERM to a peer during its
set-up, before `train()` installs its handlers) writes nothing: its record would keep
the failed attempt's promise. A Python client reads every rank's file and gives up on
the first final one (`client.stopped.StopRecords.for_good`), but a `Predictor`'s
lookup reads ``rank_0.json`` alone (`client.predict_lookup`): a rank 0 killed so would
keep telling it that a restart follows. A failure of any rank ends the whole attempt
(torchrun stops every worker), so the rank that fails rewrites every rank's file of the
launch (``WORLD_SIZE``) that promises more than is left, its own and its peers'
(each a rename of a file still marked stopped, naming the endpoint read:
`endpoints.mark_stopped`; a peer's receiver that published meanwhile is left alone).
A record of another launch (`launch_identity.is_ours`: an earlier launch's, left there
when this launch's first attempt failed before any receiver published) is left alone:
this launch's failure is no fact about that launch's stop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.launch_identity import is_ours
from melissa_trainer.stream.launch_restarts import restarts_left
from melissa_trainer.stream.stop_record import MAX_MESSAGE, RECORD_KEY, resumable
from melissa_trainer.stream.stop_record_read import parse_record

__all__ = ["NO_RESTART", "NO_RESUME", "RESTART_FAILED", "note_restart_failed"]

#: how the rewritten record's message opens ({attempt}: torchrun's restart count, {most}:
#: its --max_restarts, {rank}: the rank whose receiver never started)
RESTART_FAILED = (
    "the restarted run (restart {attempt} of {most}) failed before its receiver of rank "
    "{rank} started"
)
#: how it closes when no restart is left: the run is not coming back on its own
NO_RESTART = "no restart left: the launcher gave up, the run is not coming back on its own"
#: how it closes when restarts are left but none resumes the run (`resumes` False: a
#: command without ``resume_from_checkpoint``, a stop for good, `trainer.final_restart`)
NO_RESUME = "no restart resumes it: the run is not coming back on its own"


def note_restart_failed(
    directory: str | os.PathLike[str],
    rank: int,
    error: BaseException,
    resumes: bool = True,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Rewrite the stop record of ``{directory}/rank_{r}.json``, of this rank and of every
    peer (r below ``WORLD_SIZE``), after this restarted attempt of rank `rank` failed
    with `error` before its receiver published (module docstring); `resumes`: whether a
    further restart resumes (else none is promised); `environ`: torchrun's variables
    (default `os.environ`). Returns whether this rank's record was rewritten. Never
    raises for the files: one missing, not stopped, without a valid record, or
    promising no more than is left is left as it is (a write that fails is said at
    WARNING by `mark_stopped`)."""
    env = os.environ if environ is None else environ
    left = restarts_left(env)
    try:
        attempt = int(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
        most = int(env.get("TORCHELASTIC_MAX_RESTARTS", "0"))
        world = int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        return False
    if left is None or attempt <= 0:
        return False  # (not torchrun, or a first attempt: the file is another launch's)
    opening = RESTART_FAILED.format(attempt=attempt, most=most, rank=rank)
    tail = NO_RESTART if not left else f"{left} restart(s) left" if resumes else NO_RESUME
    left = left if resumes else 0
    # (the outcome first: a client quoting the first line, 200 characters, says it)
    said = f"{opening}; {tail} ({type(error).__name__}: {error})"
    mine = _rewrite(directory, rank, said, left)
    for peer in range(world):  # (the attempt is over on every rank: `rank_0.json` too)
        if peer != rank:
            _rewrite(directory, peer, said, left)
    return mine


def _rewrite(directory: str | os.PathLike[str], rank: int, said: str, left: int) -> bool:
    """``rank_{rank}.json``'s record rewritten as ``error`` saying `said` with `left`
    restarts left, if it promises more (`note_restart_failed`); whether it was."""
    path = Path(directory) / f"rank_{rank}.json"
    try:
        entry = json.loads(path.read_text())
        record = entry[RECORD_KEY]
        reason = parse_record(record).reason
    except (OSError, ValueError, TypeError, KeyError):
        return False
    if entry.get("stopped") is not True or not isinstance(entry.get("endpoint"), str):
        return False
    if not is_ours(record):
        return False  # (another launch's record: this attempt's failure is no fact of it)
    if not resumable(reason) or (reason.code == "error" and (reason.restarts_left or 0) <= left):
        return False  # (it promises nothing more than is left: true as it stands)
    before = f" (the failed run's record said {reason.code}: {reason.message})"
    message = (said + before)[:MAX_MESSAGE]
    rewritten: dict[str, Any] = {"code": "error", "message": message, "restarts_left": left}
    mark_stopped(directory, rank, entry["endpoint"], {**record, "reason": rewritten})
    return True
