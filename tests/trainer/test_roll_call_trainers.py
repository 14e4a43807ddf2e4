"""The roll call per trainer (the review's hrev6, items 4 and 5): a second trainer in the
same process read the first one's counts (a rank late in it was not named), each trainer
kept two sockets to the store, and each warning read the counts in world-size requests."""

from __future__ import annotations

from typing import Any

import pytest
from test_roll_call import agent_store  # noqa: F401  (the launcher's store, a fixture)
from torch.distributed import TCPStore

from melissa_trainer.trainer.roll_call import StoreRollCall, close_roll, launch_roll_call


def _rolls() -> list[StoreRollCall]:
    rolls = [launch_roll_call(r, 3) for r in range(3)]
    assert all(isinstance(r, StoreRollCall) for r in rolls)
    return [r for r in rolls if r is not None]


@pytest.mark.timeout(60)
def test_a_second_trainer_names_the_late_rank(agent_store: dict[str, TCPStore]) -> None:  # noqa: F811
    for roll in _rolls():
        roll.arrived(40)  # trainer 1: 40 waits seen on every rank
    zero, one, two = _rolls()  # trainer 2, same process, same run
    zero.arrived(3)
    two.arrived(3)
    assert zero.late(3) == [1]  # rank 1 told nothing in trainer 2


class Counting:
    """A store's client that counts the requests made through it."""

    def __init__(self, store: Any) -> None:
        self.store, self.requests = store, 0

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.store, name)

        def counted(*args: Any) -> Any:
            self.requests += 1
            return call(*args)

        return counted


@pytest.mark.timeout(60)
def test_a_warning_reads_the_counts_in_one_request(agent_store: dict[str, TCPStore]) -> None:  # noqa: F811
    zero, one, _ = _rolls()
    one.arrived(2)
    zero.arrived(2)
    assert zero._link is not None
    counting = Counting(zero._link.store)
    zero._link.store = counting  # type: ignore[assignment]
    assert zero.late(2) == [2]
    assert counting.requests == 1


@pytest.mark.timeout(60)
def test_close_frees_the_sockets_and_the_next_wait_reconnects(
    agent_store: dict[str, TCPStore],  # noqa: F811
) -> None:
    zero, one, _ = _rolls()
    zero.arrived(1)
    link = zero._link
    assert link is not None
    close_roll(zero)
    assert zero._link is None and link._probe.fileno() == -1  # (closed)
    one.arrived(1)
    assert zero.late(1) == [2]  # connected again, counts kept
    close_roll(None)  # (no roll call: nothing to close)
    for roll in (zero, one):
        roll.close()
