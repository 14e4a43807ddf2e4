"""Stand-ins for `after_train.meet_after_train`'s tests without a launch: a rank's
trainer (a namespace) and torch's `HashStore` in the launcher's store's place
(tests/trainer/test_after_train_meet.py, test_after_train_instant.py)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from torch.distributed import HashStore

from melissa_trainer.trainer import after_train
from melissa_trainer.trainer.direct_calls import DirectCalls
from melissa_trainer.trainer.refusal_mark import StoreLink

__all__ = ["fake_trainer", "linked_store"]


def fake_trainer(rank: int = 0, distributed: bool = True, ended: bool = True) -> Any:
    """Rank `rank` of 2's trainer as `meet_after_train` reads it, its `train()` ended."""
    return SimpleNamespace(
        stop_sync=SimpleNamespace(distributed=distributed), train_ended=ended,
        process_index=rank, num_processes=2, run_id="run",
        accelerator=SimpleNamespace(device="cpu"), direct_calls=DirectCalls(),
    )  # fmt: skip


def linked_store(monkeypatch: pytest.MonkeyPatch) -> Iterator[HashStore]:
    """One store for every `launch_store()` of a test, the group's timeout 0.2 s; a
    fixture's body (``yield from``): the socket pairs closed at its end."""
    shared = HashStore()
    ends: list[socket.socket] = []

    def link() -> StoreLink:
        probe, other = socket.socketpair()
        ends.extend((probe, other))
        return StoreLink(shared, probe)  # type: ignore[arg-type]

    monkeypatch.setattr(after_train, "launch_store", link)
    monkeypatch.setattr(after_train, "group_timeout", lambda device: 0.2)
    yield shared
    for end in ends:
        end.close()
