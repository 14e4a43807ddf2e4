"""Whether the trainer that wrote a rendezvous file still runs (a trainer killed with
``kill -9`` leaves its ``rank_N.json`` files behind, not marked stopped).

A receiver publishes, beside its endpoint, its process: ``"pid"``, ``"pid_start"`` (its
start time, `common.process_alive`: a pid reused by another process has another) and
``"pid_scope"`` (``"BOOT PIDNS"``: this machine's boot id and the pid namespace, in
which alone the pid names that process). A client in the
same scope that finds the process gone (no such pid, a zombie, or a pid that another
process holds now) does not take the file: `endpoints.fetch_rendezvous` waits for a
trainer to publish there again, as for a file marked stopped (a trainer being resumed
rewrites the files: a client started meanwhile is not refused), and says why
(`gone_words`). Another machine or pid namespace, no ``/proc``, or an older trainer's
file without them: the pid is not checked (`trainer_runs` None); its endpoint is
(`trainer_listens`: a killed trainer's port refuses the connection). The C client
reads the same keys (clients/c/src/trainer_alive.c). No state.
"""

from __future__ import annotations

import os
from typing import Any

from melissa_trainer.common.process_alive import pid_scope, runs, start_time

#: the rendezvous file's keys (`published_process`)
PID_KEY, START_KEY, SCOPE_KEY = "pid", "pid_start", "pid_scope"


def published_process() -> dict[str, Any]:
    """What a receiver writes in its rendezvous file: its pid, start time and scope
    (nothing where ``/proc`` does not say)."""
    pid, scope = os.getpid(), pid_scope()
    start = start_time(pid)
    if scope is None or start is None:
        return {}
    return {PID_KEY: pid, START_KEY: start, SCOPE_KEY: scope}


def trainer_runs(entry: dict[str, Any]) -> bool | None:
    """Whether the trainer that wrote rendezvous `entry` runs: True, False (gone: its pid
    does not run, is a zombie, or runs since another time: reused), or None when it
    cannot be told here (another scope, no ``/proc``, an entry without the keys)."""
    pid, start, scope = entry.get(PID_KEY), entry.get(START_KEY), entry.get(SCOPE_KEY)
    if not (isinstance(pid, int) and isinstance(start, int) and isinstance(scope, str)):
        return None
    if scope != pid_scope():
        return None
    return runs(pid, start)


def trainer_gone(entry: dict[str, Any]) -> int | None:
    """The pid of the trainer that wrote rendezvous `entry` when it is known gone: the
    entry's scope is this process's, and its pid does not run, is a zombie, or runs since
    another time (reused). None otherwise, also when it cannot tell."""
    return entry[PID_KEY] if trainer_runs(entry) is False else None


def gone_words(pid: int) -> str:
    """Why a file of a gone trainer is not taken, after ``rank_N.json: ``."""
    return (
        f"its trainer (pid {pid}, on this machine) is gone without marking it stopped "
        "(killed: kill -9, out of memory?): start the trainer first (resumed: "
        "--resume_from_checkpoint latest), or point MELISSA_TRAINER_RENDEZVOUS at the "
        "running trainer's {output_dir}/rendezvous"
    )
