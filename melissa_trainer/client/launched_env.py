"""What the launcher tells a job about how it is watched, checked when its `Client`
starts (`check_launched`): ``MELISSA_TRAINER_ATTEMPT`` (`config.check_attempt`) and
``MELISSA_TRAINER_SILENCE_S`` (`check_silence`), the shortest silence the launcher
allows the simulation before killing it as hung, by which a rerun paces its sign of
life (`melissa_trainer.client.rerun`). Standard library only."""

from __future__ import annotations

import os

from melissa_trainer.client.config import check_attempt

__all__ = ["ENV_SILENCE", "check_launched", "check_silence"]

#: Set by the launcher with ``MELISSA_TRAINER_ATTEMPT``: the shortest silence (seconds)
#: it lets this simulation keep (`check_silence`).
ENV_SILENCE = "MELISSA_TRAINER_SILENCE_S"


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


def check_launched() -> None:
    """Check both variables (`Client`, at its start: a launcher's variable mistyped is
    said then, not at a rerun).

    Raises:
        ValueError: one is set to something it cannot be.
    """
    check_attempt()
    check_silence()
