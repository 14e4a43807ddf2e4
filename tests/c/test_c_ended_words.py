"""What both clients tell a simulation whose trainer's run ended (stop record ``end``)
before it read this simulation's messages (client/stop_kinds.py `ENDED`, the C client's
clients/c/src/stop_said.c `ENDED_WORDS`): an end on max_steps is not final, a trainer
resumed with a larger --max_steps trains on (checkpoint/resume_end.py
`warn_nothing_to_train` advises it), so the simulation should be run again then; an end
of stream or a hook's stop leaves nothing to do. The record does not say which (its
reason is a sentence): the words say both, each with its condition.

Before, both said "nothing is to be resumed or run again for this run (a trainer
resumed from its end stops at once)", false after a max_steps end.

The oracle of the C words: the Python close against the same dead trainer and record,
word for word (as tests/c/test_c_close_for_good.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from predict_script import Script, zctx  # noqa: F401 (a fixture)
from test_c_close_dead_trainer import close_to_dead
from test_c_close_receipt import RUN, STEPS
from test_c_close_stop_first import python_close
from test_c_close_stop_record import ingest
from test_c_follow_resend_gone import dead_endpoint

from melissa_trainer.client.closing import TrainerStopped
from melissa_trainer.client.stop_kinds import ENDED
from melissa_trainer.stream.stop_record import StopReason, build_record

MT_ETIMEDOUT = 8
SETUP = ("disconnected_timeout 3", "replay_bytes 0")


def test_the_python_words_say_a_max_steps_end_trains_on_with_a_larger_max_steps() -> None:
    assert "a larger --max_steps trains on" in ENDED, ENDED
    assert "run this simulation again then, with the same simulation id" in ENDED, ENDED
    assert "If it ended at its stream's end or on a hook's stop, nothing is to be" in ENDED
    assert "stops at once" not in ENDED, ENDED  # (false after a max_steps end)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_c_close_says_the_same_words(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = build_record(ingest({}, {}), RUN, StopReason("end", "max_steps 7 reached"))
    rendezvous, dead = tmp_path / "ended", dead_endpoint(zctx)
    code, message, err = close_to_dead(script_exe, rendezvous, dead, SETUP, record)
    assert code == MT_ETIMEDOUT, (message, err)
    assert message.endswith(ENDED), message
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    python = python_close(rendezvous, dead, record, TrainerStopped)
    assert message == python  # (the oracle)


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_the_c_close_says_how_many_steps_were_taken_as_python_does(
    script_exe: Path,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The record holds 1 step of simulation 3 (its ``unfinished``), which sent STEPS
    that were not delivered: both clients say so, in the same words (a user trial,
    htrial6: neither said what the trainer had taken). Failed before: no counts."""
    record = build_record(ingest({}, {3: {}}), RUN, StopReason("end", "max_steps 7 reached"))
    rendezvous, dead = tmp_path / "ended", dead_endpoint(zctx)
    code, message, err = close_to_dead(script_exe, rendezvous, dead, SETUP, record)
    assert code == MT_ETIMEDOUT, (message, err)
    taken = f"; it had taken 1 of the {STEPS} time steps this simulation sent it). "
    assert taken in message, message
    assert message.endswith(ENDED), message
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(rendezvous))
    for name in ("MELISSA_TRAINER_ENDPOINTS", "MELISSA_TRAINER_RUN_ID", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    python = python_close(rendezvous, dead, record, TrainerStopped)
    assert message == python  # (the oracle)
