"""The end-of-run account counts the samples of every rank's receiver (`study.every_rank`,
`stream.rank_activity`): rank 1's ingest hands its steps to rank 0 through its heartbeat
file, and rank 0's `EveryRankReport.samples_of` adds them to its own.

Real ingests (no socket): simulation 0's steps go to rank 0, simulation 1's to rank 1
(``t % 2`` routing, steps 0, 2, 4 and 1, 3). Simulation 1 is given up part-way (no BYE);
before, the account read rank 0's counts alone and said it "failed with no sample
received". The oracle: the steps each ingest took in (`samples_put`). Also: the first step
refused for NaN or Inf is the first over the ranks (before, rank 0's), the launcher's
"data incomplete" words describe every rank's receiver (before, rank 0's), and rank 0's
account waits for a rank's last word written after its first read (before, nothing
ordered the two: the read could miss the rank's last steps)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.rank_activity import ActivityPublisher, OtherRanksActivity
from melissa_trainer.study.every_rank import EveryRankReport, publisher
from melissa_trainer.wire import Abandon, Bye, Data, FieldSpec, Hello

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from small_ingest import small_ingest  # noqa: E402

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def stream(
    ingest: Ingest, sid: int, steps: list[int], bye: bool, nan_from: int | None = None
) -> None:
    """Simulation `sid` (one client rank) sends `steps` to `ingest` (NaN from time step
    `nan_from` on), then maybe its BYE."""
    ingest.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in steps:
        value = np.nan if nan_from is not None and t >= nan_from else t
        payload = np.array([sid, value], np.float32).tobytes()
        ingest.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    if bye:
        ingest.bye(Bye(sid, 0, 1, len(steps)))


def as_receiver(ingest: Ingest) -> Any:
    """What `EveryRankReport` and `publisher` read of a `Receiver`: its ingest's."""
    return SimpleNamespace(
        ingest=ingest, activity=ingest.activity, backpressured=lambda: False,
        describe=ingest.describe,
    )  # fmt: skip


def test_the_account_counts_the_samples_rank_1_took_in(tmp_path: Path) -> None:
    ranks = [small_ingest(r, 2) for r in range(2)]
    stream(ranks[0], 0, [0, 2, 4], bye=True)
    stream(ranks[1], 0, [], bye=True)  # (its HELLO reaches every receiver)
    stream(ranks[0], 1, [], bye=False)
    stream(ranks[1], 1, [1, 3], bye=False)  # (then it hangs, and is given up)
    for ingest in ranks:
        ingest.abandon(Abandon(1, False))
    assert [r.samples_put for r in ranks] == [3, 2]  # the oracle
    thread = publisher(as_receiver(ranks[1]), tmp_path, "run", 1)
    thread.stop()  # (its last word written at stop: rank 0 reads it after)
    report = EveryRankReport(as_receiver(ranks[0]), tmp_path, "run")
    samples = report.samples_of()
    assert samples == {0: (3, 0), 1: (2, 0)}
    outcomes = [
        SimulationOutcome(0, "finished", [0], None, {"a": 0.0}, 1),
        SimulationOutcome(1, "abandoned", ["timeout"], None, {"a": 1.0}, 1),
    ]
    lines, warned = study_account(outcomes, samples, 2)
    assert warned
    text = "\n".join(lines)
    assert "no sample received" not in text, text
    assert lines[0].startswith("study account: 2 simulations ended, 2 contributed samples")
    assert "given up part-way (abandoned), after sending some samples: simulation 1" in text
    # rank 0's counts alone (as before): the words this test guards against
    alone, _ = study_account(outcomes, ranks[0].samples_of(), 2)
    assert "1 failed with no sample received: simulation 1" in "\n".join(alone)


def test_the_first_step_refused_is_the_first_over_every_rank(tmp_path: Path) -> None:
    """Simulation 1 turns NaN at time step 3: rank 1 refuses 3 and 5, rank 0 refuses 4.
    Before, the account said rank 0's first (4)."""
    ranks = [small_ingest(r, 2) for r in range(2)]
    stream(ranks[0], 1, [0, 2, 4], bye=True, nan_from=3)
    stream(ranks[1], 1, [1, 3, 5], bye=False, nan_from=3)
    assert [dict(r.nonfinite.first_step) for r in ranks] == [{1: 4}, {1: 3}]  # the oracle
    publisher(as_receiver(ranks[1]), tmp_path, "run", 1).stop()
    report = EveryRankReport(as_receiver(ranks[0]), tmp_path, "run", world_size=2)
    assert report.final_words(bound=0.0) == []  # (rank 1's last word: written at its stop)
    samples, first = report.samples_of(), report.first_refused()
    assert samples == {1: (6, 3)} and first == {1: 3}
    outcomes = [SimulationOutcome(1, "finished", [0], None, {"a": 1.0}, 1)]
    lines, warned = study_account(outcomes, samples, 1, first)
    assert warned and "from time step 3 (simulation 1)" in "\n".join(lines), lines


def test_data_incomplete_describes_every_rank_receiver(tmp_path: Path) -> None:
    """Simulation 1 exited 0 with its steps on rank 1 only, no BYE (its data incomplete):
    the launcher's words say rank 1's 2 steps (1 refused), not rank 0's nothing alone."""
    ranks = [small_ingest(r, 2) for r in range(2)]
    stream(ranks[0], 1, [], bye=False)
    stream(ranks[1], 1, [1, 3], bye=False, nan_from=3)
    thread = publisher(as_receiver(ranks[1]), tmp_path, "run", 1)
    thread.stop()
    report = EveryRankReport(as_receiver(ranks[0]), tmp_path, "run", world_size=2)
    said = report.describe(1)
    own = ranks[0].describe(1)  # (rank 0's alone: what the launcher said before)
    assert own.startswith("rank 0's receiver has 0 of an unannounced number of steps")
    rank_1 = "rank 1's receiver had 2 steps (1 refused for NaN or Inf) as of its last heartbeat"
    assert said == f"{own}; {rank_1}"
    assert report.describe(7).endswith("; the other ranks' receivers said nothing of it")


def test_the_account_waits_for_a_rank_last_word_written_after_its_first_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 1 took in simulation 1's steps after its publisher's last write (its thread
    writes every hour here: only `stop` writes), and stops only once rank 0 has read
    the files a first time: the account's samples have those steps. Before, rank 0's
    read came unordered with rank 1's stop: read first, it said no sample of it."""
    ranks = [small_ingest(r, 2) for r in range(2)]
    stream(ranks[0], 1, [], bye=False)
    stream(ranks[1], 1, [1, 3], bye=False)
    for ingest in ranks:
        ingest.abandon(Abandon(1, False))
    read_once = threading.Event()
    original = OtherRanksActivity.add

    def add(self: OtherRanksActivity, own: dict[int, int]) -> dict[int, int]:
        total = original(self, own)
        read_once.set()
        return total

    monkeypatch.setattr(OtherRanksActivity, "add", add)
    thread = ActivityPublisher(  # (as `publisher`, but its thread writes every hour)
        tmp_path, "run", 1, ranks[1].activity, lambda: False, every=3600.0,
        samples=ranks[1].held_samples, first_refused=lambda: ranks[1].nonfinite.first_step,
    )  # fmt: skip
    thread.start()
    report = EveryRankReport(as_receiver(ranks[0]), tmp_path, "run", world_size=2)
    assert report.samples_of() == {1: (0, 0)}  # (read before rank 1's stop: the race lost)

    def rank_1_stops() -> None:
        assert read_once.wait(60)
        thread.stop()

    stopper = threading.Thread(target=rank_1_stops)
    read_once.clear()
    stopper.start()
    try:
        assert report.final_words(bound=60.0) == []
    finally:
        stopper.join(60)
    assert report.samples_of() == {1: (2, 0)}
    outcomes = [SimulationOutcome(1, "abandoned", ["timeout"], None, {"a": 1.0}, 1)]
    lines, _ = study_account(outcomes, report.samples_of(), 1)
    assert "no sample received" not in "\n".join(lines), lines
