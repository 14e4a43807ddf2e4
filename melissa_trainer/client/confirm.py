"""A close that returns only once the trainer has the simulation's BYE (external mode).

PUSH/PULL acknowledges nothing. The BYE's release by ZeroMQ (`closing`) says that it
left this process, not that a receiver read it: a trainer killed (SIGKILL, a node
lost) while a BYE and the last steps wait in its queues never had them, and a solver
that exited 0 meanwhile cannot send them again. So a client whose endpoints came from
a rendezvous (``MELISSA_TRAINER_RENDEZVOUS``) and that the launcher did not start
(`config.launched`: a launched simulation that fails is run again by the launcher, and
its close does not pay this) asks each receiver, once its transport is closed, a
RECEIPT_QUERY on its follow socket (docs/protocol.md, section 17b), and returns once
every one has confirmed that it *ingested* this client rank's BYE with the count it
carried (or that the simulation finished there): a receiver reads one connection's
messages in order, so it then has everything this rank sent it.

**What a returned close guarantees.** At a moment after the BYE left, every receiver of
the run the client streams to last, alive (it answered), had ingested the BYE of this
client rank and everything this rank sent it before: each step is in its buffer,
trained on, held in its checkpoint, or refused as non-finite (counted: see below). Or
the simulation had finished there. Until then the client keeps its replay window
(`replay`) and follows a trainer that restarts (`following`: it asks the resumed one
what its checkpoint holds, sends the rest again from the window, says BYE again) and
asks again. Not guaranteed: that a checkpoint holds it. A trainer killed *after* the
confirmation, before its next checkpoint, loses what it ingested since that checkpoint
(the training of that time too); the resumed trainer names the simulation unfinished
(its log, `stream_source.no_data_notice`): run it again with the same simulation id.
A client without a replay window (``replay_bytes=0``) cannot follow: a restarted
trainer whose checkpoint lacks this rank's BYE fails the close, with that advice.

The waits: a receiver that answers "not yet" (training paused, a full buffer:
back-pressure; it holds the question up to half a second and answers as soon as the BYE
is in) is waited for as long as it makes progress (the steps it says it holds grow: a
trainer ingesting at its sample-to-insert pace, a resumed one taking a replay), and
gives up after ``ClientTuning.close_timeout`` seconds without progress (None: as long as
it answers), and at `delivery.CLOSE_CAP_FACTOR` close timeouts from the close's start in
all, progress or not (`confirm_close`'s `began`); so is one whose process keeps its
connections but does not answer (SIGSTOP); one silent with no connection for
``disconnected_timeout`` seconds is gone, and a restarted trainer is then waited for
``follow_timeout`` seconds (with a window). Each ends in a `TimeoutError` that says what
was not confirmed and what to do. A receiver does not tell attempts apart: an earlier
attempt's BYE of the same rank with the same count, ingested while the simulation stayed
unfinished, confirms this one.

The receipt also tells, at no extra cost: a HELLO refused (another grid, missing
parameters, another run's id: `admission.SimulationRefused`, with the fix); how many of
the simulation's samples the trainer refused as non-finite (`report`: a warning naming
the count and the fix, or `SimulationRefused` when every sample was refused: nothing of
the simulation was trained on); steps lost in transit on a single-rank simulation (a
warning). Counts of non-finite samples are the receivers' since they started: a trainer
resumed from a checkpoint does not count those refused before it.

A receiver that stopped (its rendezvous file marked stopped, by the trainer the client
streamed to) answers from the stop record it wrote there as it stopped, after its last
message ingested (`stopped.StopRecords`): a trainer that ended a few milliseconds before
the first question confirms the close, and one that stopped on this simulation's NaN
(``nonfinite="fail"``), or ended without its BYE, says so at once; a preempted one is
waited for and followed as above.

A receiver that does not answer RECEIPT_QUERY (an older trainer: no 13 in its
rendezvous file's ``follow_kinds``) is asked the ADMISSION_QUERY as before
(`admission.check_admission`); no follow socket: nothing is asked.

Not thread-safe: the closing thread. Sockets of a context of its own, ended before it
returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from melissa_trainer.client.admission import SimulationRefused, check_admission
from melissa_trainer.client.closing import client_logger
from melissa_trainer.client.delivery import CLOSE_CAP_FACTOR
from melissa_trainer.client.gave_up import DeliveryFailed, rerun_words
from melissa_trainer.client.receipt_words import Closed
from melissa_trainer.client.receipts import Rounds, confirmed
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.rank_bounds import read_file
from melissa_trainer.wire.layout import RECEIPT_QUERY
from melissa_trainer.wire.receipt import RECEIPT_BYE, ReceiptReply

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.following import Following

__all__ = ["REWRITE_WAIT", "answers_receipts", "confirm_close", "entries_of", "report"]

#: seconds a closing client waits for a rendezvous that another run is rewriting to be
#: complete (a trainer publishes all its ranks' files within moments)
REWRITE_WAIT = 30.0


def confirm_close(
    client: Closed,
    rendezvous: str,
    following: Following | None,
    follow_and_close: Callable[[list[dict[str, Any]]], None],
    began: float | None = None,
) -> None:
    """`Client.close`'s confirmation, after its transport closed (module docstring).

    Args:
        client: the client (its current endpoints, run id and BYE counts).
        rendezvous: where its endpoints came from.
        following: its window and follower, or None (no replay window).
        follow_and_close: follows the restarted trainer of the entries given (asks,
            sends again, says BYE again, closes); with `following` only.
        began: the close's start (`time.monotonic()`; None: now). The receipts are
            waited for at most `delivery.CLOSE_CAP_FACTOR` close timeouts from it, in
            all: one budget for the whole close, delivery and receipts, as a user reads
            "10 x close_timeout in all" (per phase, a close would last twice that, and
            more with each phase added), so a receiver that confirms a step now and then
            does not hold the solver's exit for ever. A restarted trainer followed starts
            the budget again (its replay is delivered anew, by a close of its own).

    Raises:
        SimulationRefused: a receiver refused the simulation, or every sample of it
            was refused as non-finite.
        TimeoutError: not confirmed (a `FollowError` if following failed); the message
            says why and what to do.
    """
    whose = f"simulation {client.simulation_id} rank {client.rank}"
    tuning = client.tuning
    entries = entries_of(rendezvous, client)
    found: list[list[dict[str, Any]]] = []  # (a restarted trainer's entries)
    began = time.monotonic() if began is None else began

    def restarted() -> bool:
        if following is not None:
            now = following.check(force=True)
        else:
            now = entries_of(rendezvous, client, stopped=False)
            now = now if now is not None and _another_run(now, client) else None
        found.extend([] if now is None else [now])
        return now is not None

    while True:
        if entries is not None and _another_run(entries, client):
            if following is None:
                return _no_window(client, entries, rendezvous, whose)
            follow_and_close(entries)  # (asks, sends again, says BYE again: then asked)
            began = time.monotonic()  # (a new trainer: its own budget, `began`)
            entries = entries_of(rendezvous, client)
            continue
        if entries is None or not all(answers_receipts(e) for e in entries):
            # (an older trainer, or none found: the admission question, as before)
            check_admission(
                rendezvous, client.endpoints, client.simulation_id, client.rank,
                client.admission_rejected, disconnected_timeout=client.tuning.disconnected_timeout,
            )  # fmt: skip
            return None

        follow_wait = None if following is None else tuning.follow_timeout
        # (from each question on: a restarted trainer followed is asked afresh, as C's)
        timeout = tuning.close_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        cap = None if timeout is None else began + CLOSE_CAP_FACTOR * timeout
        rounds = Rounds(client, entries, whose)
        outcome = rounds.wait(deadline, rendezvous, restarted, follow_wait, cap)
        if isinstance(outcome, list):
            return report(outcome, client.bye_counts, client.ranks, whose)
        if outcome:  # (a receiver silent: gone)
            if following is None:
                raise DeliveryFailed(outcome)
            entries = following.after_gone(DeliveryFailed(outcome))
        else:
            entries = found[-1]


def answers_receipts(entry: dict[str, Any]) -> bool:
    """Whether a rendezvous entry's follow socket answers RECEIPT_QUERY."""
    kinds = entry.get("follow_kinds")
    return bool(entry.get("follow_endpoint")) and isinstance(kinds, list) and RECEIPT_QUERY in kinds


def entries_of(
    rendezvous: str, client: Closed, stopped: bool = True
) -> list[dict[str, Any]] | None:
    """The rendezvous' entries now, complete; else (stopped, or being rewritten), with
    `stopped`: the files of the client's own run as they are, marked stopped or not (a
    trainer that stops because the study is over may have this simulation's BYE: its
    follow socket is asked while it is there), or, when another run is writing them,
    its entries once complete (waited for up to `REWRITE_WAIT` seconds); None if none
    of these."""
    try:
        return fetch_rendezvous(rendezvous, timeout=0.0)
    except (TimeoutError, OSError):
        if not stopped:
            return None
    entries = []
    for rank in range(len(client.endpoints)):
        try:
            entry = read_file(Path(rendezvous) / f"rank_{rank}.json")
        except (OSError, ValueError):
            return None
        entries.append(entry)
    if not _another_run(entries, client):
        return entries
    try:  # (a restarted trainer is publishing: its complete entries)
        return fetch_rendezvous(rendezvous, timeout=REWRITE_WAIT)
    except (TimeoutError, OSError):
        return None


def _another_run(entries: list[dict[str, Any]], client: Closed) -> bool:
    endpoints = [str(e.get("endpoint")) for e in entries]
    return endpoints != list(client.endpoints) or entries[0].get("run_id") != client.run_id


def _no_window(client: Closed, entries: list[dict[str, Any]], rendezvous: str, whose: str) -> None:
    """A restarted trainer and no window to follow it with: confirmed only if its
    receivers (their checkpoint) hold this rank's BYE already; else the advice."""
    counts, sid = client.bye_counts, client.simulation_id
    if all(answers_receipts(e) for e in entries) and len(entries) == len(counts):
        replies = Rounds(client, entries, whose).once()
        if replies is not None and all(
            confirmed(r, n) for r, n in zip(replies, counts, strict=True)
        ):
            return report(replies, counts, client.ranks, whose)
    again = f"run it again, with the same simulation id (MELISSA_TRAINER_SIMULATION_ID={sid})"
    raise DeliveryFailed(
        f"{whose}: its BYE was not confirmed: the trainer was restarted (the rendezvous "
        f"{rendezvous} now names run {entries[0].get('run_id')}) and the checkpoint it "
        f"resumed from lacks it. A simulation without a replay window "
        f"(ClientTuning.replay_bytes=0) does not follow a restarted trainer: "
        f"{rerun_words(sid, again)}: the resumed trainer "
        f"keeps the steps it holds and takes the others, each once."
    )


def report(replies: list[ReceiptReply], counts: list[int], ranks: int, whose: str) -> None:
    """Say what the confirmed receipts tell: samples refused as non-finite (a warning;
    `SimulationRefused` if every one was), steps lost in transit (a warning)."""
    steps = sum(r.steps for r in replies)
    nonfinite = sum(r.nonfinite for r in replies)
    fix = (
        "NaN or Inf in its fields (the trainer's receivers refuse such samples: "
        "nonfinite='refuse'): fix the solver (a diverging scheme: a smaller time step?), "
        "or let the trainer take them with ReceiverConfig(nonfinite='accept') if the "
        "loss handles them"
    )
    if nonfinite and nonfinite >= steps:
        raise SimulationRefused(
            f"{whose}: the trainer refused all {nonfinite} samples of this simulation as "
            f"non-finite, and trained on none: {fix}"
        )
    log = client_logger()
    if nonfinite:
        log.warning(
            "%s: the trainer refused %d of the %d samples of this simulation as non-finite: %s",
            whose, nonfinite, steps, fix,
        )  # fmt: skip
    if ranks == 1:
        for rank, (reply, count) in enumerate(zip(replies, counts, strict=True)):
            if reply.bye == RECEIPT_BYE and reply.steps < count:
                log.warning(
                    "%s: the trainer's receiver %d has %d of the %d steps this simulation "
                    "sent it (the others were lost on the way): run it again with the "
                    "same simulation id, the trainer takes the missing ones once",
                    whose, rank, reply.steps, count,
                )  # fmt: skip
