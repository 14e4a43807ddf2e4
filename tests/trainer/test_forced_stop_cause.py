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
from melissa_trainer.stream.launch_restarts import NO_RESTART_FOLLOWS
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("count", [0, 1], ids=["restarts left", "no restart left"])
def test_a_forced_exit_under_torchrun_says_whether_a_restart_follows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Under torchrun (``--max_restarts 1``), a forced exit's ``preempted`` says, on the
    last attempt, that no restart follows, in the words a rank stopped by a peer gone
    with no note says (`launch_restarts.NO_RESTART_FOLLOWS`): its solvers wait for a
    resume only a person makes. With a restart left, nothing more (as that path).
    Failed before (task hrestart4): the forced exit said it on no attempt."""
    trainer = failing_trainer(tmp_path, Hook())
    preemption = start_training(trainer, lambda: None)
    env = {"TORCHELASTIC_RUN_ID": "t", "TORCHELASTIC_MAX_RESTARTS": "1"}
    for name, value in {**env, "TORCHELASTIC_RESTART_COUNT": str(count)}.items():
        monkeypatch.setenv(name, value)  # (after the set-up: a torchrun worker's variables)
    try:
        forced_stop(trainer, SimpleNamespace(cause=StopCause(signal.SIGTERM)))  # type: ignore[arg-type]
    finally:
        preemption.restore()
        trainer.source.stop()
        trainer._output_hold.release()
    reason = recorded_reason(tmp_path)
    assert reason["code"] == "preempted", reason
    assert reason["message"].startswith(f"stopped by SIGTERM, then {FORCED}"), reason
    assert reason["message"].endswith(f"; {NO_RESTART_FOLLOWS}") == (count == 1), reason
