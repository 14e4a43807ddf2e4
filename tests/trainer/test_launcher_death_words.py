"""What a rank says when its launcher died (`trainer.stop_cause.StopCause`): the cause
travels with the stop request as one integer the ranks agree on (MAX), and every line
built from it names the launcher, not a SIGTERM nobody sent. The whole path under a
real ``accelerate launch`` killed -9 is test_launcher_death_cause.py."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.trainer.preempted import Preempted
from melissa_trainer.trainer.preemption import PreemptionHandler
from melissa_trainer.trainer.stop_asked import stop_words
from melissa_trainer.trainer.stop_cause import StopCause, kind_of, launcher_kind

GONE = StopCause(signal.SIGTERM, 4242, "accelerate launch")


@pytest.mark.parametrize(
    "cause",
    [
        StopCause(signal.SIGTERM),
        StopCause(signal.SIGINT),
        GONE,
        StopCause(signal.SIGTERM, 4_194_304, "torchrun"),  # pid_max on 64-bit Linux
        StopCause(signal.SIGTERM, 77),  # a launcher of no known kind
    ],
)
def test_a_cause_survives_its_code(cause: StopCause) -> None:
    assert StopCause.of(cause.code) == cause
    assert StopCause.signal_of(cause.code) == cause.signum
    assert cause.code < 2**63  # (an int64 in the ranks' agreement)


def test_no_code_is_no_cause() -> None:
    assert StopCause.of(0) is None


def test_the_launchers_death_outranks_a_signal_in_the_agreement() -> None:
    """MAX over ranks: SIGTERM over SIGINT, as before; a launcher's death over both (a
    rank that got a SIGTERM as its launcher died says the death)."""
    codes = [StopCause(signal.SIGINT).code, StopCause(signal.SIGTERM).code, GONE.code]
    assert StopCause.of(max(codes)) == GONE
    assert StopCause.of(max(codes[:2])) == StopCause(signal.SIGTERM)


def test_every_line_names_the_launcher_not_sigterm() -> None:
    control = TrainerControl()
    assert stop_words(GONE.code, control) == (
        "stopped because the launcher (accelerate launch, pid 4242) is gone"
    )
    assert stop_words(StopCause(signal.SIGTERM).code, control) == "stopped by SIGTERM"
    said = str(Preempted(signal.SIGTERM, 57, "out/checkpoint-57", GONE))
    assert said.startswith(
        "stopped at step 57 because the launcher (accelerate launch, pid 4242) is gone; "
        "checkpoint out/checkpoint-57; resume with the same command and "
        "resume_from_checkpoint='latest'"
    ), said
    assert "SIGTERM" not in said
    assert Preempted(signal.SIGTERM, 57, "c", GONE).code == 143  # as a SIGTERM's stop
    assert str(Preempted(signal.SIGTERM, 57, "c")).startswith("preempted by SIGTERM at step 57")


def test_a_signal_is_its_own_cause_in_the_handler() -> None:
    """The handler's code is what the trainer's agreement carries: a signal's own."""
    handler = PreemptionHandler(parent=None).install()
    try:
        assert handler.cause is None and handler.code == 0
        handler._on_signal(signal.SIGTERM)  # (as the watcher thread would)
        assert handler.cause == StopCause(signal.SIGTERM)
        assert handler.code == StopCause(signal.SIGTERM).code and handler.reason == "SIGTERM"
    finally:
        handler.restore()


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        ([sys.executable, "-m", "accelerate.commands.launch", "x.py"], "accelerate launch"),
        ([sys.executable, "/venv/bin/accelerate", "launch", "x.py"], "accelerate launch"),
        (["/venv/bin/accelerate", "launch", "--multi_gpu", "x.py"], "accelerate launch"),
        (["/venv/bin/torchrun", "--nproc-per-node", "2", "x.py"], "torchrun"),
        ([sys.executable, "-m", "torch.distributed.run", "x.py"], "torchrun"),
        ([sys.executable, "/venv/bin/accelerate", "config"], ""),
        (["sh", "-c", "python x.py"], ""),
    ],
)
def test_a_launcher_is_named_by_its_command_line(argv: list[str], kind: str) -> None:
    assert kind_of(argv) == kind


def test_a_process_that_is_no_launcher_or_gone_has_no_kind() -> None:
    assert launcher_kind(os.getpid()) == ""  # (pytest)
    assert launcher_kind(2**30) == ""  # no such process
