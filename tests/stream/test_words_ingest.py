"""The receiver's counts read as words (`common.words.plural`): "1 other simulation
had begun", "skipped 1 time step", never "(s)" (`IngestState`'s rerun summary and its
warning of simulations part-way at the stream's end). Ingest's set-up:
`test_end_with_unfinished`'s."""

from __future__ import annotations

import logging

import pytest
from test_end_with_unfinished import make, send, warnings_of


@pytest.mark.parametrize(
    ("part_way", "words"), [(1, "1 other simulation had"), (2, "2 other simulations had")]
)
def test_the_simulations_part_way_at_the_end_are_counted_in_words(
    caplog: pytest.LogCaptureFixture, part_way: int, words: str
) -> None:
    ends: list[str] = []
    ing = make(ends)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        for sid in range(7, 7 + part_way):
            send(ing, sid, range(3), bye=False)
        send(ing, 0, range(4), bye=True)
        send(ing, 1, range(4), bye=True)  # the second finished: the stream ends
    (warning,) = warnings_of(caplog)
    assert f"{words} begun here and not finished" in warning and "(s)" not in warning, warning


@pytest.mark.parametrize(
    ("held", "words"), [(1, "skipped 1 time step the"), (2, "skipped 2 time steps the")]
)
def test_a_rerun_s_skipped_steps_are_counted_in_words(
    caplog: pytest.LogCaptureFixture, held: int, words: str
) -> None:
    ing = make([])
    ing.rerun_held[0] = held  # (as the receiver's follow server records it)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream"):
        send(ing, 0, range(4), bye=True)
    (said,) = [r.getMessage() for r in caplog.records if "rerun skipped" in r.getMessage()]
    assert said == (
        f"simulation 0: its rerun {words} receiver of rank 0 already held (from its "
        f"checkpoint or an earlier run of it) and sent {4 - held} new"
    ), said
