"""What the launcher tells a job about how it is watched, checked when its `Client`
starts (`check_launched`): ``MELISSA_TRAINER_ATTEMPT`` (`config.check_attempt`) and
``MELISSA_TRAINER_SILENCE_S`` (`check_silence`), the shortest silence the launcher
allows the simulation before killing it as hung, by which a rerun paces its sign of
life (`melissa_trainer.client.rerun`); and what Slurm tells a launched job,
``SLURM_RESTART_COUNT`` (`check_restart_count`): a requeued batch job runs the same
script again, its attempt unchanged, and only this says that it is a rerun
(`requeued`). Standard library only."""

from __future__ import annotations

import os

from melissa_trainer.client.config import check_attempt

__all__ = [
    "ENV_RESTART_COUNT",
    "ENV_SILENCE",
    "check_launched",
    "check_restart_count",
    "check_silence",
    "requeued",
]

#: Set by the launcher with ``MELISSA_TRAINER_ATTEMPT``: the shortest silence (seconds)
#: it lets this simulation keep (`check_silence`).
ENV_SILENCE = "MELISSA_TRAINER_SILENCE_S"
#: Set by Slurm in a batch job it requeued (1 at the first requeue; unset in its first
#: run): `check_restart_count`.
ENV_RESTART_COUNT = "SLURM_RESTART_COUNT"


def check_silence() -> float | None:
    """``$MELISSA_TRAINER_SILENCE_S``, the shortest silence in seconds the launcher
    allows this simulation (the smaller of its start-up allowance and its
    `simulation_timeout`: `launcher.silence.SilenceClock.shortest`), or None when unset
    or blank (no bound, or not launched).

    The rule (the C client's, clients/c/src/rerun.c mt_check_silence, word for word):
    after `str.strip`, 1 to 9 ASCII digits 0-9, optionally a dot and 1 to 9 more, above
    zero. Anything else is refused naming the variable and its value: read as unset, a
    rerun would pace its sign of life for a bound the launcher does not have, and be
    killed as hung.

    Raises:
        ValueError: the variable is set to something else.
    """
    text = os.environ.get(ENV_SILENCE)
    if text is None or not text.strip():
        return None
    number = text.strip()
    whole, dot, fraction = number.partition(".")
    good = all(
        0 < len(part) <= 9 and part.isascii() and part.isdigit()
        for part in ((whole, fraction) if dot else (whole,))
    )
    if not good or float(number) <= 0:
        raise ValueError(
            f"{ENV_SILENCE}={text!r} is not a number of seconds: the launcher sets it (the "
            "shortest silence it allows the simulation), in ASCII digits 0-9 with an "
            "optional fraction, above 0; unset it to start the solver by hand"
        )
    return float(number)


def check_restart_count() -> int:
    """``$SLURM_RESTART_COUNT`` in a job the launcher started (``MELISSA_TRAINER_ATTEMPT``
    set): how many times Slurm requeued its batch job (checked on the real one-node
    cluster: unset in the first run, 1 after one ``scontrol requeue``,
    tests/launcher/backends/test_slurm_requeued_skip.py); 0 when unset or blank, and in
    a job the launcher did not start (a solver started by hand in a job of its own: not
    read).

    The rule (the C client's, clients/c/src/rerun.c mt_check_restart_count, word for
    word): after `str.strip`, ASCII digits 0-9 only, below 2**31, as the attempt's.
    Anything else is refused naming the variable and its value: read as 0, a requeued
    run would send every step again.

    Raises:
        ValueError: the variable is set to something else in a launched job.
    """
    text = os.environ.get(ENV_RESTART_COUNT)
    if check_attempt() < 0 or text is None or not text.strip():
        return 0
    digits = text.strip()
    number = digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= 10
    if not number or int(digits) >= 2**31:
        raise ValueError(
            f"{ENV_RESTART_COUNT}={text!r} is not a restart count: Slurm sets it in a "
            "batch job it requeued (1 at the first requeue), in ASCII digits 0-9 below "
            "2**31, and a simulation the launcher started reads it to skip the steps its "
            "receivers hold; do not set it by hand"
        )
    return int(digits)


def requeued() -> bool:
    """Whether this launched job is a run of its batch job that Slurm requeued
    (`check_restart_count` above 0): a rerun for the HELD skip (`client.rerun`), though
    its attempt (``MELISSA_TRAINER_ATTEMPT``) is its first run's. Only the skip reads
    it: anything keyed on the attempt is not."""
    return check_restart_count() > 0


def check_launched() -> None:
    """Check the three variables (`Client`, at its start: a launcher's variable
    mistyped is said then, not at a rerun).

    Raises:
        ValueError: one is set to something it cannot be.
    """
    check_attempt()
    check_silence()
    check_restart_count()
