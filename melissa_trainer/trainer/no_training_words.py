"""The words of `NoTrainingError` (`no_training`): why no rank trained a step, from what
each rank received and, when known, which simulations it came from and the study's
counts; a pure function, so that every case is tested without ranks.

The cause it names is the one the figures show, not a guess: a trial run of 2 ranks
whose study ran 3 one-step simulations (1 failed, replaced by 2) was told "fewer
simulations than ranks… Run at least 2 simulations", but 2 had contributed: both had
even ids, so the routing ``(simulation_id + t) % W`` sent both samples to rank 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["StudyCounts", "untrained_words"]


@dataclass(frozen=True)
class StudyCounts:
    """What the launcher (rank 0's, a `Study`'s) says of its simulations when the stream
    ended: finished, failed (given up), and replaced by a redraw."""

    finished: int
    failed: int
    redraws: int
    #: launched and not yet seen to end by the launcher (running, or exited with data due)
    running: int = 0

    def words(self) -> str:
        ran = self.finished + self.failed + self.running
        told = f"the study ran {ran} simulation{'s' if ran != 1 else ''}: {self.finished} finished"
        if self.failed:
            told += f", {self.failed} failed"
        if self.redraws:
            told += f" ({self.redraws} replaced by a redraw)"
        if self.running:
            told += f", {self.running} not yet seen to end"
        return told


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in sorted(ids))


def _sims(ids: Sequence[int]) -> str:
    return f"simulation {ids[0]}" if len(ids) == 1 else f"simulations {_ids(ids)}"


def _ranks(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {_ids(ranks)}"


def untrained_words(
    samples: list[int],
    held: Sequence[Mapping[int, int]] | None = None,
    study: StudyCounts | None = None,
    batch_size: int | None = None,
) -> str:
    """Why no rank trained a step, and what to change: the message of rank 0's
    `NoTrainingError`.

    Args:
        samples: the samples each rank's buffer received, by rank.
        held: by rank, simulation id -> the samples that rank received from it (its
            receiver's count, those refused left out; 0 for one that finished having
            sent it none); None when the source is not a stream of simulations (then no
            simulation is named).
        study: the launcher's counts (a `Study`'s, rank 0's); None in external mode
            (simulations started outside this run: only the receivers' account is known).
        batch_size: the per-rank batch size, named when every rank held samples but
            fewer than one batch.
    """
    world, total = len(samples), sum(samples)
    each = ", ".join(f"rank {r}: {n}" for r, n in enumerate(samples))
    counts = "" if study is None else f"; {study.words()}"
    if held is not None:  # ("; ": the lists of ids have commas)
        each = "; ".join(
            f"rank {r}: {n}"
            + (f" from {_sims([i for i, k in h.items() if k])}" if any(h.values()) else "")
            for r, (n, h) in enumerate(zip(samples, held, strict=True))
        )
    if total == 0:
        where = "any rank" if world > 1 else "this rank"
        return (
            f"no training step: the stream ended with no sample on {where}{counts}, so "
            "there was nothing to train on (did the simulations send data? their logs, "
            "and the receivers' lines above, say what they sent and what was refused)"
        )
    empty = [r for r, n in enumerate(samples) if n == 0]
    if not empty:  # (every rank had a sample, yet no step: a read never served a batch)
        small = ""
        if batch_size is not None and min(samples) < batch_size:
            small = (
                f": a rank holding fewer samples than --batch_size {batch_size} serves no "
                f"batch; lower it to at most {min(samples)}, or send more samples"
            )
        return (
            f"no training step: the stream ended before the first step although every "
            f"rank received samples ({each}){counts}: no batch was served before it "
            f"ended{small}"
        )
    fewer = f"train on fewer ranks (--num_processes {max(1, world - len(empty))})"
    head = (
        f"no training step: the stream of {_ranks(empty)} ended with no sample (samples "
        f"received by then: {each}){counts}. Every rank trains the same steps, and a "
        f"rank with no sample has no batch to train on, not even one to repeat while the "
        f"others train, so no rank trained. "
    )
    # (the others' streams may still run: the counts are theirs when the run ended)
    if held is None:
        return head + (
            f"The library's client sends time step t of simulation s to rank (s + t) mod "
            f"{world} (t mod {world} when given its endpoints instead of the rendezvous, "
            f"or an older client): fewer simulations than ranks, or simulations of fewer "
            f"than {world} time steps whose ids fall on the same ranks, leave some ranks "
            f"without data. Run at least {world} simulations (or give each at least "
            f"{world} time steps), or {fewer}"
        )
    steps: dict[int, int] = {}  # simulation id -> its samples, over every rank
    for h in held:
        for sid, n in h.items():
            steps[sid] = steps.get(sid, 0) + n
    fed = [sid for sid, n in steps.items() if n]
    if len(steps) < world:  # (finished or contributed: fewer than the ranks)
        return head + (
            f"{len(fed)} contributed ({_sims(fed) if fed else 'none'}), fewer simulations than "
            f"ranks, each of fewer than {world} time steps: the client sends time step t "
            f"of simulation s to rank (simulation_id + t) % {world}, so they cannot reach "
            f"every rank. Run at least {world} simulations (or give each at least "
            f"{world} time steps), or {fewer}"
        )
    went = {sid: sorted(r for r, h in enumerate(held) if h.get(sid)) for sid in steps}
    lines = "; ".join(
        f"simulation {sid} ({n} step{'s' if n != 1 else ''}) to {_ranks(went[sid])}"
        if n
        else f"simulation {sid} finished having sent {_ranks(empty)} nothing (no sample "
        "of it counted on any rank yet when the run ended)"
        for sid, n in sorted(steps.items())
    )
    # (where they went is the receivers' count; a client routing t % W, given its
    # endpoints or an older one, sends elsewhere than (simulation_id + t) % W: say so)
    routed = all(
        set(went[sid]) == {(sid + t) % world for t in range(min(n, world))}
        for sid, n in steps.items()
        if n
    )
    other = "" if routed else (
        f" (not all where that sends them: some client routes t % {world}, as one given "
        "its endpoints instead of the rendezvous, or an older client, does)"
    )  # fmt: skip
    return head + (
        f"{len(steps)} simulations finished or contributed, as many as ranks or more, but the "
        f"client sends time step t of simulation s to rank (simulation_id + t) % {world}, "
        f"and every one's steps went to other ranks than {_ranks(empty)}: {lines}{other}. "
        f"Run more simulations (ids are sequential, so any {world} consecutive ids that "
        f"finish cover every rank), or give each at least {world} time steps, or {fewer}"
    )
