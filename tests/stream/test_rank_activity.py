"""The other ranks' heartbeats handed to rank 0 (`stream.rank_activity`): the file a rank
writes is read back as written, another run's is left out, a malformed one is said and
left out, rank 0's sum adds every rank's count to its own, and the steps each rank said of
a simulation stay said once its file no longer lists it (the end-of-run account's)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from melissa_trainer.stream.activity_file import (
    clear_activity_files,
    read_activity,
    write_activity,
)
from melissa_trainer.stream.rank_activity import ActivityPublisher, OtherRanksActivity

pytestmark = pytest.mark.timeout(60)


def test_a_rank_file_reads_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "activity.1"
    write_activity(path, "run-a", {3: 7, 11: 0}, waiting=True, samples={3: (5, 2)})
    assert read_activity(path, "run-a") == ({3: 7, 11: 0}, True, {3: (5, 2), 11: (0, 0)}, {}, False)
    assert read_activity(path, "run-b") is None  # (another run's)
    assert read_activity(tmp_path / "activity.2", "run-a") is None  # (not written yet)
    assert [p.name for p in tmp_path.iterdir()] == ["activity.1"]  # (nothing left aside)


def test_a_malformed_line_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = tmp_path / "activity.1"
    path.write_text("-\t0\n3\tseven\t1\t0\n")
    with pytest.raises(ValueError, match=r"activity\.1: line 2 '3\\tseven\\t1\\t0'"):
        read_activity(path, None)
    path.write_text("-\t0\n3\t7\n")  # (a heartbeat without its steps)
    with pytest.raises(ValueError, match=r"line 2 '3\\t7' is not 'simulation id<TAB>messages"):
        read_activity(path, None)


def test_rank_0_adds_every_other_rank_count_to_its_own(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_activity(tmp_path / "activity.1", "r", {1: 4, 2: 1}, waiting=False)
    write_activity(tmp_path / "activity.2", "r", {1: 5}, waiting=True)
    write_activity(tmp_path / "activity.3", "old", {1: 100}, waiting=True)  # (not this run)
    (tmp_path / "activity.4").write_text("r\tmaybe\n")
    others = OtherRanksActivity(tmp_path, "r")
    with caplog.at_level(logging.WARNING):
        assert others.add({1: 2, 9: 3}) == {1: 2 + 4 + 5, 2: 1, 9: 3}
        assert others.waiting()  # (rank 2 waits for room)
        others.add({})
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "leaves out activity.4" in said[0], said  # (once)
    clear_activity_files(tmp_path)
    assert others.add({1: 2}) == {1: 2} and not others.waiting()


def test_rank_0_keeps_the_steps_each_rank_said_last(tmp_path: Path) -> None:
    """Rank 1 said 3 steps of simulation 1 (1 refused), then archived it (no longer
    listed) and said simulation 2; rank 2 said 4 of simulation 1: the sum per simulation
    is each rank's last word, a simulation no longer listed keeping its steps."""
    others = OtherRanksActivity(tmp_path, "r")
    write_activity(tmp_path / "activity.1", "r", {1: 3}, waiting=False, samples={1: (3, 1)})
    write_activity(tmp_path / "activity.2", "r", {1: 4}, waiting=False, samples={1: (4, 0)})
    others.add({})
    assert others.samples() == {1: (7, 1)}
    write_activity(tmp_path / "activity.1", "r", {2: 1}, waiting=False, samples={2: (1, 0)})
    others.add({})
    assert others.samples() == {1: (7, 1), 2: (1, 0)}
    write_activity(tmp_path / "activity.2", "r", {1: 6}, waiting=False, samples={1: (6, 0)})
    others.add({})
    assert others.samples() == {1: (9, 1), 2: (1, 0)}  # (rank 2's last word: 6, not 4 + 6)


def test_a_publisher_writes_on_change_only(tmp_path: Path) -> None:
    counts: dict[int, int] = {}
    publisher = ActivityPublisher(tmp_path, "r", 1, lambda: counts, lambda: False)
    publisher.publish()
    assert not publisher.path.exists()  # (nothing heard yet: no file)
    counts[5] = 2
    publisher.publish()
    assert read_activity(publisher.path, "r") == ({5: 2}, False, {5: (0, 0)}, {}, False)
    publisher.path.unlink()
    publisher.publish()  # (unchanged: not written again)
    assert not publisher.path.exists()
    counts[5] = 3
    wrote = threading.Event()
    publisher = ActivityPublisher(tmp_path, "r", 1, lambda: counts, lambda: False, every=0.01)
    original = publisher.publish

    def publish(final: bool = False) -> None:
        original(final)
        if publisher.path.exists():
            wrote.set()

    publisher.publish = publish  # type: ignore[method-assign]
    publisher.start()
    try:
        assert wrote.wait(30)
    finally:
        publisher.stop()
    assert not publisher.is_alive()
    assert read_activity(publisher.path, "r") == ({5: 3}, False, {5: (0, 0)}, {}, True)


def test_a_publisher_writes_its_steps_and_its_last_word_at_stop(tmp_path: Path) -> None:
    """A change of steps alone is written; `stop` writes its last word, marked final
    (rank 0's account waits for it: `wait_final`)."""
    counts, samples = {5: 2}, {5: (2, 0)}
    publisher = ActivityPublisher(
        tmp_path, "r", 1, lambda: counts, lambda: False, every=3600.0, samples=lambda: samples
    )
    publisher.publish()
    assert read_activity(publisher.path, "r") == ({5: 2}, False, {5: (2, 0)}, {}, False)
    samples[5] = (2, 1)  # (a step refused for NaN: counted, not a new message)
    publisher.publish()
    assert read_activity(publisher.path, "r") == ({5: 2}, False, {5: (2, 1)}, {}, False)
    publisher.start()
    counts[5], samples[5] = 3, (3, 1)
    publisher.stop()  # (the thread waits an hour between writes: this write is stop's)
    assert read_activity(publisher.path, "r") == ({5: 3}, False, {5: (3, 1)}, {}, True)


def test_each_rank_first_refused_step_is_kept_and_the_least_is_said(tmp_path: Path) -> None:
    """Ranks 1 and 2 each said the first step they refused of simulation 1 (5, then 3);
    a line without its first step (an older writer's) reads as none refused."""
    others = OtherRanksActivity(tmp_path, "r")
    write_activity(tmp_path / "activity.1", "r", {1: 3}, False, {1: (3, 1)}, {1: 5})
    write_activity(tmp_path / "activity.2", "r", {1: 4, 2: 1}, False, {1: (4, 2)}, {1: 3})
    others.add({})
    assert others.first_refused() == {1: 3}
    assert others.said_of(1) == [(1, 3, 1), (2, 4, 2)] and others.said_of(9) == []
    (tmp_path / "activity.3").write_text("r\t0\n4\t2\t2\t0\n")  # (4 fields, no final)
    assert read_activity(tmp_path / "activity.3", "r") == ({4: 2}, False, {4: (2, 0)}, {}, False)
    (tmp_path / "activity.3").write_text("r\t0\tdone\n")
    with pytest.raises(
        ValueError, match=r"activity\.3: first line .* 'run id<TAB>0\|1\[<TAB>final\]'"
    ):
        read_activity(tmp_path / "activity.3", "r")


def test_rank_0_waits_for_each_rank_last_word_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`wait_final` returns once every rank named wrote its last word (marked final by
    its publisher's `stop`); one that never does is said, once the bound has passed."""
    publisher = ActivityPublisher(tmp_path, "r", 1, lambda: {}, lambda: False, every=3600.0)
    publisher.stop()  # (never started, nothing heard: its last word is written all the same)
    others = OtherRanksActivity(tmp_path, "r")
    assert read_activity(publisher.path, "r") == ({}, False, {}, {}, True)
    assert others.wait_final([1], bound=60.0) == []
    with caplog.at_level(logging.WARNING):
        assert others.wait_final([1, 2], bound=0.0) == [2]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "the receiver of rank 2 wrote no last counts within 0 s" in said[0], (
        said
    )


def test_rank_0_stops_waiting_for_the_last_word_of_a_rank_known_ended(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`wait_final` waits no longer for a rank whose process is known ended (`gone`: its
    pid dead on this host, as `OnlineTrainer.peer_ended` tells): its last word never
    comes, and it is said ended, not silent past the bound; a rank that wrote its last
    word before it ended is heard (read once more); a rank not known ended is waited for
    as before. Failed before (hdead): no `gone` (a user's ``kill -9`` of rank 1: 5 s
    waited, "wrote no last counts within 5 s"). The oracle: the predicate's answers, a
    bound of an hour that only `gone` can end (the test's timeout: 60 s)."""
    write_activity(tmp_path / "activity.2", "r", {}, False, final=True)  # (its last word)
    asked: list[int] = []

    def gone(rank: int) -> bool:
        asked.append(rank)
        return rank in (1, 2)

    others = OtherRanksActivity(tmp_path, "r")
    with caplog.at_level(logging.WARNING):
        assert others.wait_final([1, 2], bound=3600.0, gone=gone) == [1]
        assert others.wait_final([3], bound=0.0, gone=gone) == [3]
    assert 2 not in asked, asked  # (heard final: not asked of)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith(
        "the receiver of rank 1 wrote no last counts: its process ended (known dead on "
        "this host): the study's account says its steps as of its last heartbeat"
    ), said
    assert "the receiver of rank 3 wrote no last counts within 0 s" in said[1], said


def test_a_last_word_written_as_the_rank_ended_is_heard(tmp_path: Path) -> None:
    """A rank that writes its last word between rank 0's read and its check of the pid
    (its process then ended) is heard: read once more once it is known ended."""
    others = OtherRanksActivity(tmp_path, "r")

    def gone(rank: int) -> bool:  # (it wrote, then ended, as the check came)
        write_activity(tmp_path / f"activity.{rank}", "r", {}, False, final=True)
        return True

    assert others.wait_final([1], bound=3600.0, gone=gone) == []


def test_a_simulation_archived_there_reads_back_with_its_steps_and_no_count(
    tmp_path: Path,
) -> None:
    """A simulation of `samples` not in `counts` (its ledger archived on that rank:
    `IngestQueries.archived_samples`) is written with messages ``-``: read back, its steps
    are said and no heartbeat count is added to rank 0's."""
    path = tmp_path / "activity.1"
    write_activity(path, "r", {3: 7}, False, {3: (5, 0), 9: (4, 1)}, {9: 2}, final=True)
    assert "9\t-\t4\t1\t2" in path.read_text().splitlines()
    assert read_activity(path, "r") == ({3: 7}, False, {3: (5, 0), 9: (4, 1)}, {9: 2}, True)
    others = OtherRanksActivity(tmp_path, "r")
    assert others.add({}) == {3: 7} and others.samples() == {3: (5, 0), 9: (4, 1)}
    path.write_text("r\t0\n9\t-\tx\t1\n")
    with pytest.raises(ValueError, match="messages|-"):
        read_activity(path, "r")
