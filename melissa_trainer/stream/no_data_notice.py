"""What rank 0 says once when training, in external mode, has waited for its first
sample (`no_data_notice`): the address its receiver listens on, what has arrived, how
the simulations find it, when the wait ends in an error and, resumed from a checkpoint,
the simulations it holds unfinished, with what to do about them.

Contract: pure functions of their arguments, returning the words (no logging, no state);
when the notice is due is `melissa_trainer.sources.first_data`'s, and `StreamSource`
logs it (`stream_source`, which also exports `no_data_notice` under its earlier path).
"""

from __future__ import annotations

from collections.abc import Sequence

from melissa_trainer.stream.receiver_config import ReceiverConfig

__all__ = ["no_data_notice"]


def no_data_notice(
    waited: float,
    endpoint: str | None,
    world: int,
    config: ReceiverConfig,
    messages: int,
    resumed: tuple[Sequence[int], int] | None = None,
) -> str:
    """What rank 0 says when training has waited `waited` s for its first sample in
    external mode: the `endpoint` its receiver listens on (one of `world` ranks'), what
    came (`messages` since it started), how the simulations find it (`config`), and when
    the wait ends in an error. `resumed`: the simulations a checkpoint resumed from holds
    unfinished and how many it holds finished, named with what to do (None: a first
    start)."""
    ranks = f" (rank 0 of {world}: each rank listens on its own)" if world > 1 else ""
    if messages == 0:
        came = "no simulation has connected and sent anything"
    else:
        came = (
            f"{messages} message{'s' if messages != 1 else ''} came, no complete sample "
            f"(the receiver's warnings say which were refused, and why)"
        )
    if config.rendezvous_dir is not None:
        find = f"MELISSA_TRAINER_RENDEZVOUS={config.rendezvous_dir}"
    else:
        find = f"MELISSA_TRAINER_ENDPOINTS={endpoint}" + (",..." if world > 1 else "")
    stall = config.stall_timeout
    ends = (
        "it waits forever (stall_timeout=None)"
        if stall is None
        else f"with no message for {stall:g} s it stops with an error "
        f"(ReceiverConfig.stall_timeout)"
    )
    return (
        f"no data yet, {waited:.0f} s after the receiver started listening on "
        f"{endpoint}{ranks}: {came}. Training waits for the simulations you start "
        f"(external mode): start each with {find} and a distinct "
        f"MELISSA_TRAINER_SIMULATION_ID; from another host, bind an address it reaches "
        f"(ReceiverConfig.bind, advertise_host). Training goes on when data comes; {ends}."
        f"{_resumed_note(resumed, config.expected_simulations)} Said once."
    )


def _resumed_note(resumed: tuple[Sequence[int], int] | None, expected: int | None) -> str:
    """The notice's sentence on a resume: the simulations to run again (or "")."""
    if resumed is None:
        return ""
    unfinished, finished = resumed
    of = "" if expected is None else f" (of the {expected} expected)"
    done = f"{finished} finished simulation{'' if finished == 1 else 's'}{of}"
    if not unfinished:
        return f" Resumed from a checkpoint, which holds {done}."
    ids = ", ".join(str(s) for s in unfinished[:20]) + (", ..." if len(unfinished) > 20 else "")
    return (
        f" Resumed from a checkpoint, which holds {done} and "
        f"{len(unfinished)} unfinished: {ids}. A solver still running follows the "
        f"restarted trainer by itself (its replay window: the Python, C and Fortran "
        f"clients); one that ended or failed meanwhile does not: run each of those again, "
        f"with the same MELISSA_TRAINER_SIMULATION_ID and parameters (the steps the "
        f"checkpoint holds are dropped as duplicates, the others trained on once)."
    )
