"""A close's waiting notice names the bound that really ends its wait: once the close's
cap in all (`delivery.CLOSE_CAP_FACTOR` x ``close_timeout``, `delivery.capped_deadline`)
holds its deadline back, the cap, not ``close_timeout`` (which, counted from the last
progress, would end the wait later than it ends). Both phases: the receipts'
(`receipts.Rounds._tell`) and the delivery's (`delivery.DeliveryWait.bound_said`, which
`patience.CloseWait`'s notice names); the C client's delivery notice says the same words
(close_cap.c mt_close_cap_bound; clients/c/tests/unit_close_cap.c pins them).

Before: the receipt phase's notice said "(ClientTuning.close_timeout=2.0 s)" with the
seconds left to the cap, a bound that was not the one."""

from __future__ import annotations

import logging
import time
from collections import Counter
from types import SimpleNamespace

import pytest

from melissa_trainer.client import ClientTuning
from melissa_trainer.client.delivery import DeliveryWait, cap_bound
from melissa_trainer.client.receipts import Rounds

#: the words, pinned: clients/c/tests/unit_close_cap.c checks the C client's ("mt_set_...")
WORDS = "ClientTuning.close_timeout=2.0 s, 10 times it in all: the close's cap"


def test_the_cap_bound_words() -> None:
    assert cap_bound("ClientTuning.close_timeout", 2.0) == WORDS
    assert cap_bound("mt_set_close_timeout", 2.0) == WORDS.replace(
        "ClientTuning.close_timeout", "mt_set_close_timeout"
    )


def _rounds() -> Rounds:
    client = SimpleNamespace(
        simulation_id=3, rank=0, ranks=1, run_id="run-a", endpoints=["tcp://127.0.0.1:1"],
        tuning=ClientTuning(close_timeout=2.0, disconnected_timeout=600.0),
        admission_rejected=Counter(), bye_counts=[4],
    )  # fmt: skip
    entry = {"endpoint": "tcp://127.0.0.1:1", "follow_endpoint": "tcp://127.0.0.1:2"}
    return Rounds(client, [entry], "simulation 3 rank 0")  # type: ignore[arg-type]


@pytest.mark.parametrize("capped", [True, False])
def test_the_receipt_notice_names_the_cap_when_it_holds_the_deadline(
    capped: bool, caplog: pytest.LogCaptureFixture
) -> None:
    now = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="melissa_trainer.client.client"):
        _rounds()._tell(0, now - 6, now + 12, capped, "/rv", None, now - 30)
    said = caplog.text
    assert "closing, its BYE is not confirmed yet" in said, said
    if capped:
        assert f"more for it to answer ({WORDS})" in said, said
    else:
        assert "more for it to answer (ClientTuning.close_timeout=2.0 s)" in said, said


def test_the_delivery_notice_names_the_cap_when_it_holds_the_deadline() -> None:
    wait = DeliveryWait([], ["tcp://127.0.0.1:1"], 2.0, 60.0, simulation_id=3)
    assert wait.bound_said() == "ClientTuning.close_timeout=2.0 s"
    wait.capped = True  # (as `moved` sets it when the cap held the deadline back)
    assert wait.bound_said() == WORDS
