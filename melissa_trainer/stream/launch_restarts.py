"""How many more times the launcher restarts this worker's run if it fails: torchrun
(and ``accelerate launch``) with ``--max_restarts N`` restarts a failed worker group up
to N times, telling each worker ``TORCHELASTIC_MAX_RESTARTS`` (N) and
``TORCHELASTIC_RESTART_COUNT`` (the restarts so far). A stop record of ``error`` says it
(`stop_record`'s ``restarts_left``): a client then waits for the restarted run, which
resumes, rather than give up."""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["NO_RESTART_FOLLOWS", "restarts", "restarts_left", "with_no_restart"]


#: what a record that promises a resume (``preempted``, ``broken``) adds under torchrun
#: with no restart left (`restarts_left` 0: ``--max_restarts`` spent, or 0, a plain
#: multi-process ``accelerate launch``), where the trainer cannot tell torchrun's teardown
#: after a peer's death (no restart follows) from a preemption (which a person or the
#: scheduler's requeue resumes): trainer.failing's stop on a peer gone with no note
NO_RESTART_FOLLOWS = (
    "no restart left: torchrun restarts nothing, and a resumed trainer follows only if "
    "a person (or a scheduler's requeue) resumes it"
)


def restarts(environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """(restarts left, ``--max_restarts``) of this worker's launch, of `environ` (default
    `os.environ`): N - count, at least 0, and N; None when this worker was not started by
    torchrun or either variable is not a decimal integer of at least 0 (the worker does
    not know)."""
    env = os.environ if environ is None else environ
    if "TORCHELASTIC_RUN_ID" not in env:
        return None
    try:
        most = int(env["TORCHELASTIC_MAX_RESTARTS"])
        done = int(env["TORCHELASTIC_RESTART_COUNT"])
    except (KeyError, ValueError):
        return None
    if most < 0 or done < 0:
        return None
    return max(most - done, 0), most


def restarts_left(environ: Mapping[str, str] | None = None) -> int | None:
    """N - count from `environ` (default `os.environ`), at least 0; None when this worker
    was not started by torchrun or either variable is not a decimal integer (the worker
    does not know: the record says nothing). `restarts`' first."""
    known = restarts(environ)
    return None if known is None else known[0]


def with_no_restart(message: str, environ: Mapping[str, str] | None = None) -> str:
    """`message`, a ``preempted`` or ``broken`` record's (which promise a resume), with
    ``"; "`` and `NO_RESTART_FOLLOWS` after it under torchrun with no restart left
    (`restarts_left` 0, of `environ`); as it is otherwise (restarts left: torchrun
    restarts the run; not torchrun: nothing known)."""
    return f"{message}; {NO_RESTART_FOLLOWS}" if restarts_left(environ) == 0 else message
