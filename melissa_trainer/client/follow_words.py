"""The words of a client that gave up on a receiver gone, then waited for a restarted
(or resumed) trainer to publish in its rendezvous, and none did: `follow_gave_up`, which
`following` calls for a close's error and a blocked send's (`send_errors`).

Contract: `follow_gave_up` completes the error's message in place (its type and
traceback kept, so a caller catching `DeliveryFailed` or `TimeoutError` still does):
what the error said, then the whole wait, the bound that ended it
(`ClientTuning.follow_timeout`) and what to do: resume the trainer and run the
simulation again (a preempted trainer's stop record: a resume was due), or run it again
(`gave_up.run_again`). Imports the standard library and `gave_up` only.
"""

from __future__ import annotations

import time

from melissa_trainer.client.gave_up import Preempted, given_to_a_worker, rerun_words, run_again

__all__ = ["follow_gave_up"]


def follow_gave_up(
    error: BaseException,
    waited: float,
    follow_timeout: float | None,
    rendezvous: str,
    started: float,
    simulation_id: int,
    announced: str | None = None,
) -> None:
    """Complete `error`'s message (in place: its type and traceback kept) once a client
    gave up on a receiver gone, then waited `waited` seconds for a restarted trainer to
    publish in `rendezvous` and none did: the whole wait (from `started`, the
    `time.monotonic()` the close or the send began) and what to do (`run_again`,
    or resume the trainer within `follow_timeout`). `announced`: the run the error said
    was to be followed at once (`Following.seen`), gone from the rendezvous when read
    again to follow it: said first, and the wait is for another."""
    total = f": {time.monotonic() - started:.0f} s in all"
    bound = (
        "no bound" if follow_timeout is None else f"ClientTuning.follow_timeout={follow_timeout} s"
    )
    said = str(error) if str(error).endswith(".") else f"{error}."
    if announced is not None:
        said += (
            f" But run {announced} was gone from {rendezvous} when the client came to follow "
            "it (its files marked stopped, or being rewritten: a trainer that stopped as it "
            "started?): not followed."
        )
    if isinstance(error, Preempted):  # (its stop record said: a resume was due; a close's
        # `TrainerPreempted` or a blocked send's `send_wait.SendPreempted`)
        itself = " A simulation the launcher runs, it runs again itself."  # (a worker's: said)
        itself = "" if given_to_a_worker(simulation_id) else itself
        error.args = (
            f"{said} Then it waited {waited:.0f} s for the trainer to be resumed and publish "
            f"in {rendezvous}: no resume came within {bound}{total}. Resume it "
            f"(--resume_from_checkpoint latest), then {rerun_words(simulation_id)}: the "
            f"trainer keeps the steps it holds and takes the others, each once.{itself} "
            f"A trainer resumed while a client still "
            f"waits (disconnected_timeout, then follow_timeout) is followed, and nothing is "
            f"lost.",
        )
        return
    a = "another" if announced is not None else "a"
    error.args = (
        f"{said} Then it waited {waited:.0f} s for {a} restarted trainer to publish in "
        f"{rendezvous} ({bound}), and none did{total}. {run_again(simulation_id)} A trainer "
        f"resumed while a client still waits (disconnected_timeout, then follow_timeout) is "
        f"followed, and nothing is lost.",
    )
