"""The instant between a rank's give-up of its check-in after `train()` and the mark
of it (`after_train.meet_after_train`): rank 1 comes just then, reads rank 0's check-in
as made and enters the call's collective; rank 0 must then go on into it too, not
raise (the ranks would part: rank 1 alone in the collective, held to the group's
timeout). A store of torch's (`HashStore`, which has the compare-and-set of the
launcher's ``TCPStore``) stands in for the launcher's, a namespace for each rank's
trainer; the instant is made by running rank 1's whole check-in inside rank 0's wait,
before that wait gives up.

Before the fix rank 0 withdrew its key after rank 1 had read it, and raised
(`AfterTrainError`: "rank(s) 1 did not call it"), while rank 1 had returned: the
``meet_after_train(zero, ...)`` below raised. Now the ranks' outcome is decided once,
by compare-and-set: rank 1 decided they met, and rank 0's give-up follows it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from after_train_store import fake_trainer, linked_store
from torch.distributed import HashStore

from melissa_trainer.trainer import after_train
from melissa_trainer.trainer.refusal_mark import StoreLink

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Iterator[HashStore]:
    yield from linked_store(monkeypatch)


def test_a_rank_that_came_as_the_other_gave_up_meets_it(
    store: HashStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    zero, one = fake_trainer(0), fake_trainer(1)
    real = after_train._wait_others
    came: list[int] = []

    def wait(link: StoreLink, call: str, trainer: Any, *rest: Any) -> None:
        if trainer.process_index != 0:
            return real(link, call, trainer, *rest)
        after_train.meet_after_train(one, call)  # rank 1 comes: it returns (goes on)
        came.append(1)
        raise after_train.AfterTrainError("rank(s) 1 did not call it within 0.2 s")

    monkeypatch.setattr(after_train, "_wait_others", wait)
    after_train.meet_after_train(zero, "save_checkpoint")  # goes on too: no raise
    assert came == [1]
    assert zero.direct_calls.after_train == one.direct_calls.after_train == 1


def test_a_rank_that_gave_up_first_makes_the_one_that_came_raise_too(
    store: HashStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other order of the same instant: rank 0 gives up, and rank 1, which sees
    rank 0's key still as a check-in, raises rather than enter the collective alone."""
    zero, one = fake_trainer(0), fake_trainer(1)
    real = after_train._wait_others

    def wait(link: StoreLink, call: str, trainer: Any, *rest: Any) -> None:
        if trainer.process_index == 0:  # (past its bound: rank 1 not there yet)
            raise after_train.AfterTrainError("rank(s) 1 did not call it within 0.2 s")
        return real(link, call, trainer, *rest)

    monkeypatch.setattr(after_train, "_wait_others", wait)
    with pytest.raises(after_train.AfterTrainError, match="did not call it"):
        after_train.meet_after_train(zero, "evaluate")
    with pytest.raises(after_train.AfterTrainError, match="rank 0 gave up its trainer.evaluate"):
        after_train.meet_after_train(one, "evaluate")
