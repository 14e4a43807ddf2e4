"""docs/how-to/preemption.md: "the previous [signal handlers] are back when `train()`
returns or raises". The preemption tests check them after a `Preempted`; these check
them after a run that ends and after one that a hook's own error ends.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from helpers import linear_samples
from preemption_runs import make_trainer

from melissa_trainer import Hook, TrainerControl, TrainerState

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class FailAt(Hook):
    """Notes the handlers during step 1; raises its own error at the end of step `step`
    (None: never)."""

    def __init__(self, step: int | None) -> None:
        self.step = step
        self.during: dict[int, Any] = {}

    def on_step_end(self, trainer: Any, state: TrainerState, control: TrainerControl) -> None:
        if state.global_step == 1:
            self.during = {s: signal.getsignal(s) for s in SIGNALS}
        if state.global_step == self.step:
            raise RuntimeError(f"the hook's own error at step {self.step}")


def mark(signum: int, frame: Any) -> None:
    """A handler of the test's own, told apart from pytest's and the trainer's."""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("fail_at", [None, 2])
def test_the_handlers_from_before_train_are_back_after_it(
    tmp_path: Path, fail_at: int | None
) -> None:
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    try:
        for s in SIGNALS:
            signal.signal(s, mark)
        hook = FailAt(fail_at)
        trainer = make_trainer(tmp_path / "out", list(linear_samples(64)), [hook])
        if fail_at is None:
            trainer.train()
        else:
            with pytest.raises(RuntimeError, match="the hook's own error"):
                trainer.train()
        # the trainer's own while it trained (else the check below proves nothing)...
        assert set(hook.during) == set(SIGNALS) and mark not in hook.during.values()
        # ...and the test's again once train() returned or raised
        assert {s: signal.getsignal(s) for s in SIGNALS} == {s: mark for s in SIGNALS}
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
