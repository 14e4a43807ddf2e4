"""A forced exit (a second signal, or a launcher gone for good: `trainer.starting.
forced_stop`) writes its stop record with the stop's cause first, as a normal stop's
record does ("stopped by SIGTERM", "stopped because the launcher (...) is gone"), then
the forced exit. Before, the record said "forced to exit at step N, ..." alone: a solver
(or its user) reading why its trainer went could not tell a signal from the launcher's
death. The oracle is the rendezvous file the receiver wrote, read as JSON."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from stop_records import failing_trainer, recorded_reason

from melissa_trainer.hooks import Hook
from melissa_trainer.trainer.starting import forced_stop, start_training
from melissa_trainer.trainer.stop_cause import StopCause

FORCED = "forced to exit at step 0, with no checkpoint at this stop"


@pytest.mark.timeout(120)
def test_a_forced_exit_after_sigterm_records_the_signal(tmp_path: Path) -> None:
    """A real SIGTERM (the first request), then the forced exit as the handler's helper
    thread does it (`on_force`; the exit itself, `os._exit`, is not called here)."""
    trainer = failing_trainer(tmp_path, Hook())
    preemption = start_training(trainer, lambda: None)
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # (the handler notes it: no exit)
        assert preemption.requested() and preemption.cause == StopCause(signal.SIGTERM)
        assert preemption.on_force is not None
        helper = threading.Thread(target=preemption.on_force)  # (as the handler calls it)
        helper.start()
        helper.join()
    finally:
        preemption.restore()
        trainer.source.stop()
        trainer._output_hold.release()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "preempted", reason
    assert reason["message"].startswith(f"stopped by SIGTERM, then {FORCED}"), reason


@pytest.mark.timeout(120)
def test_a_forced_exit_after_the_launchers_death_records_it(tmp_path: Path) -> None:
    trainer = failing_trainer(tmp_path, Hook())
    preemption = start_training(trainer, lambda: None)
    gone = StopCause(signal.SIGTERM, 4242, "accelerate launch")
    try:
        forced_stop(trainer, SimpleNamespace(cause=gone))  # type: ignore[arg-type]
    finally:
        preemption.restore()
        trainer.source.stop()
        trainer._output_hold.release()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "preempted", reason
    said = reason["message"]
    assert said.startswith(
        f"stopped because the launcher (accelerate launch, pid 4242) is gone, then {FORCED}"
    ), reason
