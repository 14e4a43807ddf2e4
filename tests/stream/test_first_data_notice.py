"""External mode says when training waits for its first data: a `StreamSource` whose
simulations the user starts said nothing while none came (a wrong rendezvous directory,
a simulation not started), so the run looked hung until `stall_timeout` (600 s). Rank 0
now says once, after `FIRST_DATA_NOTICE` s, where it listens and what came; never when
data came in time, nor under a `Study` (which says its own). Real receivers and sockets;
the notice's clock is the test's (`FirstDataWait(clock=...)`), so no test sleeps."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LocalBackend
from melissa_trainer.sources.first_data import FIRST_DATA_NOTICE, FirstDataWait
from melissa_trainer.stream.receiver_config import ReceiverConfig
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.study import Study


class Clock:
    """Seconds that pass when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def external(tmp_path: Path, clock: Clock) -> StreamSource:
    source = StreamSource(ReceiverConfig(expected_simulations=1, rendezvous_dir=tmp_path))
    source.first_data = FirstDataWait(clock=clock)
    return source


@pytest.fixture
def started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> Iterator[tuple[StreamSource, FIFOBuffer, Clock]]:
    """An external source started on a FIFO of 8, its notice on the test's clock, its
    WARNINGs captured; stopped after the test."""
    clock = Clock()
    source, buffer = external(tmp_path, clock), FIFOBuffer(8)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.stream")
    source.start(buffer, 0, 1)
    try:
        yield source, buffer, clock
    finally:
        source.stop()


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("no data yet")]


def test_the_wait_is_due_once_after_its_seconds_with_no_sample() -> None:
    clock = Clock()
    wait = FirstDataWait(after=10, clock=clock)
    assert wait.due(0) is None  # not started
    wait.started(samples=3)  # (a resume's samples are not new data)
    clock.now += 9.5
    assert wait.due(3) is None
    clock.now += 1
    assert wait.due(3) == pytest.approx(10.5)
    clock.now += 100
    assert wait.due(3) is None  # once
    quiet = FirstDataWait(after=10, clock=clock)
    quiet.started(samples=0)
    assert quiet.due(1) is None  # a sample came in time...
    clock.now += 100
    assert quiet.due(1) is None  # ...nothing to say, ever
    assert FirstDataWait().after == FIRST_DATA_NOTICE == 15.0


@pytest.mark.timeout(30)
def test_no_data_is_said_once_naming_where_it_listens(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    started: tuple[StreamSource, FIFOBuffer, Clock],
) -> None:
    source, _, clock = started
    clock.now += FIRST_DATA_NOTICE - 0.1
    source.wait_for(1, 0.01)  # as the trainer's reader waits
    assert notices(caplog) == []
    clock.now += 0.2
    source.wait_for(1, 0.01)
    clock.now += 1000
    source.wait_for(1, 0.01)
    (notice,) = notices(caplog)
    assert f"15 s after the receiver started listening on {source.endpoint}:" in notice
    assert "no simulation has connected and sent anything" in notice
    assert "Resumed" not in notice  # (a first start: nothing to run again)
    assert f"MELISSA_TRAINER_RENDEZVOUS={tmp_path}" in notice
    assert "MELISSA_TRAINER_SIMULATION_ID" in notice and "600 s" in notice


@pytest.mark.timeout(30)
def test_messages_without_a_sample_are_counted_in_the_notice(
    caplog: pytest.LogCaptureFixture, started: tuple[StreamSource, FIFOBuffer, Clock]
) -> None:
    """A client of another protocol (or refused at its HELLO): messages, no sample."""
    source, _, clock = started
    assert source.receiver is not None and source.endpoint is not None
    context = zmq.Context()
    push = context.socket(zmq.PUSH)
    try:
        push.connect(source.endpoint)
        push.send(b"not a melissa-trainer message")
        while source.receiver.ingest.messages < 1:  # ingested by the reader's waits
            source.wait_for(1, 0.05)
        assert notices(caplog) == []
        clock.now += FIRST_DATA_NOTICE
        source.wait_for(1, 0.01)
    finally:
        push.close(linger=0)
        context.term()
    (notice,) = notices(caplog)
    assert "1 message came, no complete sample" in notice
    assert f"listening on {source.endpoint}" in notice


@pytest.mark.timeout(30)
def test_data_in_time_silences_the_notice(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    started: tuple[StreamSource, FIFOBuffer, Clock],
) -> None:
    from melissa_trainer.client import Client

    source, buffer, clock = started
    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.setenv("MELISSA_TRAINER_SIMULATION_ID", "3")
    with Client({"u": ((2,), "float32")}) as client:
        client.send(0, u=np.zeros(2, np.float32))
        while len(buffer) < 1:
            source.wait_for(1, 0.05)
        clock.now += 10 * FIRST_DATA_NOTICE  # long after: the sample came first
        source.wait_for(2, 0.01)
    assert notices(caplog) == []


def test_a_study_turns_the_stream_notice_off(tmp_path: Path) -> None:
    """A study says its own notice (`study.first_data`), with the launcher's counts."""
    launcher = Launcher([sys.executable, "-c", "pass"], [{"a": 0.0}], 1, backend=LocalBackend())
    stream = StreamSource()
    assert stream.first_data is not None  # on by default: external mode
    study = Study(launcher, stream)
    assert stream.first_data is None and study.first_data.after == FIRST_DATA_NOTICE


@pytest.mark.timeout(60)
def test_a_resumed_source_names_the_simulations_to_run_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart the solvers that streamed before it do not follow the trainer
    (docs/how-to/own-solver.md): the notice of a resumed source names the simulations
    its record holds unfinished (5: two of its three steps came), not the finished one
    (3), and says to run them again with the same ids. Before, it said only that no
    simulation had connected."""
    from melissa_trainer.client import Client

    monkeypatch.setenv("MELISSA_TRAINER_RENDEZVOUS", str(tmp_path))
    monkeypatch.delenv("MELISSA_TRAINER_ENDPOINTS", raising=False)
    monkeypatch.delenv("MELISSA_TRAINER_RUN_ID", raising=False)
    clock = Clock()
    config = ReceiverConfig(expected_simulations=3, rendezvous_dir=tmp_path)
    first, buffer = StreamSource(config), FIFOBuffer(8)
    first.start(buffer, 0, 1)
    try:
        with Client({"u": ((2,), "float32")}, simulation_id=3) as finished:
            finished.send(0, u=np.zeros(2, np.float32))
        running = Client({"u": ((2,), "float32")}, simulation_id=5)
        running.send(0, u=np.zeros(2, np.float32))
        running.send(1, u=np.zeros(2, np.float32))
        running.flush()
        while len(buffer) < 3 or first.finished_simulations() != [3]:
            first.wait_for(3, 0.05)
        state = first.state_dict()
        running.close(bye=False)
    finally:
        first.stop()
    resumed = StreamSource(config)  # (the same buffer: its put count is the record's)
    resumed.first_data = FirstDataWait(clock=clock)
    resumed.load_state_dict(state)
    caplog.set_level(logging.WARNING, logger="melissa_trainer.stream")
    resumed.start(buffer, 0, 1)
    try:
        clock.now += FIRST_DATA_NOTICE
        resumed.wait_for(4, 0.01)
    finally:
        resumed.stop()
    (notice,) = notices(caplog)
    held = "which holds 1 finished simulation (of the 3 expected) and 1 unfinished: 5."
    assert f"Resumed from a checkpoint, {held}" in notice, notice
    assert "run each of those again, with the same MELISSA_TRAINER_SIMULATION_ID" in notice
    assert "the Python, C and Fortran clients" in notice


@pytest.mark.parametrize(
    ("finished", "expected", "said"),
    [
        (0, 2, "holds 0 finished simulations (of the 2 expected)."),
        (1, 2, "holds 1 finished simulation (of the 2 expected)."),
        (2, None, "holds 2 finished simulations."),
    ],
)
def test_the_resumed_note_counts_in_english(finished: int, expected: int | None, said: str) -> None:
    from melissa_trainer.stream.no_data_notice import _resumed_note

    assert _resumed_note(((), finished), expected) == f" Resumed from a checkpoint, which {said}"
