"""The ``MELISSA_TRAINER_*`` environment variables melissa-trainer reads, and a misspelt
one named.

A variable of the prefix that nothing reads is a misspelling, as a rule: a
``MELISSA_TRAINER_RENDEVOUS`` left the client with "no receiver endpoint", naming the
two variables it reads but not the one set (trial F4), and a misspelt optional one
(``MELISSA_TRAINER_REPLAY_BYTE``) was ignored without a word. `unknown_note` names each
such variable with the known one it is closest to (difflib); the client logs it on its
rank 0 only, once per process (`warn_unknown_once`: every rank of an MPI job has the same
environment, and a thousand ranks would log a thousand copies; the C client's
`mt_env_warn_unknown` likewise), and every rank puts it in its "no receiver endpoint" and
"no simulation id" errors, where it is the likely cause.

`KNOWN` is the one list: tests/client/test_env_names.py checks it against every
``MELISSA_TRAINER_*`` name in the package's code and in the C client's sources.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["KNOWN", "PREFIX", "unknown_note", "unknown_variables", "warn_unknown_once"]

PREFIX = "MELISSA_TRAINER_"

#: every variable of the prefix that melissa-trainer (Python package and C client) reads
KNOWN = frozenset(
    {
        "MELISSA_TRAINER_ATTEMPT",  # set by the launcher: the attempt's number
        "MELISSA_TRAINER_ENDPOINTS",  # the receivers' endpoints
        "MELISSA_TRAINER_KEY",  # their CURVE public key
        "MELISSA_TRAINER_LAUNCHER",  # worker mode: the launcher's endpoint
        "MELISSA_TRAINER_LAUNCHER_KEY",  # worker mode: its CURVE key
        "MELISSA_TRAINER_LAUNCHER_PROCESS",  # worker mode: its process (pid, start, ...)
        "MELISSA_TRAINER_OUTPUT_LOCK",  # the trainer's: "off" runs without the lock
        "MELISSA_TRAINER_PARAMETERS",  # the simulation's parameters (JSON)
        "MELISSA_TRAINER_RENDEZVOUS",  # the trainer's rendezvous directory
        "MELISSA_TRAINER_REPLAY_BYTES",  # the replay window
        "MELISSA_TRAINER_RUN_ID",  # the trainer's run
        "MELISSA_TRAINER_SERVE_ENDPOINTS",  # the serving endpoints (predictions)
        "MELISSA_TRAINER_SERVE_KEY",  # their CURVE key
        "MELISSA_TRAINER_SILENCE_S",  # set by the launcher: its shortest silence bound
        "MELISSA_TRAINER_SIMULATION_ID",  # the simulation's id
        "MELISSA_TRAINER_WORKER",  # worker mode: this worker's slot
    }
)

_told = False  # `warn_unknown_once`: said in this process


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables of `PREFIX` in `environ` (default: the process's) that are not
    `KNOWN`, sorted."""
    env = os.environ if environ is None else environ
    return sorted(k for k in env if k.startswith(PREFIX) and k not in KNOWN)


def unknown_note(environ: Mapping[str, str] | None = None) -> str:
    """One sentence naming each ``MELISSA_TRAINER_*`` variable set that is not known,
    with "did you mean ...?" where a known one is close; the empty string if none."""
    unknown = unknown_variables(environ)
    if not unknown:
        return ""
    import difflib  # (only with a variable to name: not at every simulation's start)

    # compared without the prefix, which every name shares: with it, any name is close
    # to some known one (MELISSA_TRAINER_FOO to MELISSA_TRAINER_KEY)
    known = sorted(k[len(PREFIX) :] for k in KNOWN)
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name[len(PREFIX) :], known, n=1, cutoff=0.7)
        parts.append(f"{name} (did you mean {PREFIX}{close[0]}?)" if close else name)
    verb = "is" if len(parts) == 1 else "are"
    return f"{', '.join(parts)} {verb} set, which melissa-trainer does not read"


def warn_unknown_once(rank: int = 0) -> None:
    """Log `unknown_note` at WARNING once per process, if there is one, on client rank
    0 only (`rank`: the client's rank in its simulation; another says nothing)."""
    global _told
    if _told or rank != 0:
        return
    note = unknown_note()
    if note:
        _told = True
        import logging  # (as `closing.client_logger`: not at every simulation's start)

        logging.getLogger("melissa_trainer.client.client").warning("%s", note)
