"""A signal that reaches `PreemptionHandler`'s own handler just before `restore` is still
the handler's, however late its watcher thread reads it (the wakeup descriptor is put
back after the handlers, so every byte read after `restore` came before it).

Before, the watcher ignored every signal whose handler was no longer its own when it read
it (a guard meant for a `hold_term` hold installed over it): a SIGTERM noted as
`train()` ended (`finished`) and read after `restore` was dropped, `deliver_late` raised
nothing, and the script exited 0 where the scheduler's SIGTERM asked for 143."""

from __future__ import annotations

import signal
from types import FrameType

import pytest

from melissa_trainer.trainer.preemption import PreemptionHandler

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("attempt", range(5))
def test_a_late_signal_noted_just_before_restore_is_delivered_again(attempt: int) -> None:
    seen: list[int] = []

    def previous(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    before = signal.signal(signal.SIGUSR1, previous)
    try:
        handler = PreemptionHandler(signals=(signal.SIGUSR1,), parent=None).install()
        handler.finished = True  # (train()'s loop ended normally: a signal is "late")
        signal.raise_signal(signal.SIGUSR1)
        handler.restore()  # at once: the watcher may read the byte only after this
        assert handler.requested()
        handler.deliver_late()  # raises it again for `previous`
        assert seen == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, before)


def test_a_signal_a_handler_installed_over_ours_has_is_still_no_request() -> None:
    """The guard's own case stays: a handler installed over the watcher's (a hold's)."""
    seen: list[int] = []
    handler = PreemptionHandler(signals=(signal.SIGUSR1,), parent=None).install()
    try:
        signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
        signal.raise_signal(signal.SIGUSR1)
    finally:
        handler.restore()  # (leaves the handler installed over it in place)
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
    assert seen == [signal.SIGUSR1]
    assert not handler.requested()
