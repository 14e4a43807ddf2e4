"""What rank 0's launcher hears of a study's receivers: rank 0's own, plus the other ranks'
heartbeats handed to it (`melissa_trainer.stream.rank_activity`, whose docstring says
why: with time steps routed over the ranks a simulation may send nothing to receiver 0
for a long while, and its silence was judged as a start-up's).

`EveryRankReport` is the `DataReport` and the heartbeat a `Study` gives its launcher on
rank 0: a simulation's heartbeat is its message count summed over the ranks, and the
receivers wait for room while any rank's does; the steps each simulation contributed
(`samples_of`: the end-of-run account's) are summed over the ranks too, the first step
each refused for NaN or Inf is the first over the ranks (`first_refused`), and a
simulation's data is described as every rank's receiver has it (`describe`: the launcher's
"data incomplete" words; before, rank 0's alone, and a simulation whose steps all went to
rank 1 was said to have none); everything else is rank 0's receiver's (what is complete,
refused, first heard, which client). Before the account reads them, `final_words` waits,
bounded, for each other rank's last write (`OtherRanksActivity.wait_final`). `publisher`
starts the other ranks' side. Thread-safety: `activity`, `backpressured` and `describe`
are read by the launcher's thread only (as `OtherRanksActivity`), `final_words`,
`samples_of` and `first_refused` by the training thread once the launcher's has ended;
the rest are the receiver's (any thread).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from melissa_trainer.common.words import plural
from melissa_trainer.stream.rank_activity import FINAL_WAIT, ActivityPublisher, OtherRanksActivity
from melissa_trainer.stream.receiver import Receiver

__all__ = ["EveryRankReport", "publisher"]


class EveryRankReport:
    """Rank 0's receiver's report to its launcher, with the other ranks' heartbeats read
    from `rendezvous` (run `run_id`, on `world_size` ranks) added (module docstring);
    `ended`: whether a rank's process is known ended (`final_words`; None: none known)."""

    def __init__(
        self,
        receiver: Receiver,
        rendezvous: Path,
        run_id: str | None,
        world_size: int = 1,
        ended: Callable[[int], bool] | None = None,
    ) -> None:
        self._receiver, self._world = receiver, world_size
        self._ended = ended or (lambda rank: False)
        self._others = OtherRanksActivity(rendezvous, run_id)

    def activity(self) -> dict[int, int]:
        """Simulation id -> messages taken in by every rank's receiver: the heartbeat."""
        return self._others.add(self._receiver.activity())

    def backpressured(self) -> bool:
        """Rank 0's receiver waits for room, or another rank's did at the last heartbeat
        read (a simulation blocked on it is silent by the trainer's doing)."""
        return self._receiver.backpressured() or self._others.waiting()

    def samples_of(self) -> dict[int, tuple[int, int]]:
        """Simulation id -> (steps received, of which refused for NaN or Inf) by every
        rank's receiver: rank 0's `IngestQueries.samples_of` plus the other ranks' last
        word (`OtherRanksActivity.samples`, their files read afresh here: each at most
        `PUBLISH_EVERY` s behind its receiver; its last, once `final_words` heard it). For
        the study's account, on the training thread once the launcher's thread has ended
        (`Study.stop`): the reader of `OtherRanksActivity` is then this one alone."""
        self._others.add({})
        total = dict(self._receiver.ingest.samples_of())
        for sid, (steps, refused) in self._others.samples().items():
            had = total.get(sid, (0, 0))
            total[sid] = (had[0] + steps, had[1] + refused)
        return total

    def final_words(self, bound: float = FINAL_WAIT) -> list[int]:
        """Wait, `bound` s at most, for every other rank's last counts (written at its
        study's stop, its receiver stopped: `ActivityPublisher.stop`), so the account
        says their last steps too, no longer for a rank whose process is known ended
        (`ended`, given at construction: its pid dead on this host). Returns the ranks
        not heard (each said in a WARNING). The account's reader, as `samples_of`."""
        return self._others.wait_final(range(1, self._world), bound, self._ended)

    def first_refused(self) -> dict[int, int]:
        """Simulation id -> the first time step any rank's receiver refused for NaN or
        Inf (rank 0's `NonFiniteGuard.first_step` and the other ranks' last word): the
        account's "from time step t on". Read as `samples_of`."""
        first = dict(self._receiver.ingest.nonfinite.first_step)
        self._others.add({})
        for sid, t in self._others.first_refused().items():
            first[sid] = min(t, first.get(sid, t))
        return first

    def completed(self, start: int = 0) -> Sequence[int]:
        return self._receiver.completed(start)

    def refused(self, start: int = 0) -> Sequence[tuple[int, str]]:
        return self._receiver.refused(start)

    def idle_seconds(self) -> float:
        return self._receiver.idle_seconds()

    def describe(self, simulation_id: int) -> str:
        """What every rank's receiver has of the simulation: rank 0's `Receiver.describe`,
        then each other rank's steps as its last heartbeat said them (read afresh), or
        that none said any. The launcher's thread (as `activity`)."""
        own = self._receiver.describe(simulation_id)
        if self._world < 2:
            return own
        self._others.add({})
        said = [
            f"rank {rank}'s receiver had {plural(steps, 'step')}"
            + (f" ({refused} refused for NaN or Inf)" if refused else "")
            + " as of its last heartbeat"
            for rank, steps, refused in self._others.said_of(simulation_id)
        ]
        if not said:
            return f"{own}; the other ranks' receivers said nothing of it"
        return "; ".join([own, *said])

    def first_message_at(self, simulation_id: int) -> float | None:
        return self._receiver.first_message_at(simulation_id)

    def client_of(self, simulation_id: int) -> str | None:
        return self._receiver.client_of(simulation_id)


def publisher(
    receiver: Receiver, rendezvous: Path, run_id: str | None, rank: int
) -> ActivityPublisher:
    """Rank `rank`'s (not 0) thread handing its receiver's heartbeat to rank 0, started."""
    thread = ActivityPublisher(
        rendezvous, run_id, rank, receiver.activity, receiver.backpressured,
        samples=lambda: receiver.ingest.held_samples(),  # (the ingest a resume loads)
        archived=lambda start: receiver.ingest.archived_samples(start),
        first_refused=lambda: dict(receiver.ingest.nonfinite.first_step),
    )  # fmt: skip
    thread.start()
    return thread
