"""A trainer that fails with an error that is not a `SourceError` (a hook raising, the
user's `process_sample`, the loss guard's `NonFiniteLossError`) tells its source why
(`Source.note_stop("error", ...)`): its receivers' stop record (docs/protocol.md,
section 17b) then says ``error`` and names the exception, so that a simulation closing
as it fails does not wait as for a trainer that might come back. Before, the record
said ``stopped``. A raw `KeyboardInterrupt` (Ctrl-C not taken by the trainer's handler)
records ``preempted``: its solvers follow the resumed run (`trainer.failing.failed`), and so
does a forced exit (a second signal: `trainer.starting.forced_stop`).
The oracle is the rendezvous file the receiver wrote, read as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stop_records import failing_trainer, recorded_reason

from melissa_trainer.hooks import Hook


class Boom(RuntimeError):
    """The hook's own error (a name the record must carry)."""


class FailingHook(Hook):
    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise Boom("the hook's own failure")


class InterruptingHook(Hook):
    """Ctrl-C's `KeyboardInterrupt` where the trainer's handler does not take it (raised
    by Python's own SIGINT handler in code that restored it, a library's re-raise...)."""

    def on_train_start(self, *args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt


@pytest.mark.timeout(120)
def test_a_hook_that_raises_records_error_naming_the_exception(tmp_path: Path) -> None:
    trainer = failing_trainer(tmp_path, FailingHook())
    with pytest.raises(Boom, match="the hook's own failure"):
        trainer.train()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "error", reason  # (before: "stopped")
    assert "Boom" in reason["message"] and "the hook's own failure" in reason["message"]
    assert "\n" not in reason["message"]


@pytest.mark.timeout(120)
def test_a_raw_keyboard_interrupt_records_preempted(tmp_path: Path) -> None:
    """Ctrl-C's `KeyboardInterrupt` that the trainer's handler did not turn into a
    preemption records ``preempted``, not ``stopped``: no checkpoint was written at this
    stop, so a solver must not take the record's receipts as final (``stopped`` confirms
    a BYE the record holds: the solver's close returned and it exited, while a run
    resumed from the latest checkpoint lacked its last steps); with ``preempted`` it
    waits for the resumed run and follows it (`client.stopped`), as after Ctrl-C taken
    by the handler. The interrupt itself propagates unchanged."""
    trainer = failing_trainer(tmp_path, InterruptingHook())
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "preempted", reason  # (before: "stopped")
    assert "KeyboardInterrupt" in reason["message"], reason


@pytest.mark.timeout(120)
def test_a_forced_exit_records_preempted(tmp_path: Path) -> None:
    """A second signal's forced exit stops the source from the handler's helper thread
    (`PreemptionHandler.on_force`, called here as that thread calls it: the exit itself
    is `os._exit`), with no checkpoint at the stop: recorded ``preempted``, as above, so
    that the solvers follow a resumed run (before: ``stopped``)."""
    from melissa_trainer.trainer.starting import start_training

    trainer = failing_trainer(tmp_path, Hook())
    preemption = start_training(trainer, lambda: None)
    try:
        assert preemption.on_force is not None
        preemption.on_force()
    finally:
        preemption.restore()
        trainer.source.stop()
        trainer._output_hold.release()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "preempted", reason
    assert reason["message"].startswith("forced to exit at step 0, with no checkpoint"), reason
