"""Whether the trainer a client streams to has been replaced by a restarted one.

A trainer that is preempted (SIGTERM: a checkpoint, then exit) or killed, and started
again with ``resume_from_checkpoint``, binds new sockets and rewrites the rendezvous
directory with its new endpoints and a new run id. A client with a replay window follows
it (`melissa_trainer.client.follow`). One without (``ClientTuning.replay_bytes=0``, given
its endpoints, launched by the launcher, or a window that no longer holds what the
checkpoint lacks) does not: its PUSH sockets keep dialing the old endpoints, and what
ZeroMQ had queued for the old trainer, or what the old trainer had taken after its
checkpoint, is gone (PUSH/PULL acknowledges nothing). The send or the close then gives
up on the receiver gone (`send_wait.ReceiverGone`, `closing`), with a message that said
only "the trainer died".

`RestartCheck.note` reads the rendezvous directory once, without waiting, at that moment
(a failure path: never on a send that goes through), and when another run publishes
there now, says so and what to do: run the simulation again with the same simulation
id. The resumed trainer's receivers hold, in its checkpoint, the steps each simulation
had sent before it, drop those again as duplicates and take the others: every
(simulation, time step) is trained on once (docs/how-to/own-solver.md, "When the trainer
restarts"; tests/checkpoint/test_external_resume.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from melissa_trainer.client.gave_up import rerun_words
from melissa_trainer.stream.endpoints import fetch_rendezvous

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.client.gave_up import StopSaid

__all__ = ["RestartCheck"]


class RestartCheck:
    """Tells a client that its rendezvous now names another trainer (module docstring).

    Args:
        rendezvous: the directory the client's endpoints were read from (None: they were
            given; nothing is ever said).
        endpoints: the endpoints read there.
        run_id: the run id the client's HELLO carries (None: none).
        simulation_id: the client's, for the advice.
        window: the client's replay window in bytes (0: none): a client with one follows
            a restarted trainer, and the note says so rather than that it cannot.
    """

    def __init__(
        self,
        rendezvous: str | None,
        endpoints: Sequence[str],
        run_id: str | None,
        simulation_id: int,
        window: int = 0,
    ) -> None:
        self._rendezvous = rendezvous
        self._window = window
        self._endpoints = list(endpoints)
        self._run_id = run_id
        self._simulation_id = simulation_id
        self._records: Any = None  # (`stopped.StopRecords`, made when first needed)

    def preempted(self) -> str | None:
        """ "the trainer was preempted (MESSAGE; ...)" if a receiver's stop record of this
        client's run says so (`StopRecords.preempted`), else None; never raises."""
        return None if self._records_of() is None else self._records.preempted()

    def stopped(self) -> StopSaid | None:
        """Why the trainer is not coming back, if a receiver's rendezvous file is marked
        stopped with a stop record of this client's run that says it ended or failed,
        and the error a close raises (`StopRecords.for_good`);
        else None (no rendezvous, none stopped, preempted). A stat per file while none
        changes; never raises."""
        return None if self._records_of() is None else self._records.for_good()

    def all_taken(self, counts: list[int], spans: list[tuple[int, int] | None]) -> bool:
        """Whether the receivers' stop records say that the run ended having taken every
        step this client sent (`counts`, per receiver; `spans`, their least and
        greatest): `StopRecords.all_taken`. False
        in a launched process: its close asks no receipt, which says so."""
        from melissa_trainer.client.config import launched

        if launched() or self._records_of() is None:
            return False
        return bool(self._records.all_taken(counts, spans))

    def _records_of(self) -> Any:
        """The `stopped.StopRecords` of the rendezvous (made when first needed), or
        None (no rendezvous)."""
        if self._rendezvous is None:
            return None
        if self._records is None:  # (imported here: a failure path, not the start-up)
            from melissa_trainer.client.stopped import StopRecords

            whose = f"simulation {self._simulation_id}"
            self._records = StopRecords(
                self._rendezvous, self._endpoints, self._run_id, self._simulation_id, 0, whose
            )
        return self._records

    def note(self) -> str:
        """A sentence (with a leading space) saying that the trainer was restarted and
        what to do, if the rendezvous directory now holds another run's complete files
        (another run id, or other endpoints); else "" (the same trainer, none yet, or
        no rendezvous). Never blocks, never raises."""
        if self._rendezvous is None:
            return ""
        try:
            entries = fetch_rendezvous(self._rendezvous, timeout=0.0)
        except (TimeoutError, OSError):
            return ""  # (incomplete: the new trainer, if any, has not published yet)
        endpoints = [str(e["endpoint"]) for e in entries]
        run_id = entries[0].get("run_id")
        if endpoints == self._endpoints and (run_id is None or run_id == self._run_id):
            return ""
        run = f"run {run_id}" if run_id is not None else "another trainer"
        again = "run this simulation again, with the same simulation id "
        again += f"(MELISSA_TRAINER_SIMULATION_ID={self._simulation_id})"
        restarted = (
            f" The trainer was restarted: the rendezvous {self._rendezvous} now names {run} at "
            f"{', '.join(endpoints)}."
        )
        if self._window:  # (a user trial read "without a replay window" of a client with one)
            return (
                f"{restarted} This client follows it with its replay window "
                f"(ClientTuning.replay_bytes={self._window}) if the window still holds every "
                f"step the checkpoint lacks; if not, {rerun_words(self._simulation_id, again)}."
            )
        return (
            f"{restarted} A simulation without a replay window "
            f"(ClientTuning.replay_bytes=0) does not follow a restarted trainer, and what it "
            f"sent after the checkpoint resumed from is lost: "
            f"{rerun_words(self._simulation_id, again)}: the resumed trainer "
            f"keeps the steps it holds and takes the others, each once."
        )
