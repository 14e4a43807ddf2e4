"""The study's counts read as words (`common.words.plural`): "1 worker started",
"1 simulation taken and running", "1 job alive", "1 simulation pending", "told which 1
simulation ended", "the training losses of 1 simulation", never "1 workers" or
"1 simulations" (`study.first_data`, `study.starvation`, `study.end_notice`,
`study.feedback`)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from melissa_trainer.core.data_wait import in_queue
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.study import end_notice
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.feedback import few_line, unfed_line
from melissa_trainer.study.first_data import FirstDataNotice
from melissa_trainer.study.progress_words import launcher_words, rank0_words


def test_the_scheduler_s_queue_is_counted_in_words() -> None:
    assert in_queue(1, {}, "simulation").startswith(", 1 simulation queued by the scheduler")
    assert in_queue(2, {}, "worker") == ", 2 workers queued by the scheduler, not started yet"


class Workers:
    """A launcher in worker mode: `alive` workers, `running` simulations taken."""

    worker = True

    def __init__(self, alive: int, running: int) -> None:
        self.alive, self.running = alive, running

    def summary(self) -> dict[str, float]:
        return {"running": float(self.running), "restarts": 0.0}

    def queued(self) -> tuple[int, dict[str, int]]:
        return 0, {}

    def jobs_alive(self) -> int:
        return self.alive


@pytest.mark.parametrize(
    ("alive", "running", "words"),
    [
        (1, 1, "(worker mode): 1 worker started, 1 simulation taken and running, 0 restarted"),
        (2, 0, "(worker mode): 2 workers started, 0 simulations taken and running, 0 restarted"),
    ],
)
def test_the_first_data_notice_counts_workers_in_words(
    caplog: pytest.LogCaptureFixture, alive: int, running: int, words: str
) -> None:
    notice = FirstDataNotice(after=0.0, clock=lambda: 10.0)
    notice.started(0, Path("logs"))
    launcher: Any = Workers(alive, running)
    with caplog.at_level(logging.WARNING, "melissa_trainer.study.first_data"):
        assert notice.check(0, launcher)
    (said,) = [r.getMessage() for r in caplog.records]
    assert words in said, said


def test_rank_0_s_counts_read_as_words() -> None:
    progress = {"jobs_alive": 1, "pending": 1, "finished": 0}
    assert "Rank 0's launcher: 1 job alive, 1 simulation pending, 0 finished" in rank0_words(
        {**progress, "written": 0.0}, 1
    )
    assert "? jobs alive, ? simulations pending" in rank0_words({"written": 0.0}, 1)
    words = launcher_words({"pending": 1.0, "finished": 0.0}, 1, False)
    assert "Rank 0's launcher: 1 job alive, 1 simulation pending, 0 finished" in words, words
    words = launcher_words({"pending": 2.0, "finished": 0.0}, 2, False)
    assert "Rank 0's launcher: 2 jobs alive, 2 simulations pending, 0 finished" in words, words


@pytest.mark.parametrize(
    ("finished", "words"),
    [([4], "which 1 simulation ended"), ([4, 5], "which 2 simulations ended")],
)
def test_the_study_end_counts_the_simulations_in_words(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    finished: list[int],
    words: str,
) -> None:
    """A study done (no job alive): the notice sends the ids of those that ended with
    exit 0 to rank 1 (the send faked: `send_study_end`'s own tests are the stream's)."""
    launcher: Any = SimpleNamespace(
        tuning=SimpleNamespace(poll_interval=0.01),
        done=True,
        jobs_alive=lambda: 0,
        outcomes=lambda: [SimpleNamespace(simulation_id=i, status="finished") for i in finished],
    )
    monkeypatch.setattr(end_notice, "fetch_rendezvous", lambda _: [{"rank": 1, "endpoint": "e"}])
    sent: list[list[int]] = []
    monkeypatch.setattr(end_notice, "send_study_end", lambda _, ids, **kw: sent.append(ids))
    notice = StudyEndNotice(launcher, tmp_path)
    with caplog.at_level(logging.INFO, "melissa_trainer.study.end_notice"):
        notice._run()  # (the thread's body, here)
    assert sent == [finished] and notice.told.is_set()
    (said,) = [r.getMessage() for r in caplog.records if "has ended" in r.getMessage()]
    assert f"the study has ended: ranks [1] told {words} with exit 0" in said, said


def drawn(sampler: AdaptiveSampler, draws: int, observed_before: int) -> AdaptiveSampler:
    """`sampler` after `draws` draws, the first `observed_before` of them observed."""
    made = [sampler.draw() for _ in range(observed_before)]
    for sid, parameters in enumerate(made):
        sampler.observe(sid, parameters, float(sid))
    for _ in range(draws - observed_before):
        sampler.draw()
    return sampler


def test_the_feedback_lines_count_simulations_in_words() -> None:
    bounds = {"a": (0.0, 1.0)}
    line = unfed_line(drawn(BreedSampler(bounds, exploration=0.5), 12, observed_before=1), 20)
    assert line is not None and "held the training losses of 1 simulation, and" in line, line
    few = BreedSampler(bounds, exploration=0.5, min_observations=1)
    first = [few.draw() for _ in range(38)]  # its one loss comes late: few draws adapt
    few.observe(0, first[0], 1.0)
    few.draw(), few.draw()
    line = few_line(few, 20)
    assert line is not None and "training losses of at least 1 simulation, min_obs" in line, line
