"""The end-of-run account counts the samples of every rank's receiver (`study.every_rank`,
`stream.rank_activity`): rank 1's ingest hands its steps to rank 0 through its heartbeat
file, and rank 0's `EveryRankReport.samples_of` adds them to its own.

Real ingests (no socket): simulation 0's steps go to rank 0, simulation 1's to rank 1
(``t % 2`` routing, steps 0, 2, 4 and 1, 3). Simulation 1 is given up part-way (no BYE);
before, the account read rank 0's counts alone and said it "failed with no sample
received". The oracle: the steps each ingest took in (`samples_put`)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from melissa_trainer.launcher.account import SimulationOutcome, study_account
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.study.every_rank import EveryRankReport, publisher
from melissa_trainer.wire import Abandon, Bye, Data, FieldSpec, Hello

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from small_ingest import small_ingest  # noqa: E402

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def stream(ingest: Ingest, sid: int, steps: list[int], bye: bool) -> None:
    """Simulation `sid` (one client rank) sends `steps` to `ingest`, then maybe its BYE."""
    ingest.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in steps:
        payload = np.array([sid, t], np.float32).tobytes()
        ingest.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    if bye:
        ingest.bye(Bye(sid, 0, 1, len(steps)))


def as_receiver(ingest: Ingest) -> Any:
    """What `EveryRankReport` and `publisher` read of a `Receiver`: its ingest's."""
    return SimpleNamespace(ingest=ingest, activity=ingest.activity, backpressured=lambda: False)


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
