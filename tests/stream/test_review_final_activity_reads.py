"""Review finding (hrev10): since c9d42119 a rank's last heartbeat write lists every
simulation archived there (`ActivityPublisher.publish(final=True)`: O(study), where it
was O(held)), and rank 0 parses each final file again at every `OtherRanksActivity.add`:
`wait_final`'s pass, then `samples_of`'s and `first_refused`'s own `add({})` at the
account (`study.closing`, `study.every_rank`), though a final file never changes.
With the usual routing every simulation has a ledger on every rank, so each final file
holds the whole study: measured here (write_activity / read_activity, 10^6 archived
simulations, this 2-core machine under load): 0.82 s to write, 3.2 s to parse, 16.9 MB,
per rank, parsed 3 times by rank 0 for each other rank (FINAL_WAIT is 5 s).
The oracle: the count of parses of the final file (read_activity calls on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.stream import rank_activity
from melissa_trainer.stream.activity_file import ACTIVITY_FILE, read_activity
from melissa_trainer.stream.rank_activity import ActivityPublisher, OtherRanksActivity

pytestmark = pytest.mark.timeout(30)


@pytest.mark.xfail(
    strict=True,
    reason="hrev10: rank 0 re-parses each rank's O(study) final heartbeat file at every "
    "add (3 times at the account) though it never changes",
)
def test_a_final_file_is_parsed_once_at_the_account(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archived = {sid: (5, 0) for sid in range(100)}
    publisher = ActivityPublisher(
        tmp_path, "run-a", 1, dict, lambda: False,
        archived=lambda start: ({s: v for s, v in archived.items() if s >= start}, 100),
    )  # fmt: skip
    publisher.stop()  # (never started: the last write only, marked final)
    parses: list[str] = []

    def counting(path: Path, run_id: str | None) -> object:
        parses.append(path.name)
        return read_activity(path, run_id)

    monkeypatch.setattr(rank_activity, "read_activity", counting)
    others = OtherRanksActivity(tmp_path, "run-a")
    assert others.wait_final([1], bound=5.0) == []
    others.add({})  # what `EveryRank.samples_of` does first
    others.add({})  # and `EveryRank.first_refused`
    assert others.samples() == archived
    assert parses.count(f"{ACTIVITY_FILE}.1") == 1, parses  # today 3
