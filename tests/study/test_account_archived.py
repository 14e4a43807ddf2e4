"""The end-of-run account counts the steps of a simulation whose ledger another rank
archived between two writes of its heartbeat (`rank_activity`, `IngestQueries.archived_samples`).

Rank 1's heartbeat said the ledgers it held (`held_samples`); rank 0 keeps each rank's
last word of a simulation once its file no longer lists it. A simulation that took in
steps after one write, finished and was archived before the next (its ledger gone from
`sims`) was never said with those steps: the account, and the launcher's "data
incomplete" words, undercounted it. Real ingests (no socket), routing ``t % 2``; rank
1's publisher writes only when the test says (its thread never does), so the
interleaving is the test's: a write that rank 0 reads, steps and the archiving, two
writes it does not read (a write is replaced within 0.2 s, perhaps unread), the last
write, which the account waits for. The oracle: the steps each ingest took in."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.rank_activity import ActivityPublisher
from melissa_trainer.study import every_rank
from melissa_trainer.study.every_rank import EveryRankReport
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stream"))
from small_ingest import small_ingest  # noqa: E402

pytestmark = pytest.mark.timeout(60)

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def send(ingest: Ingest, sid: int, steps: list[int]) -> None:
    for t in steps:
        payload = np.array([sid, t], np.float32).tobytes()
        ingest.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)


def hello(ingest: Ingest, sid: int) -> None:
    ingest.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))


class WrittenWhenTold(ActivityPublisher):
    """`every_rank.publisher`'s thread, which writes only when the test calls
    `publish` (and at `stop`)."""

    def run(self) -> None:
        self._stopping.wait()


def as_receiver(ingest: Ingest) -> Any:
    return SimpleNamespace(
        ingest=ingest, activity=ingest.activity, backpressured=lambda: False,
        describe=ingest.describe,
    )  # fmt: skip


def test_a_ledger_archived_between_two_writes_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(every_rank, "ActivityPublisher", WrittenWhenTold)
    # (2 samples put after a finish archive its ledger)
    ranks = [small_ingest(r, 2, recent_size=2) for r in range(2)]
    for ingest in ranks:
        hello(ingest, 1)
    send(ranks[0], 1, [0, 2])
    send(ranks[1], 1, [1, 3])
    thread = every_rank.publisher(as_receiver(ranks[1]), tmp_path, "run", 1)
    report = EveryRankReport(as_receiver(ranks[0]), tmp_path, "run", world_size=2)
    try:
        thread.publish()  # rank 1 says simulation 1's 2 steps ...
        assert report.activity() == {1: 4}  # ... which rank 0's launcher reads
        send(ranks[1], 1, [5])
        ranks[1].bye(Bye(1, 0, 1, 3))  # finished on rank 1 ...
        hello(ranks[1], 2)
        send(ranks[1], 2, [1, 3])
        ranks[1].bye(Bye(2, 0, 1, 2))
        assert 1 not in ranks[1].sims and 1 in ranks[1].archive  # ... and archived
        thread.publish()  # the write after its archiving, which rank 0 does not read
        hello(ranks[1], 3)
        thread.publish()  # (replaced before rank 0's next read)
    finally:
        thread.stop()  # the last write
    assert report.final_words(bound=30.0) == []
    samples = report.samples_of()
    assert ranks[0].samples_put + ranks[1].samples_put == 2 + 3 + 2
    assert samples[1] == (2 + 3, 0)  # rank 0's 2, rank 1's 3 (its last 1 after a write)
    assert samples[2] == (2, 0)  # (archived on rank 1 before its ledger was ever written)
    said = report.describe(1)
    assert "rank 1's receiver had 3 steps" in said, said
