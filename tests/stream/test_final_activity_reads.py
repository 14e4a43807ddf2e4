"""Review finding (hrev10): since c9d42119 a rank's last heartbeat write lists every
simulation archived there (`ActivityPublisher.publish(final=True)`: O(study), where it
was O(held)), and rank 0 parses each final file again at every `OtherRanksActivity.add`:
`wait_final`'s pass, then `samples_of`'s and `first_refused`'s own `add({})` at the
account (`study.closing`, `study.every_rank`), though a final file never changes.
With the usual routing every simulation has a ledger on every rank, so each final file
holds the whole study: measured here (write_activity / read_activity, 10^6 archived
simulations, this 2-core machine under load): 0.82 s to write, 3.2 s to parse, 16.9 MB,
per rank, parsed 3 times by rank 0 for each other rank (FINAL_WAIT is 5 s).
The oracle: the count of parses of the final file (read_activity calls on it).

Fixed (hfix10): rank 0 keeps a final file's read while its inode, mtime and size stay
(`OtherRanksActivity._read`), and the archived simulations are written as runs of
consecutive ids (`activity_file._run_lines`). Measured by
``python benchmarks/final_activity_file.py`` (2026-12-07, this 2-core machine shared with
other jobs, load 4.8; medians of 3 rounds), 10^6 archived simulations, ours against one
line each: 48 B (counts alike) or 2.0 MB (alternating) against 14.9 MB; parsed in 0.45 /
0.65 s against 2.7 / 2.8 s, and once by rank 0 (3 times before: 8.2 s, past FINAL_WAIT);
written in 0.44 / 0.59 s against 0.45 / 0.50 s. At 10^5: parsed in 33 / 42 ms against
208 / 219 ms."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.stream import rank_activity
from melissa_trainer.stream.activity_file import ACTIVITY_FILE, read_activity, write_activity
from melissa_trainer.stream.rank_activity import ActivityPublisher, OtherRanksActivity

pytestmark = pytest.mark.timeout(30)


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


def test_the_archived_are_written_as_runs_and_read_back_whole(tmp_path: Path) -> None:
    path = tmp_path / f"{ACTIVITY_FILE}.1"
    ids = [*range(0, 500), *range(501, 1000), *range(2000, 3000)]
    samples = {sid: (5 - sid % 2, 1 if sid == 2100 else 0) for sid in ids}
    samples[7] = (3, 3)  # (refused first at step 0: a line of its own)
    samples[500] = (2, 0)  # (held: a line of its own, with its messages)
    write_activity(path, "r", {500: 4}, False, samples, {7: 0}, final=True)
    lines = path.read_text().splitlines()
    # head, held, refused first, 4 runs (0-6, 8-499, 501-999, 2000-2999)
    assert len(lines) == 1 + 1 + 1 + 4, lines[:3]
    assert lines[-1].startswith("2000+1000\t-\t")
    read = read_activity(path, "r")
    assert read is not None
    assert read == ({500: 4}, False, samples, {7: 0}, True)


@pytest.mark.parametrize(
    "line",
    ["3+2\t-\t5\t0\t-", "3+2\t-\t5*3\t0*2\t-", "3+x\t-\t5*2\t0*2\t-",
     "3+2\t1\t5*2\t0*2\t-", "3+2\t-\t5,-1\t0*2\t-", "3+2\t-\t5,,\t0*2\t-"],
)  # fmt: skip
def test_a_run_line_not_as_written_is_refused(tmp_path: Path, line: str) -> None:
    path = tmp_path / f"{ACTIVITY_FILE}.1"
    path.write_text(f"r\t0\tfinal\n{line}\n")
    with pytest.raises(ValueError, match="line 2"):
        read_activity(path, "r")


def test_a_final_file_replaced_is_read_again(tmp_path: Path) -> None:
    path = tmp_path / f"{ACTIVITY_FILE}.1"
    write_activity(path, "run-a", {4: 1}, False, {4: (1, 0)}, final=True)
    others = OtherRanksActivity(tmp_path, "run-a")
    assert others.add({}) == {4: 1}
    write_activity(path, "run-a", {4: 2}, False, {4: (2, 0)}, final=True)  # (renamed in)
    assert others.add({}) == {4: 2} and others.samples() == {4: (2, 0)}
