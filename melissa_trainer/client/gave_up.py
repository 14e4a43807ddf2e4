"""What a client says when it waits on its trainer or gives up on it: the parts of a
stop record (`StopSaid`) and the one sentence composed from them (`stop_sentence`), the
fix its errors end with (`run_again`; `rerun_words` in a worker, which has no simulation id
to set), and what a notice says it waits for (`waits_for`).

One implementation for the close (`closing`, `patience`) and the blocked send
(`send_wait`), so that both say the same words. Imports only the standard library:
`send_wait` imports it with the client (and `worker_given`, standard library only too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from melissa_trainer.client.worker_given import given_attempt

__all__ = [
    "DeliveryFailed", "Preempted", "ReceiverNotFound", "StopSaid", "given_to_a_worker",
    "rerun_words", "run_again", "stop_sentence", "taken_of", "waits_for",
]  # fmt: skip


class DeliveryFailed(TimeoutError):
    """What a simulation sent did not reach its trainer, or the trainer did not confirm
    that it ingested the BYE: a send or close that gave up on the trainer (gone,
    stopped, preempted, not following, silent), not a failure of the solver. Every error
    a `Client`'s send or close raises for that is one (`send_errors.ReceiverGone`,
    `closing.TrainerStopped`, `Preempted`, `follow.FollowError`, the close's and the
    receipts' timeouts), and so is a `Client` that found no receivers to send to
    (`ReceiverNotFound`); its message says why and what to do (usually: run the
    simulation again with the same id). A `TimeoutError`, as these errors were before.

    A worker (`worker.serve_simulations`) reports the simulation failed and goes on with
    the next: its solver's state is not at fault, and its start-up is not paid again."""


class ReceiverNotFound(DeliveryFailed):
    """A `Client` made from a rendezvous directory (``MELISSA_TRAINER_RENDEZVOUS``)
    that was still incomplete after its `rendezvous_timeout`: no trainer published its
    receivers there (not started yet, stopped, or another output directory: the message
    says what was found, with a typo's hint). Nothing was sent. A worker reports the
    simulation not delivered and goes on, as for the other give-ups: before, this plain
    `TimeoutError` ended the worker, which its launcher started again, start-up and
    all."""


class ReceiverUnreachable(ReceiverNotFound):
    """A `Client` made from a rendezvous directory whose receivers published loopback
    endpoints on another machine, or in another network namespace, than this process
    (`stream.host_scope`: a Slurm compute node reading a trainer's ``127.0.0.1``): no
    connection could ever be made, so it is said at once, naming both hosts and the fix,
    instead of after ``disconnected_timeout`` as a receiver that never answered. Nothing
    was sent. A `ReceiverNotFound`."""


class Preempted(DeliveryFailed):
    """A client gave up on a receiver gone whose trainer's stop record says it was
    preempted (`RestartCheck.preempted`): a close's (`closing.TrainerPreempted`) or a
    blocked send's (`send_wait.SendPreempted`). Its message says so in place of "the
    trainer died"; a client that follows restarted trainers completes it, if no resume
    came, with what to do (`follow_words.follow_gave_up`)."""


@dataclass(frozen=True)
class StopSaid:
    """Why a receiver's trainer is not coming back, read from its stop record
    (`stopped.StopRecords.for_good`), in the parts `stop_sentence` composes its one
    sentence from: a close whose messages could not be delivered (`closing`) or a send
    that gave up (`send_wait`), the reason first.

    Attributes:
        endpoint: the receiver's, that the messages were queued to.
        kind: ``not_needed`` (the stream ended on ``expected_simulations`` without this
            simulation), ``refused`` (this simulation's non-finite sample stopped the
            trainer) or ``ended`` (the trainer ended or failed otherwise).
        reason: ``not_needed`` and ``refused``: the clause the sentence opens with ("the
            study ended without needing this simulation", "the trainer stopped on its
            time step 3"); ``ended``: the record's reason and where it is ("end: max_steps
            9 reached; its stop record in DIR").
        detail: what follows: the record's facts (counts, what was taken) and what to do.
        error: what the close raises (`SimulationNotNeeded`, `SimulationRefused`,
            `TrainerStopped`); a send raises its own (`send_wait`).
        held: ``ended``: the steps of this simulation that the record's receiver held
            (its record's ``unfinished``), where the record says; else None. A close
            says them beside the steps it sent there (`closing.stop_first`, `taken_of`).
        held_span: the first and last of those steps (None: an older trainer's row).
    """

    endpoint: str
    kind: Literal["not_needed", "refused", "ended"]
    reason: str
    detail: str
    error: type[Exception]
    held: int | None = None
    held_span: tuple[int, int] | None = None


def taken_of(
    held: int | None, held_span: tuple[int, int] | None, count: int, span: tuple[int, int] | None
) -> str:
    """ "; it had taken N of the `count` time steps this simulation sent it", from a stop
    record's row of this simulation (`held` steps, the first and last `held_span`), where
    it counts steps among those sent (`span`: their least and greatest); else "" (no row,
    or steps held outside those sent: another run's, not a count of these taken). One
    rule for a receipt's refusal (`StopRecords.decide`) and a close's (`stop_first`); the
    C client's too (clients/c/src/stop_record.c ``held_known``)."""
    outside = (
        bool(held)
        and held_span is not None
        and not (span is not None and span[0] <= held_span[0] <= held_span[1] <= span[1])
    )
    if held is None or outside:
        return ""
    return f"; it had taken {min(held, count)} of the {count} time steps this simulation sent it"


def stop_sentence(who: str, what: str, verb: str, said: StopSaid, down: Sequence[str] = ()) -> str:
    """What a client says when a receiver's stop record explains why `what` ("its
    queued messages", "time step 7 and those queued before it"; `verb`: "was" or
    "were") was not delivered: one sentence, after `who` ("simulation 4 rank 1"), the
    record's reason first, then what was not delivered and where (`down`: the
    receivers disconnected, whose messages those are; the record's receiver if none is
    given), with the receiver whose record said why if it is another, then the record's
    facts and what to do (`said`'s fields; no text is parsed). The C client's close
    says the same words (clients/c/src/stop_said.c)."""
    where, whose = said.endpoint, ""
    if down and list(down) != [said.endpoint]:  # (a receiver connected may hold the record)
        where = ", ".join(down)
        whose = f"disconnected; its receiver at {said.endpoint} recorded why"
    if said.kind == "ended":
        why = f"{whose}: {said.reason}" if whose else said.reason
        return (
            f"{who}: the trainer stopped before it read {what}, which {verb} not delivered "
            f"to {where} ({why}). {said.detail}"
        )
    where += f" ({whose})" if whose else ""
    return f"{who}: {said.reason}, so {what} {verb} not delivered to {where}: {said.detail}"


def given_to_a_worker(simulation_id: int) -> bool:
    """Whether `simulation_id` is the one this process's worker was last given by its
    launcher (`worker_given.given_attempt`): its client's give-ups say `rerun_words`' worker
    words."""
    return given_attempt(simulation_id) is not None


def rerun_words(simulation_id: int, by_hand: str | None = None, first: bool = False) -> str:
    """What a give-up's fix says to do to run `simulation_id` again: `by_hand`, the fix's
    own words for a simulation its user runs (default: "run this simulation again with the
    same simulation id (MELISSA_TRAINER_SIMULATION_ID=N)"), except in a worker that its
    launcher gave that simulation (`worker_given.given_attempt`): a worker takes its
    simulations from its launcher, one after another, and has no such variable to set;
    its launcher runs the simulation again itself once the worker reports it failed
    (`worker.serve_simulations`), and a study stopped runs it again when resumed. Those
    words instead, fit for the same place in the fix's sentence (`first`: its opening,
    capitalized; `by_hand` is taken as written)."""
    if not given_to_a_worker(simulation_id):
        return by_hand or (
            f"run this simulation again with the same simulation id "
            f"(MELISSA_TRAINER_SIMULATION_ID={simulation_id})"
        )
    return (
        f"{'L' if first else 'l'}et the launcher run simulation {simulation_id} again, as "
        f"it does itself once this worker reports it failed (a worker is given its "
        f"simulations by the launcher: it has no MELISSA_TRAINER_SIMULATION_ID to set; a "
        f"study stopped runs it again when resumed, --resume_from_checkpoint latest)"
    )


def run_again(simulation_id: int) -> str:
    """What a simulation whose close gave up on its trainer does: the one sentence its
    errors end with (in a worker, `rerun_words`')."""
    if given_to_a_worker(simulation_id):  # (no id to set: its launcher runs it again)
        return (
            f"This simulation's data is not all in: {rerun_words(simulation_id)}. The "
            f"trainer keeps the steps it holds and takes the others, each once."
        )
    return (
        f"This simulation's data is not all in: run it again with the same simulation id "
        f"(MELISSA_TRAINER_SIMULATION_ID={simulation_id}) once its trainer runs (resumed: "
        f"--resume_from_checkpoint latest): the trainer keeps the steps it holds and takes "
        f"the others, each once. A simulation the launcher runs, it runs again itself."
    )


def waits_for(
    left: float | None,
    bound: str,
    what: str,
    rendezvous: str | None,
    follows: bool,
    follow: float | None,
    elapsed: float,
    action: str = "close",
    resumed: bool = False,
) -> str:
    """The sentences of a notice (`closing.waiting_notice`, `receipts`) that say what
    the `action` ("close", or "send": a blocked send, `send_wait`) waits for: up to
    `left` more seconds (None: no bound) for the receiver to `what` ("reconnect",
    "answer"), ended by `bound` ("ClientTuning.NAME=V s", "Client.send_timeout=V s"),
    then, if it `follows`, up to `follow` seconds (None: no bound) for a restarted
    trainer to publish in `rendezvous` (`resumed`: a stop record said the trainer was
    preempted: for it to be resumed, --resume_from_checkpoint latest), followed at once
    if it publishes sooner (`following.Following.seen`); the whole wait
    (`elapsed` seconds of it gone), the settings that shorten it, and that nothing more
    is said."""
    who = (
        "the trainer to be resumed (--resume_from_checkpoint latest) and"
        if resumed
        else "a restarted trainer to"
    )
    owner, names = "ClientTuning", []
    if bound:
        owner, setting = bound.split(".", 1)
        names.append(setting.split("=", 1)[0])
    if left is None:
        text = f"The {action} waits for it to {what}, with no bound ({action}_timeout and "
        text += "disconnected_timeout are None)"
        if follows:  # (`following.Following.seen`: read while the receiver is down)
            text += f", and follows a restarted trainer as soon as one publishes in {rendezvous}"
    else:
        text = f"The {action} waits up to {left:.0f} s more for it to {what} ({bound})"
    if follows and left is not None:
        names.append("follow_timeout")
        if follow is None:
            text += f", then for {who} publish in {rendezvous}, with no "
            text += "bound (ClientTuning.follow_timeout=None), and follows it (at once if it "
            text += "publishes sooner)"
        else:
            text += (
                f", then up to {follow:.0f} s (ClientTuning.follow_timeout={follow} s) for "
                f"{who} publish in {rendezvous}, and follows it (at once if it publishes "
                f"sooner): up to "
                f"{left + follow:.0f} s more, {elapsed + left + follow:.0f} s in all"
            )
    shorten = f"{owner}({', '.join(f'{n}=...' for n in names)}) shortens it; " if names else ""
    return f"{text}. {shorten}nothing more is said until the {action} ends."
