"""A stream that ends on `expected_simulations` while another simulation is part-way says
so (`IngestState.check_expected`). Seen in external mode: three solvers started for a
trainer given `expected_simulations=2`; the trainer ended when two had finished, having
trained on part of the third's steps, and said nothing but `ignored_after_end 45` in a
log line, while the third solver failed 3 minutes later blaming a stopped trainer."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.wire import Bye, Data, FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def make(ends: list[str], expected: int = 2) -> Ingest:
    return Ingest(
        0,
        1,
        put=lambda sample: True,
        end=ends.append,
        expected=expected,
        max_field_bytes=1 << 20,
        max_pending=8,
        max_pending_bytes=1 << 20,
        max_time_step=1 << 20,
        recent_size=8,
    )


def send(ing: Ingest, sid: int, steps: range, bye: bool) -> None:
    ing.hello(Hello(sid, 0, 1, (FIELD,), {"a": float(sid)}))
    for t in steps:
        payload = np.array([sid, t], np.float32).tobytes()
        ing.data(Data(sid, t, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    if bye:
        ing.bye(Bye(sid, 0, 1, len(steps)))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_simulation_part_way_at_the_end_is_named(caplog: pytest.LogCaptureFixture) -> None:
    ends: list[str] = []
    ing = make(ends)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        send(ing, 7, range(3), bye=False)  # the third solver, part-way
        send(ing, 0, range(4), bye=True)
        send(ing, 1, range(4), bye=True)  # the second finished: the stream ends
    assert len(ends) == 1
    (warning,) = warnings_of(caplog)
    assert "expected_simulations=2" in warning
    assert (
        "1 other simulation had begun here and not finished (7)" in warning
        and "3 of their samples" in warning
    )
    assert "raise ReceiverConfig.expected_simulations" in warning


def test_no_word_when_every_simulation_begun_finished(caplog: pytest.LogCaptureFixture) -> None:
    ends: list[str] = []
    ing = make(ends)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        send(ing, 0, range(4), bye=True)
        send(ing, 1, range(4), bye=True)
    assert len(ends) == 1
    assert warnings_of(caplog) == []


def test_one_sample_and_one_simulation_are_said_in_the_singular(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A user read "1 of their samples were put": a count of one says its noun singular
    (`words.plural`), in the warning and in the stream's end. Failed before: "1 of
    their samples were put", "1 simulations finished"."""
    ends: list[str] = []
    ing = make(ends, expected=1)
    with caplog.at_level(logging.INFO, logger="melissa_trainer.stream.receiver"):
        send(ing, 7, range(1), bye=False)  # one sample of a solver part-way
        send(ing, 0, range(4), bye=True)  # the one expected finished: the stream ends
    assert ends == ["1 simulation finished, 0 abandoned"]
    (warning,) = warnings_of(caplog)
    assert ": 1 of their samples was put into the buffer (and trained on)" in warning, warning
