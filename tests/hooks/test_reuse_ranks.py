"""The reuse warning under several ranks gives each rank's figure, never a mean said per
rank: a user trial read "20 per rank" of ranks that took 30 and 11 (its watermark
warning then said "never filled the buffer", which rank 0's did). The rank that received
the fewest bounds the run (every step waits for every rank): the causes are judged on
its figure. The oracle: the figures given, and the rule of the docstring."""

from __future__ import annotations

import pytest

from melissa_trainer import TrainerState
from melissa_trainer.hooks.reuse import reuse_report

pytestmark = pytest.mark.timeout(60)


def report(rank_puts: list[int], num_processes: int = 2, **kwargs: object) -> tuple[str, str]:
    put = float(sum(rank_puts))
    state = TrainerState(global_step=8, total_samples_seen=int(put), stream_ended=True)
    state.append_log({"buffer_put": put, "buffer_got": put})
    got = reuse_report(state, num_processes=num_processes, rank_puts=rank_puts, **kwargs)  # type: ignore[arg-type]
    assert got is not None and got[1] is not None
    return got[0], got[1]


def test_unequal_ranks_are_each_said_and_the_fewest_judged() -> None:
    # mean 20.5, below the watermark 21 x 2: before, "41 samples, 20 per rank"
    line, warning = report([30, 11], watermark=21)
    assert line.endswith("of 41 inserted, all ranks: 30 on rank 0 and 11 on rank 1)")
    assert "The stream (41 samples, 30 on rank 0 and 11 on rank 1) never filled rank 1's" in warning
    assert "per rank" not in warning.split("lower --watermark")[0]
    # a mean above the watermark (20.5 > 15) with one rank below: still the watermark's doing
    _, warning = report([30, 11], watermark=15)
    assert "never filled rank 1's buffer to --watermark 15" in warning


def test_a_batch_larger_than_the_fewest_is_named_with_each_rank() -> None:
    _, warning = report([30, 11], ratio=16.0, batch_size=20)
    assert (
        "more than the 11 the stream brought rank 1 (30 on rank 0 and 11 on rank 1; 41" in warning
    )
    assert "batch_size / 11)" in warning  # the advice on the rank that bounds the run


def test_many_ranks_are_given_as_a_range_and_equal_ones_as_before() -> None:
    _, warning = report([10, 30, 10, 20, 30], num_processes=5, watermark=40)
    assert "(100 samples, 10 to 30 per rank) never filled the buffers of ranks 0 and 2" in warning
    _, warning = report([20, 20], watermark=25)
    assert "(40 samples, 20 per rank) never filled the buffer to" in warning


def test_without_the_ranks_figures_a_mean_is_said_to_be_one() -> None:
    """A log history resumed from a checkpoint has no ranks' figures (nor do figures that
    do not add up to the log's): the mean, said so."""
    for rank_puts in ([], [30, 10]):
        state = TrainerState(global_step=8, total_samples_seen=41, stream_ended=True)
        state.append_log({"buffer_put": 41.0, "buffer_got": 41.0})
        got = reuse_report(state, 21, 2, rank_puts=rank_puts)
        assert got is not None and got[1] is not None
        assert "(41 samples, 20 per rank on average) never filled the buffer" in got[1]
        assert got[0].endswith("of 41 inserted, all ranks)")


def test_one_rank_s_figures_keep_its_put_count_beside_the_log() -> None:
    """`LogFigures.reduce` keeps each rank's put count (`rank_puts`, what the progress
    hook gives `reuse_report`), not in the log; on one rank, the log's ``buffer_put``.
    (Two ranks: tests/trainer/test_rank_figures.py.)"""
    import numpy as np
    import torch

    from melissa_trainer.buffers import FIFOBuffer
    from melissa_trainer.core.figures import LogFigures

    class Source:
        study_keys: frozenset[str] = frozenset()

        def telemetry(self) -> dict[str, float]:
            return {}

    buffer = FIFOBuffer(8)
    for i in range(3):
        buffer.put({"x": np.asarray(float(i))})
    figures = LogFigures(torch.device("cpu"))
    assert figures.rank_puts == []
    logs, _, _ = figures.reduce(buffer, Source(), 1, False, 0.1)  # type: ignore[arg-type]
    assert figures.rank_puts == [3] and logs["buffer_put"] == 3.0
    assert "rank_puts" not in logs
