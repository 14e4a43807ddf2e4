"""A rank whose collective failed because another rank is gone holds SIGTERM first
(`failing.failed`, `exit_meeting.hold_term`): the launcher's SIGTERM, sent as it sees
the other rank's exit while this rank waits for that rank's note, is dropped and said
at exit as the launcher's, and the preemption handler, whose wakeup descriptor hears
every signal with a Python handler, takes no stop request from a signal another
handler has (`PreemptionHandler._on_signal`).

Before, the handler's watcher thread took any SIGTERM it heard while training ran for
its own, and said "stopping at the next stop synchronisation to write a checkpoint":
the real two-rank run (tests/trainer/test_peer_killed_in_backward.py) said it with the
hold in place, the hold's own line after it. In process here: the handler installed,
the signal raised during the note's wait (a stub), the watcher's reads finished by
`restore` (it reads what is left before it ends), never a sleep."""

from __future__ import annotations

import logging
import os
import signal
from types import SimpleNamespace

import pytest

from melissa_trainer.trainer import exit_meeting, failing
from melissa_trainer.trainer.exit_meeting import hold_term, said_dropped
from melissa_trainer.trainer.preemption import PreemptionHandler
from melissa_trainer.trainer.rank_failure import RankGone
from melissa_trainer.trainer.stop_cause import StopCause

STOPPING = "stopping at the next stop synchronisation"


@pytest.mark.timeout(60)
def test_a_signal_another_handler_has_is_no_stop_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    before = signal.getsignal(signal.SIGTERM)
    exit_meeting._dropped[0] = 0
    handler = PreemptionHandler(parent=None, exit=lambda code: None).install()
    try:
        assert hold_term(previous=handler.previous_term())  # (over the handler's)
        signal.raise_signal(signal.SIGTERM)
        handler.restore()  # (its watcher has read the signal then)
        said_dropped()
    finally:
        handler.restore()
        signal.signal(signal.SIGTERM, before)
    assert not handler.requested(), caplog.text
    assert STOPPING not in caplog.text, caplog.text
    assert "1 SIGTERM(s) ignored after the end of training" in caplog.text, caplog.text


@pytest.mark.timeout(60)
def test_a_lost_peers_failure_holds_sigterm_during_the_note_wait(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    waits: list[object] = []

    def note_wait(trainer: object, error: BaseException) -> RankGone:
        waits.append(signal.getsignal(signal.SIGTERM))
        signal.raise_signal(signal.SIGTERM)  # (the launcher's, as it sees the peer's exit)
        return RankGone("another rank is gone and left no note of why")  # (no note came)

    # (a gloo error raised by the backend is what `lost_a_peer` tells; stubbed here, and
    # the note's wait and write, which read the output directory)
    monkeypatch.setattr(failing, "lost_a_peer", lambda error: True)
    monkeypatch.setattr(failing, "peer_failure", note_wait)
    monkeypatch.setattr(failing, "write_note", lambda trainer, error: None)
    stops: list[str] = []
    trainer = SimpleNamespace(
        num_processes=2,
        hooks=SimpleNamespace(marker=None),  # (no hook mark: `dir_lost.gone_under` not asked)
        state=SimpleNamespace(global_step=7),
        source=SimpleNamespace(note_stop=lambda kind, words: stops.append(kind)),
    )
    before = signal.getsignal(signal.SIGTERM)
    exit_meeting._dropped[0] = 0
    handler = PreemptionHandler(parent=None, exit=lambda code: None).install()
    try:
        with pytest.raises(RankGone, match="another rank is gone and left no note of why"):
            failing.failed(trainer, RuntimeError("Connection closed by peer"), handler)  # type: ignore[arg-type]
        handler.restore()
        said_dropped()
    finally:
        handler.restore()
        signal.signal(signal.SIGTERM, before)
    assert waits and waits[0] != handler._note, waits  # (held before the wait)
    assert stops == ["preempted"], stops
    assert not handler.requested() and STOPPING not in caplog.text, caplog.text
    assert "1 SIGTERM(s) ignored after the end of training" in caplog.text, caplog.text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("first", ["SIGTERM", "the launcher's death"])
def test_a_stop_before_the_lost_peers_failure_is_told_its_checkpoint_will_not_come(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, first: str
) -> None:
    """The other order: the launcher's SIGTERM reaches the handler before this rank's
    collective fails (a rank descheduled past the agent's 0.1 s poll): the handler's
    "stopping ... to write a checkpoint" was said and true when said; the failure then
    says that checkpoint will not be written (before: nothing did), naming the stop's
    cause (before, a launcher's death was named "SIGTERM", which nobody sent)."""
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    caplog.set_level(logging.WARNING, logger="melissa_trainer")
    monkeypatch.setattr(failing, "lost_a_peer", lambda error: True)
    monkeypatch.setattr(failing, "peer_failure", lambda trainer, error: RankGone("gone"))
    monkeypatch.setattr(failing, "write_note", lambda trainer, error: None)
    trainer = SimpleNamespace(
        num_processes=2,
        hooks=SimpleNamespace(marker=None),  # (no hook mark: `dir_lost.gone_under` not asked)
        state=SimpleNamespace(global_step=7),
        source=SimpleNamespace(note_stop=lambda kind, words: None),
    )
    before = signal.getsignal(signal.SIGTERM)
    exit_meeting._dropped[0] = 0
    handler = PreemptionHandler(parent=None, exit=lambda code: None).install()
    try:
        if first == "SIGTERM":
            signal.raise_signal(signal.SIGTERM)  # (first: the handler's request)
        else:  # (as the launcher watch requests it)
            assert handler._first_request(StopCause.launcher_gone(os.getppid()))
        assert handler.requested()
        with pytest.raises(RankGone):
            failing.failed(trainer, RuntimeError("Connection closed by peer"), handler)  # type: ignore[arg-type]
        handler.restore()
    finally:
        handler.restore()
        signal.signal(signal.SIGTERM, before)
    said = f"{handler.cause}: the checkpoint this stop asked for will not be written"
    assert said in caplog.text, caplog.text
    if first != "SIGTERM":
        assert said.startswith("the launcher (") and "SIGTERM" not in said, said
