"""The reuse warning's advice on --batch_size says the largest batch size that keeps each
sample's draws within 10% of the ratio R (``R x (1 - batch_size / P)``, P samples per
rank: ``batch_size <= P / 10``) in words that read right for every P. A user read
"within 10% of R for --batch_size <= 1" as nonsense; under 10 samples per rank it said
"<= 1" of a bound no batch size meets."""

from __future__ import annotations

import pytest

from melissa_trainer import TrainerState
from melissa_trainer.hooks.reuse import reuse_report


def advice(per_rank: int, ranks: int = 1) -> str:
    """The warning of a stream of `per_rank` samples per rank, read by batches of more
    (no batch served before the end: the advice on --batch_size is given)."""
    put = float(per_rank * ranks)
    state = TrainerState(global_step=1, total_samples_seen=per_rank * ranks, stream_ended=True)
    state.append_log({"buffer_put": put, "buffer_got": put})
    report = reuse_report(state, 1, ranks, ratio=16.0, batch_size=per_rank + 1)
    assert report is not None and report[1] is not None
    return report[1]


@pytest.mark.parametrize(
    ("per_rank", "ranks", "said"),
    [
        (150, 1, "within 10% of R for a --batch_size of 15 or less)"),
        (150, 2, "within 10% of R for a --batch_size of 15 or less)"),
        (29, 1, "within 10% of R for a --batch_size of 2 or less)"),
        (20, 1, "within 10% of R for a --batch_size of 2 or less)"),
        (19, 1, "within 10% of R only for a --batch_size of 1)"),
        (10, 1, "within 10% of R only for a --batch_size of 1)"),
        (9, 1, "no --batch_size comes within 10% of R with under 10 samples per rank)"),
        (1, 3, "no --batch_size comes within 10% of R with under 10 samples per rank)"),
    ],
)
def test_the_batch_size_within_ten_percent_is_said_in_words_that_hold(
    per_rank: int, ranks: int, said: str
) -> None:
    words = advice(per_rank, ranks)
    drawn = f"drawn about R x (1 - batch_size / {per_rank}) times in process: {said}"
    assert drawn in words, words
    assert "<=" not in words
    # the bound said holds: its batch size's draws are within 10% of R, the next one's not
    largest = per_rank // 10
    if largest:
        assert 1 - largest / per_rank >= 0.9
    assert 1 - (largest + 1) / per_rank < 0.9
