"""The roll call in the launcher's store (`trainer.roll_call`): each rank's count of
waits, kept where a stopped rank cannot hold it, names the ranks not at a wait. A real
``TCPStore`` hosted by this process stands for torch elastic's agent store; the ranks
are three `StoreRollCall` s of it."""

from __future__ import annotations

import datetime
import gc
import logging
from collections import Counter
from collections.abc import Iterator

import pytest
from torch.distributed import TCPStore

from melissa_trainer.trainer import roll_call
from melissa_trainer.trainer.roll_call import StoreRollCall, launch_roll_call


@pytest.fixture
def agent_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, TCPStore]]:
    """The store, in a dict that a test may empty (the store ends with its last reference)."""
    store = TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=10))
    # (the ranks here share one process: each test's count their trainers from 0)
    monkeypatch.setattr(roll_call, "_made", Counter())
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(store.port))
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "roll-test")
    stores = {"store": store}
    del store  # (the dict holds the only reference: a test ends the store by emptying it)
    yield stores
    del stores
    gc.collect()  # (a store left to the collector stalls another's connection: see the
    # store fixture of test_refusal_own_error_once.py)


@pytest.mark.timeout(60)
def test_the_ranks_not_seen_at_a_wait_are_named(agent_store: dict[str, TCPStore]) -> None:
    ranks = [launch_roll_call(r, 3) for r in range(3)]
    assert all(isinstance(r, StoreRollCall) for r in ranks)
    zero, one, two = (r for r in ranks if r is not None)
    assert zero.late(1) == [1, 2]  # nobody told anything yet
    zero.arrived(1)
    one.arrived(1)
    assert zero.late(1) == [2] and one.late(1) == [2]
    two.arrived(1)
    assert zero.late(1) == []
    zero.arrived(4)  # (waits too short to be seen are skipped: counts jump)
    two.arrived(4)
    assert zero.late(4) == [1] and two.late(3) == [1]


@pytest.mark.timeout(60)
def test_no_roll_call_without_an_agent_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    assert launch_roll_call(0, 2) is None
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    assert launch_roll_call(0, 1) is None  # (one process: nobody to wait for)


@pytest.mark.timeout(60)
def test_a_store_gone_ends_the_roll_call_saying_so_once(
    agent_store: dict[str, TCPStore], caplog: pytest.LogCaptureFixture
) -> None:
    roll = launch_roll_call(0, 3)
    assert roll is not None
    roll.arrived(1)
    agent_store.clear()  # the launcher ended: its store with it
    caplog.set_level(logging.INFO, "melissa_trainer.trainer.roll_call")
    assert roll.late(1) is None and roll.late(2) is None
    roll.arrived(3)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "names no late rank any more" in said[0], said
