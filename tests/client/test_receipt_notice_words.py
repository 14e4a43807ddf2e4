"""The receipt phase's notice (`receipts.Rounds._tell`: "closing, its BYE is not
confirmed yet") in the C client's words: the Python text, its setters translated
(`close_words.c_words`), is the text clients/c/tests/unit_close_notice.c pins for the same inputs
(close_notice.c mt_receipt_notice_text). Before, the C receipt phase said nothing while
it waited (tests/c/test_c_close_receipt_notice.py: its solver's stderr)."""

from __future__ import annotations

import logging
from collections import Counter
from types import SimpleNamespace

import pytest
from close_words import c_words

from melissa_trainer.client import ClientTuning, receipts
from melissa_trainer.client.receipts import Rounds

HEAD = (
    "simulation 5 rank 0: closing, its BYE is not confirmed yet: the trainer's receiver 0 "
    "(tcp://127.0.0.1:2) has neither answered nor been connected since 12:00:00 (1 s: the "
    "trainer died or stopped, or its node). "
)
NOW = 1000.0


#: (disconnected, close, follow_wait, deadline from now, capped) -> the C words
CASES = [
    (2.0, 600.0, 1.0, 590.0, False,
     "The close waits up to 1 s more for it to answer (mt_set_disconnected_timeout=2.0 s), "
     "then up to 1 s (mt_set_follow_timeout=1.0 s) for a restarted trainer to publish in "
     "/rv, and follows it (at once if it publishes sooner): up to 2 s more, 3 s in all. "
     "mt_set_disconnected_timeout and mt_set_follow_timeout shorten it; nothing more is "
     "said until the close ends."),
    (600.0, 2.0, None, 12.0, True,
     "The close waits up to 12 s more for it to answer (mt_set_close_timeout=2.0 s, 10 "
     "times it in all: the close's cap). mt_set_close_timeout shortens it; nothing more is "
     "said until the close ends."),
    (600.0, 2.0, None, 12.0, False,
     "The close waits up to 12 s more for it to answer (mt_set_close_timeout=2.0 s). "
     "mt_set_close_timeout shortens it; nothing more is said until the close ends."),
    (None, None, None, None, False,
     "The close waits for it to answer, with no bound (mt_set_close_timeout and "
     "mt_set_disconnected_timeout are < 0). nothing more is said until the close ends."),
]  # fmt: skip


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("disconnected", "close", "follow", "left", "capped", "want"), CASES)
def test_the_python_receipt_notice_in_c_words_is_the_c_text(
    disconnected: float | None,
    close: float | None,
    follow: float | None,
    left: float | None,
    capped: bool,
    want: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = SimpleNamespace(
        monotonic=lambda: NOW, time=lambda: 0.0, localtime=lambda _: None,
        strftime=lambda _fmt, _t: "12:00:00",
    )  # fmt: skip
    monkeypatch.setattr(receipts, "time", clock)
    tuning = ClientTuning(close_timeout=close, disconnected_timeout=disconnected)
    client = SimpleNamespace(
        simulation_id=5, rank=0, ranks=1, run_id="run-a", endpoints=["tcp://127.0.0.1:1"],
        tuning=tuning, admission_rejected=Counter(), bye_counts=[4],
    )  # fmt: skip
    entry = {"endpoint": "tcp://127.0.0.1:1", "follow_endpoint": "tcp://127.0.0.1:2"}
    rounds = Rounds(client, [entry], "simulation 5 rank 0")  # type: ignore[arg-type]
    deadline = None if left is None else NOW + left
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
        rounds._tell(0, NOW - 1.0, deadline, capped, "/rv", follow, NOW - 1.25)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1, said
    assert c_words(said[0]) == HEAD + want
